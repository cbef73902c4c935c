#!/usr/bin/env python3
"""Times training steps of qkvlab's models rebuilt in PyTorch (tests/parity/torch_models.py), for
the benchmarks that print their peers beside qkvlab. Prints one JSON line: {"ms_per_step": ...}.
With --serve (bench/torch_session.cpp) it prints {"ready": true, ...} once warmed up, then for each
line "N [fp32|bf16]" read from stdin runs N steps and prints {"times_ms": [...]}, until stdin ends.

  torch_step.py encoder --d-model 64 --layers 2 --heads 4 --length 64 --batch 128 --threads 2
  torch_step.py vit --d-model 64 --layers 4 --heads 4 --patch 7 --image 28 --batch 128 --threads 2
  torch_step.py gpt --vocab 50257 --context 1024 --layers 12 --d-model 768 --heads 12 --length 64 \
                    --batch 4 --slots q,kv,kv --kv-heads 0 --steps 5 --threads 2
  --mode eager (default) or compile: torch.compile (inductor, PyTorch >= 2) of the model and the
  loss, the optimizer step too; --precision fp32,bf16: the precisions to warm up and serve (bf16:
  the forward and the loss under torch.autocast("cpu", torch.bfloat16), as train.precision: bf16).
Exit 77 when PyTorch is not installed.
"""
import argparse
import json
import os
import sys

from peer_protocol import fail, run_main, serve, step_arguments, times_ms

try:
    import torch
except ImportError:
    fail(f"PyTorch is not installed in {sys.executable} (Debian: python3-torch; "
         "PyTorch 2: bash bench/peers/setup.sh)", 77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "parity"))
import torch_models  # noqa: E402


def build(a):
    """The model, its inputs and targets."""
    if a.model == "encoder":
        cfg = {"vocab": a.vocab, "classes": a.vocab, "layers": a.layers, "ffn_hidden": 2 * a.d_model,
               "d_model": a.d_model, "heads": a.heads, "slots": a.slots.split(","), "dropout": 0.1}
        return (torch_models.Encoder(cfg), torch.randint(0, a.vocab, (a.batch, a.length)),
                torch.randint(0, a.vocab, (a.batch, a.length)))
    if a.model == "gpt":
        cfg = {"vocab": a.vocab, "context": a.context, "layers": a.layers, "d_model": a.d_model, "heads": a.heads,
               "kv_heads": a.kv_heads, "slots": a.slots.split(","), "ffn": 4 * a.d_model}
        return (torch_models.GPT(cfg), torch.randint(0, a.vocab, (a.batch, a.length)),
                torch.randint(0, a.vocab, (a.batch, a.length)))
    cfg = {"image_height": a.image, "image_width": a.image, "channels": a.channels, "patch": a.patch,
           "classes": 10, "layers": a.layers, "d_model": a.d_model, "heads": a.heads, "slots": a.slots.split(","),
           "mlp_ratio": 4.0, "dropout": 0.0}
    return (torch_models.ViT(cfg), torch.randn(a.batch, a.channels, a.image, a.image),
            torch.randint(0, 10, (a.batch,)))


def main():
    ap = argparse.ArgumentParser()
    step_arguments(ap)
    ap.add_argument("--mode", choices=["eager", "compile"], default="eager")
    ap.add_argument("--precision", default="fp32", help="fp32, bf16 or fp32,bf16: warmed up and served")
    a = ap.parse_args()
    precisions = a.precision.split(",")
    if any(p not in ("fp32", "bf16") for p in precisions):
        fail(f"--precision: {a.precision} (fp32, bf16 or fp32,bf16)")
    if a.mode == "compile" and not hasattr(torch, "compile"):
        fail(f"PyTorch {torch.__version__} has no torch.compile (PyTorch 2: bash bench/peers/setup.sh)")
    unsupported = ""
    if "bf16" in precisions and hasattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported") \
            and not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        precisions.remove("bf16")
        unsupported = f"PyTorch {torch.__version__} has no bf16 matmul on this CPU"
        if not precisions:
            fail(unsupported)
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model, inputs, targets = build(a)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4 if a.model == "gpt" else 1e-3)

    def loss_of(x, y):
        logits = model(x)
        return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))

    def update():
        opt.step()

    if a.mode == "compile":
        import torch._inductor.config as inductor
        inductor.compile_threads = 1  # no pool of compile processes holding memory
        loss_of = torch.compile(loss_of)
        update = torch.compile(update)

    def step(precision):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = loss_of(inputs, targets)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        update()

    for p in list(precisions):
        try:
            for _ in range(a.warmup):
                step(p)
        except Exception as e:  # torch 2.5.1's inductor fails on the bf16 GPT (a C++ error in its code)
            if p == precisions[0]:
                raise
            precisions.remove(p)
            unsupported = (f"torch {torch.__version__}'s inductor failed on the {p} step "
                           f"({type(e).__name__}: {str(e).strip().splitlines()[0][:120]})")
    version = torch.__version__.split("+")[0]
    about = {"name": f"torch.compile {version}" if a.mode == "compile" else f"PyTorch {version}",
             "mode": a.mode, "threads": torch.get_num_threads(), "torch": torch.__version__,
             "precisions": precisions, "unsupported": unsupported,
             "parameters": sum(p.numel() for p in model.parameters())}
    if a.serve:
        def answer(words):
            p = words[1] if len(words) > 1 else precisions[0]
            if p not in precisions:
                fail(f"{p} was not warmed up (--precision {a.precision})")
            return times_ms(step, int(words[0]), p)
        serve(about, answer)
        return
    times = sorted(times_ms(step, a.steps, precisions[0]))
    print(json.dumps(dict(ms_per_step=times[len(times) // 2], best_ms=times[0], **about)))


if __name__ == "__main__":
    run_main(main)
