"""qkvlab's encoder, ViT and GPT in JAX (no Flax), with torch.optim.AdamW's update written out, for
the JAX twins of the benchmarks (jax_step.py, jax_decode.py). Shapes and arithmetic follow
tests/parity/torch_models.py: the same layers, activations (exact GELU), LayerNorm eps 1e-5,
dropout where the PyTorch twin has it. Parameters are nested dicts of float32 arrays, weights
stored [in, out]; initial values are random (only the speed is measured). Not run on its own.
"""
import math

import jax
import jax.numpy as jnp


def linear_init(key, d_in, d_out, std=0.02):
    return {"w": std * jax.random.normal(key, (d_in, d_out), jnp.float32), "b": jnp.zeros((d_out,), jnp.float32)}


def linear(p, x):
    return x @ p["w"] + p["b"]


def norm_init(d):
    return {"g": jnp.ones((d,), jnp.float32), "b": jnp.zeros((d,), jnp.float32)}


def layer_norm(p, x, eps=1e-5):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + eps) * p["g"] + p["b"]


def dropout(key, x, rate):
    if key is None or rate == 0.0:
        return x
    return jnp.where(jax.random.bernoulli(key, 1.0 - rate, x.shape), x / (1.0 - rate), 0.0)


def gelu(x):
    return jax.nn.gelu(x, approximate=False)


class Keys:
    """Dropout keys split off one step key, one per call (none: no dropout)."""

    def __init__(self, key):
        self.key = key

    def __call__(self):
        if self.key is None:
            return None
        self.key, k = jax.random.split(self.key)
        return k


# --- attention: `slots` names the projection serving Q, K and V (a row of nn/sharing.h) ----------

def attention_init(key, d, heads, slots, kv_heads=0):
    names = list(dict.fromkeys(slots))
    dkv = (kv_heads or heads) * (d // heads)
    keys = jax.random.split(key, len(names) + 1)
    p = {n: linear_init(k, d, d if n == slots[0] else dkv) for n, k in zip(names, keys)}
    p["o"] = linear_init(keys[-1], d, d)
    return p


def split_heads(x, n):
    B, T, D = x.shape
    return x.reshape(B, T, n, D // n).transpose(0, 2, 1, 3)


def projections(p, x, heads, slots, kv_heads):
    """{slot: [B, heads of that slot, T, d_head]} for each distinct slot."""
    return {n: split_heads(linear(p[n], x), heads if n == slots[0] else (kv_heads or heads))
            for n in dict.fromkeys(slots)}


def attend(q, k, v, mask):
    """softmax(q k^T / sqrt(d_head), rows masked by mask [T, S]) v, KV heads shared by groups of
    query heads: each group's queries are one block of rows against its KV head. When K and V have
    different head counts (Q=K-V with GQA: K is Q's projection), both are repeated to Q's heads."""
    B, H, T, dh = q.shape
    if k.shape[1] != v.shape[1]:
        k, v = (jnp.repeat(t, H // t.shape[1], axis=1) for t in (k, v))
    hk = k.shape[1]
    g = H // hk
    q = q.reshape(B, hk, g * T, dh)
    s = (q @ k.swapaxes(-1, -2)) / math.sqrt(dh)
    if mask is not None:
        s = jnp.where(jnp.tile(mask, (g, 1)), s, -jnp.inf)
    y = jax.nn.softmax(s, axis=-1) @ v
    return y.reshape(B, H, T, dh)


def attention(p, x, heads, slots, kv_heads=0, causal=False):
    B, T, D = x.shape
    out = projections(p, x, heads, slots, kv_heads)
    mask = jnp.tril(jnp.ones((T, T), bool)) if causal else None
    y = attend(out[slots[0]], out[slots[1]], out[slots[2]], mask)
    return linear(p["o"], y.transpose(0, 2, 1, 3).reshape(B, T, D))


# --- the synthetic-task encoder: one-hot input, sinusoids, post-LN blocks, MLP head ----------------

def sinusoid(positions, dim):
    p = jnp.arange(positions, dtype=jnp.float32)[:, None]
    c = jnp.arange(dim)
    angle = p * jnp.power(10000.0, -(c // 2 * 2).astype(jnp.float32) / dim)
    return jnp.where(c % 2 == 0, jnp.sin(angle), jnp.cos(angle))


def encoder_init(key, vocab, d, layers, heads, slots, ffn):
    k = jax.random.split(key, 4 + 3 * layers)
    blocks = [{"attn": attention_init(k[4 + 3 * i], d, heads, slots), "norm1": norm_init(d), "norm2": norm_init(d),
               "fc1": linear_init(k[5 + 3 * i], d, ffn), "fc2": linear_init(k[6 + 3 * i], ffn, d)}
              for i in range(layers)]
    return {"input": linear_init(k[0], vocab, d), "blocks": blocks, "head_fc": linear_init(k[1], d, d),
            "head_norm": norm_init(d), "head_out": linear_init(k[2], d, vocab)}


def encoder(p, ids, heads, slots, rate, key):
    keys = Keys(key)
    x = linear(p["input"], jax.nn.one_hot(ids, p["input"]["w"].shape[0], dtype=jnp.float32))
    x = x + sinusoid(ids.shape[1], x.shape[-1])
    for b in p["blocks"]:
        h = layer_norm(b["norm1"], x + dropout(keys(), attention(b["attn"], x, heads, slots), rate))
        f = linear(b["fc2"], dropout(keys(), jax.nn.relu(linear(b["fc1"], h)), rate))
        x = layer_norm(b["norm2"], h + dropout(keys(), f, rate))
    x = dropout(keys(), jax.nn.relu(layer_norm(p["head_norm"], linear(p["head_fc"], x))), rate)
    return linear(p["head_out"], x)


# --- the ViT: patches, class token, learned positions, pre-LN blocks, head on the class token ------

def pre_ln_block_init(key, d, heads, slots, ffn, kv_heads=0):
    k = jax.random.split(key, 3)
    return {"ln1": norm_init(d), "attn": attention_init(k[0], d, heads, slots, kv_heads), "ln2": norm_init(d),
            "fc": linear_init(k[1], d, ffn), "proj": linear_init(k[2], ffn, d)}


def pre_ln_block(b, x, heads, slots, kv_heads=0, causal=False):
    x = x + attention(b["attn"], layer_norm(b["ln1"], x), heads, slots, kv_heads, causal)
    return x + linear(b["proj"], gelu(linear(b["fc"], layer_norm(b["ln2"], x))))


def vit_init(key, d, layers, heads, slots, patch, image, channels, classes):
    n = (image // patch) ** 2
    k = jax.random.split(key, 4 + layers)
    return {"patch": linear_init(k[0], channels * patch * patch, d),
            "cls": 0.02 * jax.random.normal(k[1], (1, 1, d)), "pos": 0.02 * jax.random.normal(k[2], (1, 1 + n, d)),
            "blocks": [pre_ln_block_init(k[4 + i], d, heads, slots, 4 * d) for i in range(layers)],
            "norm": norm_init(d), "head": linear_init(k[3], d, classes)}


def vit(p, images, heads, slots, patch):
    B, C, H, W = images.shape
    x = images.reshape(B, C, H // patch, patch, W // patch, patch).transpose(0, 2, 4, 1, 3, 5)
    x = linear(p["patch"], x.reshape(B, (H // patch) * (W // patch), C * patch * patch))
    x = jnp.concatenate([jnp.broadcast_to(p["cls"], (B, 1, x.shape[-1])), x], axis=1) + p["pos"]
    for b in p["blocks"]:
        x = pre_ln_block(b, x, heads, slots)
    return linear(p["head"], layer_norm(p["norm"], x)[:, 0])


# --- the GPT: token and position embeddings, causal pre-LN blocks, the output tied to wte ---------

def gpt_init(key, vocab, context, d, layers, heads, slots, kv_heads=0):
    k = jax.random.split(key, 2 + layers)
    return {"wte": 0.02 * jax.random.normal(k[0], (vocab, d)), "wpe": 0.02 * jax.random.normal(k[1], (context, d)),
            "blocks": [pre_ln_block_init(k[2 + i], d, heads, slots, 4 * d, kv_heads) for i in range(layers)],
            "ln_f": norm_init(d)}


def gpt(p, ids, heads, slots, kv_heads=0):
    x = p["wte"][ids] + p["wpe"][: ids.shape[1]]
    for b in p["blocks"]:
        x = pre_ln_block(b, x, heads, slots, kv_heads, causal=True)
    return layer_norm(p["ln_f"], x) @ p["wte"].T


def cache_init(batch, context, d, layers, heads, slots, kv_heads=0):
    """Per layer, {slot: [batch, its heads, context, d_head]} for each distinct K/V slot (K=V: one
    array serving both; Q=K-V: K's array is Q's projection, with Q's heads)."""
    shape = lambda n: (batch, heads if n == slots[0] else (kv_heads or heads), context, d // heads)  # noqa: E731
    return [{n: jnp.zeros(shape(n), jnp.float32) for n in dict.fromkeys(slots[1:])} for _ in range(layers)]


def gpt_cached(p, cache, ids, start, heads, slots, kv_heads=0):
    """ids [B, T] at positions start .. start + T - 1 over a KV cache (cache_init's): writes
    their K/V rows in place (lax.dynamic_update_slice) and attends over the whole cache with the
    rows past each query masked (static shapes: one compiled step for every position). Returns the
    next tokens (greedy) and the cache."""
    B, T = ids.shape
    kv_slots = list(dict.fromkeys(slots[1:]))
    context = cache[0][kv_slots[0]].shape[2]
    pos = start + jnp.arange(T)
    x = p["wte"][ids] + p["wpe"][pos]
    mask = jnp.arange(context)[None, :] <= pos[:, None]
    new_cache = []
    for b, layer in zip(p["blocks"], cache):
        out = projections(b["attn"], layer_norm(b["ln1"], x), heads, slots, kv_heads)
        layer = {s: jax.lax.dynamic_update_slice(layer[s], out[s], (0, 0, start, 0)) for s in kv_slots}
        y = attend(out[slots[0]], layer[slots[1]], layer[slots[2]], mask)
        x = x + linear(b["attn"]["o"], y.transpose(0, 2, 1, 3).reshape(B, T, -1))
        x = x + linear(b["proj"], gelu(linear(b["fc"], layer_norm(b["ln2"], x))))
        new_cache.append(layer)
    logits = layer_norm(p["ln_f"], x[:, -1:]) @ p["wte"].T
    return logits.argmax(-1).astype(jnp.int32), new_cache


def cross_entropy(logits, targets):
    logits = logits.reshape(-1, logits.shape[-1])
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.take_along_axis(logp, targets.reshape(-1, 1), axis=-1).mean()


# --- AdamW: torch.optim.AdamW's update (decoupled decay, bias corrections), as qkvlab's ---------

def adamw_init(params):
    zeros = lambda: jax.tree_util.tree_map(jnp.zeros_like, params)  # noqa: E731
    return {"step": jnp.zeros((), jnp.int32), "m": zeros(), "v": zeros()}


def adamw(params, grads, state, lr, weight_decay, b1=0.9, b2=0.999, eps=1e-8):
    step = state["step"] + 1
    t = step.astype(jnp.float32)
    c1, c2 = 1 - b1 ** t, 1 - b2 ** t
    m = jax.tree_util.tree_map(lambda m, g: b1 * m + (1 - b1) * g, state["m"], grads)
    v = jax.tree_util.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, state["v"], grads)

    def update(p, m, v):
        if weight_decay:
            p = p * (1 - lr * weight_decay)
        return p - (lr / c1) * m / (jnp.sqrt(v) / jnp.sqrt(c2) + eps)

    return jax.tree_util.tree_map(update, params, m, v), {"step": step, "m": m, "v": v}
