#!/usr/bin/env python3
"""Greedy decoding with a KV cache in PyTorch, for bench_decode: qkvlab's GPT rebuilt by
tests/parity/torch_models.py, its cache preallocated per layer ([B, kv_heads, context, d_head],
one tensor when K and V are the same projection), prefilled with a random prompt, then one token
per step. Prints one JSON line: {"ms_per_step": ..., "tokens_per_s": ...}. With --serve
(bench/torch_session.cpp) it prints {"ready": true, ...} after the prefill and the warm-up steps,
then for each line N read from stdin decodes N tokens and prints {"times_ms": [...]}.

  torch_decode.py --vocab 50257 --context 4160 --layers 12 --d-model 768 --heads 12 \
                  --slots q,k,k --kv-heads 0 --batch 8 --prompt 1024 --new-tokens 32 --threads 2
--mode eager (default): each step attends over the prefix, cache[:, :, :length]. --mode compile
(PyTorch >= 2): torch.compile (inductor) of the decode step in the static-shape form compiled
decoding uses (gpt-fast's): the new rows written at a position tensor, attention over the whole
preallocated cache with the rows past the position masked; the cache holds prompt + warm-up +
new tokens, so a step reads up to that many rows (1-3% more than the prefix at prompt 1024).
--device cuda[:N] (bench_decode --device cuda:0): the model, the cache and every index on the GPU,
each step ending with a device synchronize (qkvlab's step reads its tokens back); --precision
bf16: bfloat16 weights, activations and cache (bench_decode --precision bf16 --cache-dtype bf16).
Exit 77 when PyTorch is not installed.
"""
import argparse
import math
import os
import sys

from peer_protocol import decode_arguments, fail, report_decode, run_main

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    fail(f"PyTorch is not installed in {sys.executable} (Debian: python3-torch; "
         "PyTorch 2: bash bench/peers/setup.sh)", 77)

import torch_gpu  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "parity"))
import torch_models  # noqa: E402


class Cache:
    """Per layer, one preallocated tensor per distinct K/V projection, zeroed (the static form
    multiplies the rows past the position by a softmax weight of 0, and 0 x NaN is NaN)."""

    def __init__(self, model, batch, context):
        a = model.blocks[0].attn
        w = model.wte.weight
        self.kv_slots = list(dict.fromkeys(a.slots[1:]))
        heads = {s: a.h if s == a.slots[0] else a.hk for s in self.kv_slots}  # Q=K-V: K is Q's projection
        self.layers = [{s: torch.zeros(batch, heads[s], context, a.dh, dtype=w.dtype, device=w.device)
                        for s in self.kv_slots} for _ in model.blocks]
        self.length = 0


def projections(attn, x):
    """{slot: [B, its heads, T, d_head]} for each distinct slot."""
    return {name: attn.heads(getattr(attn, name)(x), attn.h if name == attn.slots[0] else attn.hk)
            for name in dict.fromkeys(attn.slots)}


def grouped_attention(attn, q, k, v, allowed):
    """softmax(q k^T / sqrt(d_head)) v with key j hidden from query t unless allowed[t, j] (None:
    none hidden), then the output projection. Each KV head's group of query heads is one block of
    rows against it; when K and V differ in heads (Q=K-V with GQA), both are repeated to Q's."""
    B, _, T, _ = q.shape
    if k.shape[1] != v.shape[1]:
        k, v = (t.repeat_interleave(attn.h // t.shape[1], dim=1) for t in (k, v))
    g = attn.h // k.shape[1]
    q = q.reshape(B, k.shape[1], g * T, attn.dh)  # the group's queries share their KV head
    s = q @ k.transpose(-1, -2) / math.sqrt(attn.dh)
    if allowed is not None:
        s = s.masked_fill(~allowed.repeat(g, 1), float("-inf"))
    y = (torch.softmax(s, dim=-1) @ v).reshape(B, attn.h, T, attn.dh)
    return attn.o(y.transpose(1, 2).reshape(B, T, attn.d))


def attend(attn, x, cache_layer, start):
    """One block's attention over the cache: the new rows are written at `start`, then the T new
    queries attend over [0, start + T) causally."""
    T = x.shape[1]
    out = projections(attn, x)
    for name, buf in cache_layer.items():
        buf[:, :, start:start + T] = out[name]
    n = start + T
    k = cache_layer[attn.slots[1]][:, :, :n]
    v = cache_layer[attn.slots[2]][:, :, :n]
    dev = x.device
    allowed = torch.arange(n, device=dev)[None, :] <= (start + torch.arange(T, device=dev))[:, None] if T > 1 else None
    return grouped_attention(attn, out[attn.slots[0]], k, v, allowed)


def forward_cached(model, ids, cache):
    start = cache.length
    T = ids.shape[1]
    x = model.wte(ids) + model.wpe(torch.arange(start, start + T, device=ids.device))
    for b, layer in zip(model.blocks, cache.layers):
        x = x + attend(b.attn, b.ln1(x), layer, start)
        x = x + b.proj(F.gelu(b.fc(b.ln2(x))))
    cache.length += T
    return F.linear(model.ln_f(x[:, -1:]), model.wte.weight)  # the tied output layer


def attend_static(attn, x, cache_layer, pos):
    """attend() with static shapes: the T new rows written at positions `pos` (a tensor), the
    queries attending over the whole cache, the rows past each query's position masked."""
    out = projections(attn, x)
    for name, buf in cache_layer.items():
        buf[:, :, pos] = out[name]
    k, v = cache_layer[attn.slots[1]], cache_layer[attn.slots[2]]
    allowed = torch.arange(k.shape[2], device=pos.device)[None, :] <= pos[:, None]
    return grouped_attention(attn, out[attn.slots[0]], k, v, allowed)


def forward_static(model, ids, layers, pos):
    x = model.wte(ids) + model.wpe(pos)
    for b, layer in zip(model.blocks, layers):
        x = x + attend_static(b.attn, b.ln1(x), layer, pos)
        x = x + b.proj(F.gelu(b.fc(b.ln2(x))))
    return F.linear(model.ln_f(x[:, -1:]), model.wte.weight).argmax(-1)


class Decoder:
    """The prefilled model; step() decodes one token (eager: forward_cached; compile: the
    compiled forward_static, or with compiled=False, forward_static as it is)."""

    def __init__(self, model, a, compiled=True):
        self.model, self.mode = model, a.mode
        self.dev = model.wte.weight.device
        self.cache = Cache(model, a.batch, a.prompt + a.warmup + a.new_tokens)
        self.prompt = torch.randint(0, a.vocab, (a.batch, a.prompt), device=self.dev)
        if a.mode == "eager":
            self.next = forward_cached(model, self.prompt, self.cache).argmax(-1)
            return
        self.static = forward_static
        if compiled:
            import torch._inductor.config as inductor
            if self.dev.type == "cpu":
                inductor.compile_threads = 1  # no pool of compile processes holding memory
            self.static = torch.compile(forward_static)
        self.next = forward_static(model, self.prompt, self.cache.layers, torch.arange(a.prompt, device=self.dev))
        self.cache.length = a.prompt

    def step(self):
        if self.mode == "eager":
            self.next = forward_cached(self.model, self.next, self.cache).argmax(-1)
        else:
            pos = torch.tensor([self.cache.length], device=self.dev)
            self.next = self.static(self.model, self.next, self.cache.layers, pos)
            self.cache.length += 1
        torch_gpu.synchronize(self.dev)


def main():
    ap = argparse.ArgumentParser()
    decode_arguments(ap)
    ap.add_argument("--mode", choices=["eager", "compile"], default="eager")
    a = ap.parse_args()
    if a.mode == "compile" and not hasattr(torch, "compile"):
        fail(f"PyTorch {torch.__version__} has no torch.compile (PyTorch 2: bash bench/peers/setup.sh)")
    dev, dev_name = torch_gpu.open_device(a.device)
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    cfg = {"vocab": a.vocab, "context": max(a.context, a.prompt + a.warmup + a.new_tokens), "layers": a.layers,
           "d_model": a.d_model, "heads": a.heads, "kv_heads": a.kv_heads, "slots": a.slots.split(","),
           "ffn": 4 * a.d_model}
    (model,) = torch_gpu.build_on(dev, lambda: (torch_models.GPT(cfg),))
    model = model.to(torch.bfloat16 if a.precision == "bf16" else torch.float32).eval()

    with torch.inference_mode():
        decoder = Decoder(model, a)
        for _ in range(a.warmup):
            decoder.step()
        version = torch.__version__.split("+")[0]
        about = {"name": f"torch.compile {version}" if a.mode == "compile" else f"PyTorch {version}",
                 "mode": a.mode, "threads": torch.get_num_threads(), "torch": torch.__version__,
                 "parameters": sum(p.numel() for p in model.parameters())}
        if dev.type == "cuda":
            about.update(device=dev_name, precision=f"{a.precision} weights and cache")
        report_decode(decoder.step, a, about)


if __name__ == "__main__":
    run_main(main)
