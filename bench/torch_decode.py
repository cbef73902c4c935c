#!/usr/bin/env python3
"""Greedy decoding with a KV cache in PyTorch, for bench_decode: qkvlab's GPT rebuilt by
tests/parity/torch_models.py, its cache preallocated per layer ([B, kv_heads, context, d_head],
one tensor when K and V are the same projection), prefilled with a random prompt, then one token
per step. Prints one JSON line: {"ms_per_step": ..., "tokens_per_s": ...}.

  torch_decode.py --vocab 50257 --context 4160 --layers 12 --d-model 768 --heads 12 \
                  --slots q,k,k --kv-heads 0 --batch 8 --prompt 1024 --new-tokens 32 --threads 2
Exit 77 when PyTorch is not installed.
"""
import argparse
import json
import math
import os
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print(json.dumps({"error": "PyTorch is not installed (Debian package python3-torch)"}))
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "parity"))
import torch_models  # noqa: E402


class Cache:
    """Per layer, one preallocated tensor per distinct K/V projection."""

    def __init__(self, model, batch, context):
        a = model.blocks[0].attn
        self.kv_slots = list(dict.fromkeys(a.slots[1:]))
        self.layers = [{s: torch.empty(batch, a.hk, context, a.dh) for s in self.kv_slots} for _ in model.blocks]
        self.length = 0


def attend(attn, x, cache_layer, start):
    """One block's attention over the cache: the new rows are written at `start`, then the T new
    queries attend over [0, start + T) causally."""
    B, T, _ = x.shape
    out = {}
    for name in dict.fromkeys(attn.slots):
        n = attn.h if name == attn.slots[0] else attn.hk
        out[name] = attn.heads(getattr(attn, name)(x), n)
    for name, buf in cache_layer.items():
        buf[:, :, start:start + T] = out[name]
    n = start + T
    k = cache_layer[attn.slots[1]][:, :, :n]
    v = cache_layer[attn.slots[2]][:, :, :n]
    q = out[attn.slots[0]]
    g = attn.h // attn.hk
    q = q.reshape(B, attn.hk, g * T, attn.dh)  # the group's queries share their KV head
    s = q @ k.transpose(-1, -2) / math.sqrt(attn.dh)
    if T > 1:
        pos = torch.arange(T).repeat(g)
        s = s.masked_fill(torch.arange(n)[None, :] > (start + pos)[:, None], float("-inf"))
    y = (torch.softmax(s, dim=-1) @ v).reshape(B, attn.h, T, attn.dh)
    return attn.o(y.transpose(1, 2).reshape(B, T, attn.d))


def forward_cached(model, ids, cache):
    start = cache.length
    T = ids.shape[1]
    x = model.wte(ids) + model.wpe(torch.arange(start, start + T))
    for b, layer in zip(model.blocks, cache.layers):
        x = x + attend(b.attn, b.ln1(x), layer, start)
        x = x + b.proj(F.gelu(b.fc(b.ln2(x))))
    cache.length += T
    return F.linear(model.ln_f(x[:, -1:]), model.wte.weight)  # the tied output layer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--context", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--d-model", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--kv-heads", type=int, default=0)
    ap.add_argument("--slots", default="q,k,v", help="the projection serving Q, K and V (a row of nn/sharing.h)")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    cfg = {"vocab": a.vocab, "context": a.context, "layers": a.layers, "d_model": a.d_model, "heads": a.heads,
           "kv_heads": a.kv_heads, "slots": a.slots.split(","), "ffn": 4 * a.d_model}
    model = torch_models.GPT(cfg).eval()
    with torch.inference_mode():
        cache = Cache(model, a.batch, a.prompt + a.new_tokens)
        ids = torch.randint(0, a.vocab, (a.batch, a.prompt))
        nxt = forward_cached(model, ids, cache).argmax(-1)
        times = []
        for _ in range(a.new_tokens):
            t = time.perf_counter()
            nxt = forward_cached(model, nxt, cache).argmax(-1)
            times.append(time.perf_counter() - t)
    times.sort()
    ms = 1000 * times[len(times) // 2]
    print(json.dumps({"ms_per_step": ms, "tokens_per_s": 1000 * a.batch / ms, "threads": torch.get_num_threads(),
                      "torch": torch.__version__}))


if __name__ == "__main__":
    main()
