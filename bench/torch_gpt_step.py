#!/usr/bin/env python3
"""Times training steps of qkvlab's GPT (nn/models/gpt.h) rebuilt in PyTorch, for bench_gpt, which
prints PyTorch beside qkvlab. Same model: token + learned position embeddings, pre-LN blocks
(LayerNorm eps 1e-5) of causal attention (tests/parity/torch_models.py's Attention, any sharing
variant and KV heads) and an exact-GELU MLP, biases everywhere, final LayerNorm, output layer tied
to the token embedding, N(0, 0.02) weights, dropout 0. One step: forward, cross-entropy,
zero_grad, backward, torch.optim.AdamW. Prints one JSON line: {"ms_per_step": ...}.

  torch_gpt_step.py --vocab 50257 --context 1024 --layers 12 --d-model 768 --heads 12 \
                    --batch 4 --seq 64 --sharing QKV --kv-heads 0 --steps 5 --threads 2
Exit 77 when PyTorch is not installed.
"""
import argparse
import json
import os
import sys
import time

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    print(json.dumps({"error": "PyTorch is not installed (Debian package python3-torch)"}))
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "parity"))
import torch_models  # noqa: E402


class Block(nn.Module):
    def __init__(self, d, heads, kv_heads, sharing, ffn):
        super().__init__()
        self.ln1 = nn.LayerNorm(d, eps=1e-5)
        self.attn = torch_models.Attention(d, heads, kv_heads, sharing, causal=True)
        self.ln2 = nn.LayerNorm(d, eps=1e-5)
        self.fc, self.proj = nn.Linear(d, ffn), nn.Linear(ffn, d)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.proj(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, a):
        super().__init__()
        d = a.d_model
        self.wte, self.wpe = nn.Embedding(a.vocab, d), nn.Embedding(a.context, d)
        self.blocks = nn.ModuleList(Block(d, a.heads, a.kv_heads, a.sharing, 4 * d) for _ in range(a.layers))
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
        T = ids.shape[1]
        x = self.wte(ids) + self.wpe(torch.arange(T))
        for b in self.blocks:
            x = b(x)
        return self.ln_f(x) @ self.wte.weight.t()   # tied output layer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--context", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--d-model", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--kv-heads", type=int, default=0)
    ap.add_argument("--sharing", default="QKV")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = GPT(a)
    ids = torch.randint(0, a.vocab, (a.batch, a.seq))
    targets = torch.randint(0, a.vocab, (a.batch, a.seq))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step():
        logits = model(ids)
        loss = F.cross_entropy(logits.reshape(-1, a.vocab), targets.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for _ in range(2):
        step()
    times = []
    for _ in range(a.steps):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    times.sort()
    print(json.dumps({"ms_per_step": 1000 * times[len(times) // 2], "best_ms": 1000 * times[0],
                      "threads": torch.get_num_threads(), "torch": torch.__version__,
                      "parameters": sum(p.numel() for p in model.parameters())}))


if __name__ == "__main__":
    main()
