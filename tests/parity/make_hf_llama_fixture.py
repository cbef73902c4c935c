#!/usr/bin/env python3
"""Writes tests/fixtures/hf_llama_tiny and hf_llama_linear: tiny Llamas made and saved by `transformers`.

Each folder is what `save_pretrained` writes for a LlamaForCausalLM (config.json, the safetensors
weights) and its fast tokenizer (tokenizer.json, tokenizer_config.json), plus what the tests
compare against:
  reference.safetensors  "ids" [2, 16] int64 and "logits" [2, 16, vocab] float32: the model's
                         logits for those ids, computed by transformers
  reference_ids.json     {"text", "ids"}: the tokenizer's ids for a text (no special tokens), and
                         {"prompt", "greedy"}: 12 tokens generate() picks greedily after it

hf_llama_tiny: width 64, 2 layers, 4 query heads of 24 dims (not 64 / 4) over 2 KV heads (GQA),
biases on the attention and the MLP, llama3 rotary scaling with an original context of 16 (so
every frequency band is used within 32 positions), an output layer of its own.
hf_llama_linear: 4 heads of 16, as many KV heads, no biases, linear rotary scaling (factor 2),
the output layer tied to the embedding, its weights in two shards with an index.
The tokenizer is Llama 3's layout: a byte-level BPE of 1000 tokens trained on Tiny Shakespeare
behind a Split pre-tokenizer with Llama 3's regex, then ByteLevel without its own regex. The
weights are random and larger than the initialization, norms included. Needs the peers'
environment (bench/peers/setup.sh).

  python tests/parity/make_hf_llama_fixture.py --data ../shared/data [--out tests/fixtures]

With transformers 4.x (rope_theta and rope_scaling where 5.x writes rope_parameters, torch_dtype
where it writes dtype), `--suffix _tf4` writes hf_llama_tiny_tf4 alone: the older layout.
"""
import argparse
import json
import os
import sys

try:
    import torch
    import transformers
    from safetensors.torch import save_file
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
except ImportError as e:
    sys.exit(f"make_hf_llama_fixture: {e}; run it with the peers' environment (bench/peers/setup.sh)")

TEXT = "To be, or not to be: that is the question.\nWhether 'tis nobler in the mind to suffer 1602 slings!"
LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")
BOS, EOS = "<|begin_of_text|>", "<|end_of_text|>"


def tokenizer(corpus):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1000, min_frequency=2, special_tokens=[BOS, EOS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train([corpus], trainer)
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=BOS, eos_token=EOS)


def rope(**parameters):
    """The rotary settings in the layout this transformers takes: rope_parameters from 5.0, before
    that rope_theta and rope_scaling."""
    if int(transformers.__version__.split(".")[0]) >= 5:
        return {"rope_parameters": parameters}
    theta = parameters.pop("rope_theta")
    return {"rope_theta": theta, "rope_scaling": parameters}


def model(vocab, bos, eos, **kw):
    config = transformers.LlamaConfig(vocab_size=vocab, hidden_size=64, num_hidden_layers=2, max_position_embeddings=32,
                                      bos_token_id=bos, eos_token_id=eos, **kw)
    torch.manual_seed(0)
    m = transformers.LlamaForCausalLM(config).eval()
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name.endswith("bias"):
                p.copy_(0.1 * torch.randn_like(p))
            elif "norm" in name:
                p.copy_(1 + 0.2 * torch.randn_like(p))
            else:
                p.copy_(0.08 * torch.randn_like(p))
    return m


def write(out, tok, m, **save):
    os.makedirs(out, exist_ok=True)
    tok.save_pretrained(out)
    m.save_pretrained(out, **save)
    vocab = m.config.vocab_size
    ids = torch.randint(0, vocab, (2, 16), generator=torch.Generator().manual_seed(1))
    prompt = tok(TEXT, add_special_tokens=False, return_tensors="pt")["input_ids"][:, :10]
    with torch.no_grad():
        logits = m(ids).logits.float().contiguous()
        greedy = m.generate(prompt, max_new_tokens=12, do_sample=False, eos_token_id=None, pad_token_id=0)
    save_file({"ids": ids, "logits": logits}, os.path.join(out, "reference.safetensors"))
    with open(os.path.join(out, "reference_ids.json"), "w") as f:
        json.dump({"text": TEXT, "ids": tok(TEXT, add_special_tokens=False)["input_ids"],
                   "prompt": prompt[0].tolist(), "greedy": greedy[0, prompt.shape[1]:].tolist()}, f)
    print(f"wrote {out}: transformers {transformers.__version__}, torch {torch.__version__}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, help="the data folder (holds tinyshakespeare/input.txt)")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "fixtures"))
    ap.add_argument("--suffix", default="", help="write hf_llama_tiny<SUFFIX> alone (an older transformers' layout)")
    a = ap.parse_args()
    
    tok = tokenizer(os.path.join(a.data, "tinyshakespeare", "input.txt"))
    bos, eos = tok.convert_tokens_to_ids(BOS), tok.convert_tokens_to_ids(EOS)
    gqa = model(len(tok), bos, eos, intermediate_size=96, num_attention_heads=4, num_key_value_heads=2, head_dim=24,
                attention_bias=True, mlp_bias=True, tie_word_embeddings=False, rms_norm_eps=1e-5,
                **rope(rope_type="llama3", rope_theta=500.0, factor=4.0, low_freq_factor=1.0, high_freq_factor=4.0,
                       original_max_position_embeddings=16))
    write(os.path.join(a.out, "hf_llama_tiny" + a.suffix), tok, gqa)
    if a.suffix:
        return
    linear = model(len(tok), bos, eos, intermediate_size=80, num_attention_heads=4, num_key_value_heads=4,
                   tie_word_embeddings=True, **rope(rope_type="linear", rope_theta=10000.0, factor=2.0))
    write(os.path.join(a.out, "hf_llama_linear"), tok, linear, max_shard_size="200KB")


if __name__ == "__main__":
    main()
