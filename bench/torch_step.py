#!/usr/bin/env python3
"""Times training steps of qkvlab's models rebuilt in PyTorch (tests/parity/torch_models.py), for
the benchmarks that print PyTorch beside qkvlab. Prints one JSON line: {"ms_per_step": ...}.
With --serve (bench/torch_session.cpp) it prints {"ready": true, ...} once warmed up, then for each
line N read from stdin runs N steps and prints {"times_ms": [...]}, until stdin ends.

  torch_step.py encoder --d-model 64 --layers 2 --heads 4 --length 64 --batch 128 --threads 2
  torch_step.py vit --d-model 64 --layers 4 --heads 4 --patch 7 --image 28 --batch 128 --threads 2
  torch_step.py gpt --vocab 50257 --context 1024 --layers 12 --d-model 768 --heads 12 --length 64 \
                    --batch 4 --slots q,kv,kv --kv-heads 0 --steps 5 --threads 2
Exit 77 when PyTorch is not installed.
"""
import argparse
import json
import os
import sys
import time

try:
    import torch
except ImportError:
    print(json.dumps({"error": "PyTorch is not installed (Debian package python3-torch)"}))
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "parity"))
import torch_models  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", choices=["encoder", "vit", "gpt"])
    ap.add_argument("--context", type=int, default=1024)
    ap.add_argument("--slots", default="q,k,v", help="the projection serving Q, K and V (a row of nn/sharing.h)")
    ap.add_argument("--kv-heads", type=int, default=0)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--patch", type=int, default=7)
    ap.add_argument("--image", type=int, default=28)
    ap.add_argument("--channels", type=int, default=1)
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--length", type=int, default=64)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--vocab", type=int, default=10)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--serve", action="store_true", help="take step requests on stdin (bench/torch_session.cpp)")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    if a.model == "encoder":
        cfg = {"vocab": a.vocab, "classes": a.vocab, "layers": a.layers, "ffn_hidden": 2 * a.d_model,
               "d_model": a.d_model, "heads": a.heads, "slots": a.slots.split(","), "dropout": 0.1}
        model = torch_models.Encoder(cfg)
        inputs = torch.randint(0, a.vocab, (a.batch, a.length))
        targets = torch.randint(0, a.vocab, (a.batch, a.length))
    elif a.model == "gpt":
        cfg = {"vocab": a.vocab, "context": a.context, "layers": a.layers, "d_model": a.d_model, "heads": a.heads,
               "kv_heads": a.kv_heads, "slots": a.slots.split(","), "ffn": 4 * a.d_model}
        model = torch_models.GPT(cfg)
        inputs = torch.randint(0, a.vocab, (a.batch, a.length))
        targets = torch.randint(0, a.vocab, (a.batch, a.length))
    else:
        cfg = {"image_height": a.image, "image_width": a.image, "channels": a.channels, "patch": a.patch,
               "classes": 10, "layers": a.layers, "d_model": a.d_model, "heads": a.heads, "slots": a.slots.split(","),
               "mlp_ratio": 4.0, "dropout": 0.0}
        model = torch_models.ViT(cfg)
        inputs = torch.randn(a.batch, a.channels, a.image, a.image)
        targets = torch.randint(0, 10, (a.batch,))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4 if a.model == "gpt" else 1e-3)

    def step():
        logits = model(inputs)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    def timed(n):
        times = []
        for _ in range(n):
            t = time.perf_counter()
            step()
            times.append(1000 * (time.perf_counter() - t))
        return times

    for _ in range(a.warmup):
        step()
    about = {"threads": torch.get_num_threads(), "torch": torch.__version__,
             "parameters": sum(p.numel() for p in model.parameters())}
    if a.serve:
        print(json.dumps(dict(ready=True, **about)), flush=True)
        for line in sys.stdin:
            print(json.dumps({"times_ms": timed(int(line))}), flush=True)
        return
    times = sorted(timed(a.steps))
    print(json.dumps(dict(ms_per_step=times[len(times) // 2], best_ms=times[0], **about)))


if __name__ == "__main__":
    main()
