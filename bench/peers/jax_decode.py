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
import functools
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


def main():
    context = a.prompt + a.warmup + a.new_tokens
    key = jax.random.key(0)
    params = M.gpt_init(key, a.vocab, max(a.context, context), a.d_model, a.layers, a.heads, SLOTS, a.kv_heads)
    cache = M.cache_init(a.batch, context, a.d_model, a.layers, a.heads, SLOTS, a.kv_heads)
    step = jax.jit(functools.partial(M.gpt_cached, heads=a.heads, slots=SLOTS, kv_heads=a.kv_heads),
                   donate_argnums=(1,))
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
