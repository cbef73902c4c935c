#!/usr/bin/env python3
"""Writes tests/fixtures/hf_gpt2_tiny: a tiny GPT-2 made and saved by Hugging Face `transformers`.

The folder is what `save_pretrained` writes for a GPT2LMHeadModel (config.json, model.safetensors)
and a GPT2TokenizerFast (vocab.json, merges.txt, tokenizer.json, ...), plus what the tests compare
against:
  reference.safetensors  "ids" [2, 16] int64 and "logits" [2, 16, vocab] float32: the model's
                         logits for those ids, computed by transformers
  reference_ids.json     {"text": ..., "ids": [...]}: the tokenizer's ids for a text, and
                         {"prompt", "greedy"}: 12 tokens generate() picks greedily after its first 10

The model has 2 layers, width 64, 4 heads, 32 positions and GPT-2's gelu_new; its tokenizer is a
byte-level BPE of 1000 tokens trained on Tiny Shakespeare. The weights are random and larger than
GPT-2's initialization, biases and LayerNorms included, so that a misplaced tensor shows in the
logits. Needs the peers' environment (bench/peers/setup.sh): torch, transformers, tokenizers.

  python tests/parity/make_hf_gpt2_fixture.py --data ../shared/data [--out tests/fixtures/hf_gpt2_tiny]

tests/fixtures/hf_gpt2_tiny was written by transformers 4.46 (vocab.json + merges.txt, torch_dtype),
hf_gpt2_tiny_tf5 by transformers 5 (tokenizer.json alone, dtype): both layouts stay tested.
"""
import argparse
import json
import os
import sys

try:
    import torch
    import transformers
    from safetensors.torch import save_file
    from tokenizers import ByteLevelBPETokenizer
except ImportError as e:
    sys.exit(f"make_hf_gpt2_fixture: {e}; run it with the peers' environment (bench/peers/setup.sh)")

TEXT = "To be, or not to be: that is the question.\nWhether 'tis nobler in the mind to suffer 1602 slings!"


def tokenizer(corpus, out):
    bpe = ByteLevelBPETokenizer()  # GPT-2's pre-tokenizer regex, no prefix space
    bpe.train([corpus], vocab_size=1000, min_frequency=2, special_tokens=["<|endoftext|>"], show_progress=False)
    tok = transformers.GPT2TokenizerFast(tokenizer_object=bpe._tokenizer, bos_token="<|endoftext|>",
                                         eos_token="<|endoftext|>", unk_token="<|endoftext|>")
    tok.save_pretrained(out)
    return tok


def model(vocab, eot):
    config = transformers.GPT2Config(vocab_size=vocab, n_positions=32, n_embd=64, n_layer=2, n_head=4,
                                     activation_function="gelu_new", bos_token_id=eot, eos_token_id=eot)
    torch.manual_seed(0)
    m = transformers.GPT2LMHeadModel(config).eval()
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name.endswith("bias"):
                p.copy_(0.1 * torch.randn_like(p))
            elif ".ln_" in name or name.startswith("transformer.ln_f"):
                p.copy_(1 + 0.2 * torch.randn_like(p))
            else:
                p.copy_(0.08 * torch.randn_like(p))
    return m


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, help="the data folder (holds tinyshakespeare/input.txt)")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "fixtures", "hf_gpt2_tiny"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    tok = tokenizer(os.path.join(a.data, "tinyshakespeare", "input.txt"), a.out)
    eot = tok.convert_tokens_to_ids("<|endoftext|>")
    m = model(len(tok), eot)
    m.save_pretrained(a.out, safe_serialization=True)

    ids = torch.randint(0, len(tok), (2, 16), generator=torch.Generator().manual_seed(1))
    prompt = tok(TEXT, return_tensors="pt")["input_ids"][:, :10]
    with torch.no_grad():
        logits = m(ids).logits.float().contiguous()
        greedy = m.generate(prompt, max_new_tokens=12, do_sample=False, eos_token_id=None, pad_token_id=eot)
    save_file({"ids": ids, "logits": logits}, os.path.join(a.out, "reference.safetensors"))
    with open(os.path.join(a.out, "reference_ids.json"), "w") as f:
        json.dump({"text": TEXT, "ids": tok(TEXT)["input_ids"], "prompt": prompt[0].tolist(),
                   "greedy": greedy[0, prompt.shape[1]:].tolist()}, f)
    print(f"wrote {a.out}: transformers {transformers.__version__}, torch {torch.__version__}")


if __name__ == "__main__":
    main()
