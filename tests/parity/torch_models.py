"""PyTorch twins of qkvlab's models, built from qkvlab's safetensors files, and a minimal
safetensors reader and writer (json + struct, no safetensors package).

Each class mirrors the C++ module of the same name parameter for parameter (same names, same
PyTorch layouts), so `load_qkvlab(path)` fills it with strict=True. Used by the parity tests and
by the benchmarks that time PyTorch beside qkvlab.
"""
import json
import math
import struct

import torch
import torch.nn as nn
import torch.nn.functional as F

DTYPES = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64, "I32": torch.int32,
          "U8": torch.uint8, "BOOL": torch.bool, "F16": torch.float16, "BF16": torch.bfloat16}


def read_safetensors(path):
    """Reads a safetensors file with nothing but the format description (json + struct)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw = bytearray(data[8 + n + begin:8 + n + end])
        t = torch.frombuffer(raw, dtype=DTYPES[info["dtype"]]) if raw else torch.empty(0, dtype=DTYPES[info["dtype"]])
        out[name] = t.reshape(info["shape"]).clone()
    return out


CODES = {dtype: code for code, dtype in DTYPES.items()}


def write_safetensors(path, tensors, metadata=None):
    """Writes {name: tensor} as a safetensors file: an 8-byte little-endian header length, the
    JSON header (each tensor's dtype, shape and byte range in the data section; string metadata
    under "__metadata__"), padded with spaces to a multiple of 8 bytes, then the raw bytes."""
    header, chunks, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name, t in tensors.items():
        t = t.detach().cpu().contiguous()
        raw = (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().tobytes()
        header[name] = {"dtype": CODES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in chunks:
            f.write(raw)


def sinusoid(positions, dim):
    """[positions, dim]: sin(p w_k) on even channels 2k, cos(p w_k) on odd ones, w_k = 10000^(-2k/dim)."""
    p = torch.arange(positions, dtype=torch.float64)[:, None]
    c = torch.arange(dim)
    freq = torch.pow(10000.0, -(c // 2 * 2).double() / dim)
    angle = p * freq
    return torch.where(c % 2 == 0, torch.sin(angle), torch.cos(angle)).float()


def pos2d_table(n, m):
    """[n, n, m]: P[i, j] = concat(sinusoid(i, m/2), sinusoid(j, m/2))."""
    s = sinusoid(n, m // 2)
    return torch.cat([s[:, None, :].expand(n, n, m // 2), s[None, :, :].expand(n, n, m // 2)], dim=-1)


class Attention(nn.Module):
    """qkvlab's nn::Attention. `slots` names the projection serving Q, K and V (a row of qkvlab's
    sharing table, nn/sharing.h, passed in by the C++ side): one Linear per distinct slot, named
    after it, d wide when it serves Q and kv_heads x d_head otherwise; tied roles share it."""

    def __init__(self, d_model, heads, kv_heads=0, slots=("q", "k", "v"), pos2d=0, causal=False, bias=True):
        super().__init__()
        self.d, self.h = d_model, heads
        self.hk = kv_heads or heads
        self.dh = d_model // heads
        self.slots = list(slots)
        self.pos2d_m, self.causal = pos2d, causal
        dkv = self.hk * self.dh
        for name in dict.fromkeys(self.slots):   # distinct, in the order the roles first use them
            setattr(self, name, nn.Linear(d_model, d_model if name == self.slots[0] else dkv, bias))
        self.o = nn.Linear(d_model, d_model, bias)
        if pos2d:
            # qkvlab names these "pos2d.weight" and "pos2d.bias" on the attention module.
            self.pos2d = nn.Module()
            self.pos2d.weight = nn.Parameter(torch.zeros(pos2d))
            self.pos2d.bias = nn.Parameter(torch.zeros(1))

    def heads(self, x, n):
        B, T, _ = x.shape
        return x.view(B, T, n, self.dh).transpose(1, 2)

    def split_heads(self, x):
        """q, k, v [B, heads, T, d_head], K/V heads repeated to Q's (GQA)."""
        out = {name: self.heads(getattr(self, name)(x), self.h if name == self.slots[0] else self.hk)
               for name in dict.fromkeys(self.slots)}
        q, k, v = (out[name] for name in self.slots)
        if k.shape[1] != self.h:
            k = k.repeat_interleave(self.h // k.shape[1], dim=1)
        if v.shape[1] != self.h:
            v = v.repeat_interleave(self.h // v.shape[1], dim=1)
        return q, k, v

    def forward(self, x):
        B, T, _ = x.shape
        q, k, v = self.split_heads(x)
        s = q @ k.transpose(-1, -2) / math.sqrt(self.dh)
        if self.pos2d_m:
            P = pos2d_table(T, self.pos2d_m).to(x.dtype)
            s = s * self.pos2d.weight.sum() + P @ self.pos2d.weight + self.pos2d.bias
        if self.causal:
            s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
        y = torch.softmax(s, dim=-1) @ v
        return self.o(y.transpose(1, 2).reshape(B, T, self.d))


class MLP(nn.Module):
    def __init__(self, d, hidden, activation, dropout):
        super().__init__()
        self.fc1, self.fc2, self.drop = nn.Linear(d, hidden), nn.Linear(hidden, d), nn.Dropout(dropout)
        self.act = {"relu": F.relu, "gelu": F.gelu, "gelu_tanh": lambda t: F.gelu(t, approximate="tanh")}[activation]

    def forward(self, x):
        return self.fc2(self.drop(self.act(self.fc1(x))))


class EncoderBlock(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg["d_model"]
        self.attn = Attention(d, cfg["heads"], cfg.get("kv_heads", 0), cfg["slots"], cfg.get("pos2d", 0))
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.ffn = MLP(d, cfg["ffn_hidden"], cfg.get("activation", "relu"), cfg.get("dropout", 0.0))
        self.drop = nn.Dropout(cfg.get("dropout", 0.0))
        self.pre_norm = cfg.get("pre_norm", False)

    def forward(self, x):
        if self.pre_norm:
            h = x + self.drop(self.attn(self.norm1(x)))
            return h + self.drop(self.ffn(self.norm2(h)))
        h = self.norm1(x + self.drop(self.attn(x)))
        return self.norm2(h + self.drop(self.ffn(h)))


class ClassifierHead(nn.Module):
    def __init__(self, d, classes, mlp, dropout):
        super().__init__()
        if mlp:
            self.fc, self.norm, self.drop = nn.Linear(d, d), nn.LayerNorm(d), nn.Dropout(dropout)
        self.mlp = mlp
        self.out = nn.Linear(d, classes)

    def forward(self, x):
        if self.mlp:
            x = self.drop(F.relu(self.norm(self.fc(x))))
        return self.out(x)


class Encoder(nn.Module):
    """qkvlab's nn::Encoder: one-hot input Linear, sinusoidal positions, blocks, classifier head."""

    def __init__(self, cfg):
        super().__init__()
        d = cfg["d_model"]
        self.vocab = cfg["vocab"]
        self.input = nn.Linear(cfg["vocab"], d)
        self.blocks = nn.ModuleList([EncoderBlock(cfg) for _ in range(cfg["layers"])])
        self.final_norm = nn.LayerNorm(d) if cfg.get("pre_norm", False) else None
        self.head = ClassifierHead(d, cfg["classes"], cfg.get("mlp_head", True), cfg.get("dropout", 0.0))

    def forward(self, ids):
        x = self.input(F.one_hot(ids, self.vocab).to(self.input.weight.dtype))
        x = x + sinusoid(ids.shape[1], x.shape[-1]).to(x.dtype)
        for b in self.blocks:
            x = b(x)
        if self.final_norm is not None:
            x = self.final_norm(x)
        return self.head(x)


def patchify(x, p):
    """[B, C, H, W] -> [B, (H/p)(W/p), C p p], patches row-major, each flattened channel-first."""
    B, C, H, W = x.shape
    return x.reshape(B, C, H // p, p, W // p, p).permute(0, 2, 4, 1, 3, 5).reshape(B, (H // p) * (W // p), C * p * p)


class ViT(nn.Module):
    """qkvlab's nn::ViT: patch embedding, class token, learned positions, pre-LN blocks, head."""

    def __init__(self, cfg):
        super().__init__()
        d, p = cfg["d_model"], cfg["patch"]
        n = (cfg["image_height"] // p) * (cfg["image_width"] // p)
        self.p = p
        self.patch_embed = nn.Linear(cfg["channels"] * p * p, d)
        self.cls_token = nn.Parameter(torch.randn(1, 1, d) * 0.02)
        self.pos_embed = nn.Parameter(torch.randn(1, 1 + n, d) * 0.02)
        block = dict(cfg, pre_norm=True, ffn_hidden=int(cfg.get("mlp_ratio", 4.0) * d + 0.5),
                     activation=cfg.get("activation", "gelu"))
        self.blocks = nn.ModuleList([EncoderBlock(block) for _ in range(cfg["layers"])])
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, cfg["classes"])

    def forward(self, images):
        x = self.patch_embed(patchify(images, self.p))
        x = torch.cat([self.cls_token.expand(x.shape[0], 1, -1), x], dim=1) + self.pos_embed
        for b in self.blocks:
            x = b(x)
        return self.head(self.norm(x)[:, 0])


class GPTBlock(nn.Module):
    """qkvlab's nn::GPTBlock: pre-LN causal attention and an exact-GELU MLP, residuals around both."""

    def __init__(self, cfg):
        super().__init__()
        d = cfg["d_model"]
        self.ln1 = nn.LayerNorm(d, eps=1e-5)
        self.attn = Attention(d, cfg["heads"], cfg.get("kv_heads", 0), cfg["slots"], causal=True)
        self.ln2 = nn.LayerNorm(d, eps=1e-5)
        self.fc, self.proj = nn.Linear(d, cfg["ffn"]), nn.Linear(cfg["ffn"], d)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.proj(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    """qkvlab's nn::GPT: token and learned position embeddings, GPT blocks, final LayerNorm, the
    output layer tied to the token embedding; N(0, 0.02) weights and embeddings, zero biases."""

    def __init__(self, cfg):
        super().__init__()
        d = cfg["d_model"]
        self.wte, self.wpe = nn.Embedding(cfg["vocab"], d), nn.Embedding(cfg["context"], d)
        self.blocks = nn.ModuleList(GPTBlock(cfg) for _ in range(cfg["layers"]))
        self.ln_f = nn.LayerNorm(d, eps=1e-5)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if ".ln" in name or name.startswith("ln_f"):
                    continue
                if name.endswith(".bias"):
                    p.zero_()
                else:
                    p.normal_(0.0, 0.02)

    def forward(self, ids):
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))
        for b in self.blocks:
            x = b(x)
        return self.ln_f(x) @ self.wte.weight.t()

