// A Hugging Face GPT-2's tensors (transformers' names and Conv1D layout) read from its folder
// and turned into the GPT's state, and the GPT's state written out as them.
//
// transformers' GPT-2 stores Linear layers as Conv1D: weight [in, out], y = x W + b, and Q, K, V
// as one c_attn [d, 3d]. The GPT's Linear is torch.nn.Linear's [out, in], one module per
// projection slot (nn/sharing.h). Names may carry GPT2LMHeadModel's "transformer." prefix or
// not (GPT2Model's files); the output layer is the token embedding (tied), so a file's
// lm_head.weight, when present, must equal transformer.wte.weight.
#pragma once
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "lab/infer/hf/gpt2_config.h"
#include "lab/infer/hf/tensors.h"
#include "nn/models/gpt.h"

namespace qkv::infer {

// The state of the QKV GPT of `c` (nn::GPT::load_state_dict's names, float32). IOError naming
// the file and tensor for one that is missing, of the wrong shape, not floating point, unknown,
// or an lm_head.weight that differs from the embedding.
std::map<std::string, Tensor> gpt_state_from_hf(const HfTensors& tensors, const HfGpt2Config& c);

// The tensors a GPT2LMHeadModel computing what `model` computes loads, by transformers' names
// ("transformer." prefix, no lm_head: tied), float32. A shared projection is written as the
// copies of it each role stands for, the KV heads of GQA/MQA are repeated for their query
// heads, a low-rank V residual is folded into V's weights, missing biases are zeros.
// ValueError for what GPT-2 cannot express: 2D positional scores, linear attention.
std::vector<std::pair<std::string, Tensor>> hf_tensors_of(const nn::GPT& model);

}  // namespace qkv::infer
