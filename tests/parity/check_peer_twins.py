#!/usr/bin/env python3
"""Checks that the benchmarks' peer twins compute what the PyTorch models of torch_models.py
compute, so that the benchmarks time the same work. The JAX twins (bench/peers/jax_models.py):
the encoder, the ViT and the GPT (QKV, Q=K-V, Q-K=V; the GPT with GQA too) get the PyTorch
model's weights and must give its logits, loss and every parameter's gradient; one AdamW step must
give torch.optim.AdamW's parameters; greedy decoding over the JAX KV cache (gpt_cached, the decode
twin's step) must give the tokens of the full forward pass. The PyTorch decode twin
(bench/torch_decode.py), eager and in the static-shape form torch.compile compiles, must give
them too.

  PYTHON tests/parity/check_peer_twins.py      PYTHON: the peers' venv (bench/peers/setup.sh)
Prints a line per check and "N passed, N failed"; exit 1 on a failure. Run by another interpreter,
it runs itself again under the peers' (peers_env.py), or exits 77 (skipped).
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "..", "bench", "peers"), os.path.join(HERE, "..", "..", "bench")]
os.environ.setdefault("PJRT_NPROC", "2")
from peers_env import rerun_in_peers_env  # noqa: E402

try:
    import jax
    import numpy as np
    import torch
except ImportError:
    rerun_in_peers_env("torch and jax")
jax.config.update("jax_platforms", "cpu")
import jax.numpy as jnp  # noqa: E402
import jax_models as M  # noqa: E402
import torch_decode  # noqa: E402
import torch_models  # noqa: E402

SLOTS = {"QKV": ["q", "k", "v"], "Q=K-V": ["q", "q", "v"], "Q-K=V": ["q", "k", "k"]}
results = []


def check(name, ok, detail):
    results.append(ok)
    print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}")


def close(name, ours, theirs, tol):
    """Max |difference| over max |value| at most tol."""
    ours, theirs = np.asarray(ours, np.float64), np.asarray(theirs, np.float64)
    if ours.shape != theirs.shape:
        check(name, False, f"shapes {ours.shape} and {theirs.shape}")
        return
    err = np.abs(ours - theirs).max() / max(np.abs(theirs).max(), 1e-30)
    check(name, err <= tol, f"relative difference {err:.2e} (at most {tol:.0e})")


def arr(t):
    """A copy: JAX may alias a NumPy buffer, and the torch tensors change in place."""
    return t.detach().numpy().copy()


def lin(m):
    return {"w": arr(m.weight).T, "b": arr(m.bias)}


def norm(m):
    return {"g": arr(m.weight), "b": arr(m.bias)}


def attn(a):
    p = {n: lin(getattr(a, n)) for n in dict.fromkeys(a.slots)}
    p["o"] = lin(a.o)
    return p


def pre_ln(b, names):
    """A pre-LN block's parameters: names maps jax_models' keys to the torch block's modules."""
    return {"ln1": norm(names["ln1"]), "attn": attn(b.attn), "ln2": norm(names["ln2"]),
            "fc": lin(names["fc"]), "proj": lin(names["proj"])}


def encoder_params(m):
    blocks = [{"attn": attn(b.attn), "norm1": norm(b.norm1), "norm2": norm(b.norm2), "fc1": lin(b.ffn.fc1),
               "fc2": lin(b.ffn.fc2)} for b in m.blocks]
    return {"input": lin(m.input), "blocks": blocks, "head_fc": lin(m.head.fc), "head_norm": norm(m.head.norm),
            "head_out": lin(m.head.out)}


def vit_params(m):
    blocks = [pre_ln(b, {"ln1": b.norm1, "ln2": b.norm2, "fc": b.ffn.fc1, "proj": b.ffn.fc2}) for b in m.blocks]
    return {"patch": lin(m.patch_embed), "cls": arr(m.cls_token), "pos": arr(m.pos_embed),
            "blocks": blocks, "norm": norm(m.norm), "head": lin(m.head)}


def gpt_params(m):
    blocks = [pre_ln(b, {"ln1": b.ln1, "ln2": b.ln2, "fc": b.fc, "proj": b.proj}) for b in m.blocks]
    return {"wte": arr(m.wte.weight), "wpe": arr(m.wpe.weight), "blocks": blocks,
            "ln_f": norm(m.ln_f)}


def torch_grads(m, to_params):
    """The torch gradients in the JAX layout: to_params on a model whose tensors are the grads."""
    saved = [p.data for p in m.parameters()]
    for p in m.parameters():
        p.data = p.grad
    grads = to_params(m)
    for p, s in zip(m.parameters(), saved):
        p.data = s
    return grads


def compare_model(label, model, to_params, jax_logits, x, y, tol=2e-5):
    torch_logits = model(x)
    loss = torch.nn.functional.cross_entropy(torch_logits.reshape(-1, torch_logits.shape[-1]), y.reshape(-1))
    loss.backward()
    params = jax.tree_util.tree_map(jnp.asarray, to_params(model))
    jx, jy = jnp.asarray(x.numpy()), jnp.asarray(y.numpy())

    def jax_loss(p):
        return M.cross_entropy(jax_logits(p, jx), jy)

    value, grads = jax.value_and_grad(jax_loss)(params)
    close(f"{label} logits", jax_logits(params, jx), torch_logits.detach().numpy(), tol)
    close(f"{label} loss", value, loss.item(), tol)
    ours = jax.tree_util.tree_leaves_with_path(grads)
    theirs = dict(jax.tree_util.tree_leaves_with_path(torch_grads(model, to_params)))
    # Against the largest gradient too: K's bias gets none in theory (softmax ignores a constant
    # per row), so both sides' values there are rounding noise.
    floor = 1e-2 * max(float(np.abs(t).max()) for t in theirs.values())
    worst, where = 0.0, ""
    for path, g in ours:
        t = np.asarray(theirs[path], np.float64)
        err = np.abs(np.asarray(g, np.float64) - t).max() / max(np.abs(t).max(), floor)
        if err > worst:
            worst, where = err, jax.tree_util.keystr(path)
    check(f"{label} gradients ({len(ours)} tensors)", worst <= 1e-4, f"worst relative difference {worst:.2e} at "
          f"{where or '-'} (at most 1e-04)")
    return params, grads


def check_adamw(params, model):
    """One AdamW step from the model's gradients against torch.optim.AdamW on the same tensors."""
    lr, decay = 1e-3, 0.01
    grads = jax.tree_util.tree_map(jnp.asarray, torch_grads(model, gpt_params))
    torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=decay).step()
    state = M.adamw_init(params)
    stepped, _ = M.adamw(params, grads, state, lr, decay)
    ours = jax.tree_util.tree_leaves(stepped)
    theirs = jax.tree_util.tree_leaves(jax.tree_util.tree_map(jnp.asarray, gpt_params(model)))
    err = max(float(np.abs(np.asarray(a) - np.asarray(b)).max()) for a, b in zip(ours, theirs))
    check("AdamW step (GPT, Q-K=V)", err <= 1e-6, f"max |difference| {err:.2e} (at most 1e-06)")


def check_decode(label, model, params, heads, slots, kv_heads, prompt, new_tokens):
    """Greedy tokens through gpt_cached against the argmax of the full forward pass."""
    B, d = 2, model.wte.weight.shape[1]
    context = prompt + new_tokens
    ids = torch.randint(0, model.wte.weight.shape[0], (B, prompt))
    cache = M.cache_init(B, context, d, len(model.blocks), heads, slots, kv_heads)
    step = jax.jit(lambda p, c, x, s: M.gpt_cached(p, c, x, s, heads, slots, kv_heads))
    nxt, cache = step(params, cache, jnp.asarray(ids.numpy(), jnp.int32), 0)
    seq, same = ids, 0
    for t in range(new_tokens):
        with torch.no_grad():
            full = model(seq)[:, -1].argmax(-1)
        same += int((np.asarray(nxt)[:, 0] == full.numpy()).all())
        seq = torch.cat([seq, torch.from_numpy(np.asarray(nxt, np.int64))], dim=1)
        nxt, cache = step(params, cache, nxt, prompt + t)
    check(f"{label} decode", same == new_tokens, f"{same} of {new_tokens} steps give the full forward's tokens")


def check_torch_decode(label, model, vocab, prompt, new_tokens):
    """bench/torch_decode.py's Decoder, eager and static-shape (uncompiled), against the full forward."""
    for mode in ("eager", "static"):
        a = argparse.Namespace(batch=2, prompt=prompt, warmup=0, new_tokens=new_tokens, vocab=vocab, mode=mode)
        with torch.inference_mode():
            decoder = torch_decode.Decoder(model, a, compiled=False)
            seq, same = decoder.prompt, 0
            for _ in range(new_tokens):
                same += int((decoder.next[:, 0] == model(seq)[:, -1].argmax(-1)).all())
                seq = torch.cat([seq, decoder.next], dim=1)
                decoder.step()
        check(f"{label} PyTorch decode ({mode})", same == new_tokens,
              f"{same} of {new_tokens} steps give the full forward's tokens")


def main():
    torch.manual_seed(0)
    for variant, slots in SLOTS.items():
        cfg = {"vocab": 10, "classes": 10, "layers": 2, "ffn_hidden": 64, "d_model": 32, "heads": 4, "slots": slots,
               "dropout": 0.0}
        model = torch_models.Encoder(cfg)
        x = torch.randint(0, 10, (3, 12))
        compare_model(f"encoder {variant}", model, encoder_params,
                      lambda p, ids: M.encoder(p, ids, 4, slots, 0.0, None), x, torch.randint(0, 10, (3, 12)))

        cfg = {"image_height": 28, "image_width": 28, "channels": 1, "patch": 7, "classes": 10, "layers": 2,
               "d_model": 32, "heads": 4, "slots": slots, "mlp_ratio": 4.0, "dropout": 0.0}
        model = torch_models.ViT(cfg)
        compare_model(f"ViT {variant}", model, vit_params, lambda p, im: M.vit(p, im, 4, slots, 7),
                      torch.randn(3, 1, 28, 28), torch.randint(0, 10, (3,)))

        for kv_heads in (0, 2):
            cfg = {"vocab": 50, "context": 24, "layers": 2, "d_model": 32, "heads": 4, "kv_heads": kv_heads,
                   "slots": slots, "ffn": 128}
            label = f"GPT {variant}" + (f" GQA-{kv_heads}" if kv_heads else "")
            model = torch_models.GPT(cfg)
            params, _ = compare_model(label, model, gpt_params,
                                          lambda p, ids: M.gpt(p, ids, 4, slots, kv_heads),
                                          torch.randint(0, 50, (2, 16)), torch.randint(0, 50, (2, 16)))
            check_decode(label, model, params, 4, slots, kv_heads, prompt=8, new_tokens=8)
            check_torch_decode(label, model, 50, prompt=8, new_tokens=8)
            if variant == "Q-K=V" and not kv_heads:
                check_adamw(params, model)
    failed = results.count(False)
    print(f"{len(results) - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
