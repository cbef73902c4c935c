#!/usr/bin/env python3
"""JAX twin of bench/torch_step.py: times training steps (forward, cross-entropy, backward, AdamW)
of qkvlab's encoder, ViT and GPT written in JAX (jax_models.py), one jax.jit of the whole step with
the parameters and optimizer state donated (updated in place). Same arguments, same output: one
JSON line {"ms_per_step": ...}, or with --serve {"ready": true, ...} once warmed up and then, for
each line "N [fp32]" read from stdin, {"times_ms": [...]} of N steps (bench/torch_session.cpp).
float32 only: XLA's CPU backend computes bf16 dots in float32 (it converts the operands), so
--precision fp32,bf16 serves fp32 and says why not bf16.

  build/peers-venv/bin/python bench/peers/jax_step.py encoder --d-model 64 --length 64 --threads 2
  build/peers-venv/bin/python bench/peers/jax_step.py gpt --vocab 50257 --d-model 768 --layers 12 \
      --heads 12 --length 64 --batch 4 --threads 2
Threads: PJRT_NPROC=N, set before JAX starts (jaxlib 0.4.35's CPU client sizes its thread pool by
it; XLA_FLAGS' intra_op_parallelism_threads is not read). Dropout draws from JAX's "rbg" PRNG.
Exit 77 when JAX is not installed (bash bench/peers/setup.sh).
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # jax_models, jax_cpu; bench/peer_protocol
from jax_cpu import start_jax  # noqa: E402
from peer_protocol import fail, run_main, serve, step_arguments, times_ms  # noqa: E402


def parse():
    ap = argparse.ArgumentParser()
    step_arguments(ap)
    ap.add_argument("--precision", default="fp32", help="fp32 (bf16 is accepted, and not served)")
    return ap.parse_args()


a = parse()
NO_BF16 = "XLA's CPU backend computes bf16 dots in float32 (it converts the operands)"
if "fp32" not in a.precision.split(","):
    fail(f"JAX runs fp32 only here: {NO_BF16}")
jax = start_jax(a.threads)
jax.config.update("jax_default_prng_impl", "rbg")
import jax.numpy as jnp  # noqa: E402
import jax_models as M  # noqa: E402


def build(key):
    """Parameters, the loss of (params, inputs, targets, dropout key), inputs, targets, lr, decay."""
    slots = a.slots.split(",")
    k1, k2, k3 = jax.random.split(key, 3)
    if a.model == "encoder":
        p = M.encoder_init(k1, a.vocab, a.d_model, a.layers, a.heads, slots, 2 * a.d_model)
        loss = lambda p, x, y, k: M.cross_entropy(M.encoder(p, x, a.heads, slots, 0.1, k), y)  # noqa: E731
        shape = (a.batch, a.length)
        return p, loss, jax.random.randint(k2, shape, 0, a.vocab), jax.random.randint(k3, shape, 0, a.vocab), 1e-3, 0.0
    if a.model == "gpt":
        p = M.gpt_init(k1, a.vocab, a.context, a.d_model, a.layers, a.heads, slots, a.kv_heads)
        loss = lambda p, x, y, k: M.cross_entropy(M.gpt(p, x, a.heads, slots, a.kv_heads), y)  # noqa: E731
        shape = (a.batch, a.length)
        return p, loss, jax.random.randint(k2, shape, 0, a.vocab), jax.random.randint(k3, shape, 0, a.vocab), 1e-4, 0.01
    p = M.vit_init(k1, a.d_model, a.layers, a.heads, slots, a.patch, a.image, a.channels, 10)
    loss = lambda p, x, y, k: M.cross_entropy(M.vit(p, x, a.heads, slots, a.patch), y)  # noqa: E731
    images = jax.random.normal(k2, (a.batch, a.channels, a.image, a.image))
    return p, loss, images, jax.random.randint(k3, (a.batch,), 0, 10), 1e-3, 0.0


def main():
    key = jax.random.key(0)
    params, loss_of, inputs, targets, lr, decay = build(key)
    state = M.adamw_init(params)
    count = sum(x.size for x in jax.tree_util.tree_leaves(params))

    def train_step(params, state, x, y, key):
        key = jax.random.fold_in(key, state["step"])  # a new dropout mask every step
        loss, grads = jax.value_and_grad(loss_of)(params, x, y, key)
        params, state = M.adamw(params, grads, state, lr, decay)
        return params, state, loss

    step = jax.jit(train_step, donate_argnums=(0, 1))
    carry = [params, state]

    def train():
        carry[0], carry[1], loss = step(carry[0], carry[1], inputs, targets, key)
        jax.block_until_ready((carry, loss))

    times_ms(train, a.warmup)
    threads = int(os.environ.get("PJRT_NPROC", os.cpu_count()))
    about = {"name": f"JAX {jax.__version__}", "mode": "jit", "threads": threads, "jax": jax.__version__,
             "precisions": ["fp32"], "unsupported": NO_BF16 if "bf16" in a.precision else "",
             "parameters": int(count)}
    if a.serve:
        def answer(words):
            if len(words) > 1 and words[1] != "fp32":
                fail(f"{words[1]}: JAX runs fp32 only here: {NO_BF16}")
            return times_ms(train, int(words[0]))
        serve(about, answer)
        return
    times = sorted(times_ms(train, a.steps))
    print(json.dumps(dict(ms_per_step=times[len(times) // 2], best_ms=times[0], **about)))


if __name__ == "__main__":
    run_main(main)
