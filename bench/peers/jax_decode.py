#!/usr/bin/env python3
"""JAX twin of bench/torch_decode.py: greedy decoding of qkvlab's GPT (jax_models.py) with a KV
cache, for bench_decode. The cache is one array per layer and distinct K/V projection
([B, kv_heads, context, d_head]; K=V: one array serving both), preallocated for prompt + warm-up
+ new tokens and donated to a jax.jit of the decode step, which writes the new row in place
(lax.dynamic_update_slice) and attends over the whole cache with the rows past the position
masked (static shapes: one compiled step for every position). Same arguments and output as
torch_decode.py: one JSON line {"ms_per_step": ..., "tokens_per_s": ...}, or with --serve
{"ready": true, ...} after the prefill and warm-up, then {"times_ms": [...]} for each line N.

  build/peers-venv/bin/python bench/peers/jax_decode.py --vocab 50257 --layers 12 --d-model 768 \
      --heads 12 --slots q,k,k --batch 8 --prompt 1024 --new-tokens 32 --threads 2
Threads: PJRT_NPROC=N before JAX starts (see jax_step.py). Exit 77 when JAX is not installed.
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # jax_models, jax_cpu; bench/peer_protocol
from jax_cpu import start_jax  # noqa: E402
from peer_protocol import decode_arguments, fail, report_decode, run_main  # noqa: E402


ap = argparse.ArgumentParser()
decode_arguments(ap)
a = ap.parse_args()
jax = start_jax(a.threads)
import jax.numpy as jnp  # noqa: E402
import jax_models as M  # noqa: E402

SLOTS = a.slots.split(",")
KV_SLOTS = list(dict.fromkeys(SLOTS[1:]))  # one cache array per distinct K/V projection


def forward(params, cache, ids, start):
    """ids [B, T] at positions start.. start + T - 1: writes their K/V rows, returns the next
    tokens (greedy) and the cache."""
    B, T = ids.shape
    context = cache[0][KV_SLOTS[0]].shape[2]
    pos = start + jnp.arange(T)
    x = params["wte"][ids] + params["wpe"][pos]
    hk = a.kv_heads or a.heads
    g = a.heads // hk
    mask = jnp.arange(context)[None, :] <= jnp.tile(pos, g)[:, None]
    new_cache = []
    for b, layer in zip(params["blocks"], cache):
        h = M.layer_norm(b["ln1"], x)
        out = M.projections(b["attn"], h, a.heads, SLOTS, a.kv_heads)
        layer = {s: jax.lax.dynamic_update_slice(layer[s], out[s], (0, 0, start, 0)) for s in KV_SLOTS}
        y = M.attend(out[SLOTS[0]], layer[SLOTS[1]], layer[SLOTS[2]], mask)
        x = x + M.linear(b["attn"]["o"], y.transpose(0, 2, 1, 3).reshape(B, T, -1))
        x = x + M.linear(b["proj"], M.gelu(M.linear(b["fc"], M.layer_norm(b["ln2"], x))))
        new_cache.append(layer)
    logits = M.layer_norm(params["ln_f"], x[:, -1:]) @ params["wte"].T
    return logits.argmax(-1).astype(jnp.int32), new_cache


def main():
    context = a.prompt + a.warmup + a.new_tokens
    key = jax.random.key(0)
    params = M.gpt_init(key, a.vocab, max(a.context, context), a.d_model, a.layers, a.heads, SLOTS, a.kv_heads)
    dh, hk = a.d_model // a.heads, a.kv_heads or a.heads
    cache = [{s: jnp.zeros((a.batch, hk, context, dh), jnp.float32) for s in KV_SLOTS} for _ in range(a.layers)]
    step = jax.jit(forward, donate_argnums=(1,))
    ids = jax.random.randint(jax.random.fold_in(key, 1), (a.batch, a.prompt), 0, a.vocab, jnp.int32)
    state = {"length": a.prompt}
    state["next"], state["cache"] = step(params, cache, ids, 0)

    def decode():
        state["next"], state["cache"] = step(params, state["cache"], state["next"], state["length"])
        jax.block_until_ready((state["next"], state["cache"]))
        state["length"] += 1

    for _ in range(a.warmup):
        decode()
    threads = int(os.environ.get("PJRT_NPROC", os.cpu_count()))
    about = {"name": f"JAX {jax.__version__}", "mode": "jit", "threads": threads, "jax": jax.__version__,
             "parameters": int(sum(x.size for x in jax.tree_util.tree_leaves(params)))}
    report_decode(decode, a, about)


if __name__ == "__main__":
    run_main(main)
