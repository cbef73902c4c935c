// A Hugging Face Llama's tensors (LlamaForCausalLM's names, torch.nn.Linear's [out, in] layout)
// turned into the GPT's state in its Llama form, and that state written out as them:
//   model.embed_tokens.weight                    wte.weight
//   model.layers.N.input_layernorm.weight        blocks.N.ln1.weight
//   model.layers.N.self_attn.{q,k,v,o}_proj.*    blocks.N.attn.{q,k,v,o}.*
//   model.layers.N.post_attention_layernorm.*    blocks.N.ln2.weight
//   model.layers.N.mlp.{gate,up}_proj.*          blocks.N.fc.* (gate's rows, then up's)
//   model.layers.N.mlp.down_proj.*               blocks.N.proj.*
//   model.norm.weight                            ln_f.weight
//   lm_head.weight                               lm_head.weight (absent when tied; present, it
//                                                must equal the embedding)
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "lab/infer/hf/llama_config.h"
#include "lab/infer/hf/tensors.h"
#include "nn/models/gpt.h"

namespace qkv::infer {

// The state of the QKV GPT of `c` (float32). IOError naming the file and tensor for one that is
// missing, of the wrong shape, not floating point, not part of the model, or a tied lm_head
// that differs from the embedding.
std::map<std::string, Tensor> llama_state_from_hf(const HfTensors& tensors, const HfLlamaConfig& c);

// The tensors a LlamaForCausalLM computing what `model` computes loads, float32: a shared
// projection written as the copies of it each role stands for (K=V: k_proj = v_proj), the KV
// heads of GQA/MQA as they are, a low-rank V residual folded into v_proj. ValueError for what a
// Llama cannot express (check_llama_expressible).
std::vector<std::pair<std::string, Tensor>> hf_llama_tensors_of(const nn::GPT& model);

}  // namespace qkv::infer
