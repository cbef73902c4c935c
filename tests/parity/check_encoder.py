#!/usr/bin/env python3
"""Parity of qkvlab's encoder with PyTorch, for every attention variant.

Runs parity_dump, then for each case rebuilds the model in PyTorch (torch_models.Encoder) from
the dumped weights and compares logits, loss and every parameter gradient, then torch.optim.AdamW
stepping from the same gradients against qkvlab's step, each to 1e-4 relative to the tensor's
largest magnitude. Exit 77 (CTest: skipped)
when PyTorch is not installed.

  check_encoder.py --dump PATH_TO_parity_dump --workdir DIR
"""
import argparse
import json
import os
import subprocess
import sys

try:
    import torch
except ImportError:
    print("parity: skipped (PyTorch is not installed; Debian package python3-torch)")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_models  # noqa: E402

RTOL = 1e-4


def rel_err(got, want, floor=1e-6):
    """Largest difference relative to the reference's largest magnitude (at least `floor`)."""
    scale = max(want.abs().max().item(), floor)
    return (got - want).abs().max().item() / scale


def check_case(path):
    data = torch_models.read_safetensors(path)
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        cfg = json.loads(json.loads(f.read(n))["__metadata__"]["config"])
    model = torch_models.Encoder(cfg)
    params = {k[len("param."):]: v for k, v in data.items() if k.startswith("param.")}
    model.load_state_dict(params, strict=True)
    logits = model(data["ids"])
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, cfg["classes"]), data["targets"].reshape(-1))
    loss.backward()
    errors = {"logits": rel_err(logits.detach(), data["logits"]), "loss": rel_err(loss.detach(), data["loss"])}
    # Some gradients are exactly zero in exact arithmetic (a key bias or the 2D-score bias shifts
    # a whole softmax row) and only rounding noise in both frameworks: gradients are compared
    # relative to their own scale but no finer than 1e-3 of the largest gradient of the model.
    floor = 1e-3 * max(data["grad." + name].abs().max().item() for name in params)
    for name, p in model.named_parameters():
        errors["grad." + name] = rel_err(p.grad, data["grad." + name], floor)
    # The AdamW step from qkvlab's own gradients: Adam normalizes even rounding-noise gradients
    # to steps of about lr, so the optimizer is compared on identical inputs.
    for name, p in model.named_parameters():
        p.grad = data["grad." + name].clone()
    a = cfg["adamw"]
    opt = torch.optim.AdamW(model.parameters(), lr=a["lr"], betas=(a["beta1"], a["beta2"]), eps=a["eps"],
                            weight_decay=a["weight_decay"])
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(params[name])
    opt.step()
    for name, p in model.named_parameters():
        errors["after." + name] = rel_err(p.detach(), data["after." + name])
    worst = max(errors, key=errors.get)
    ok = errors[worst] <= RTOL
    print(f"{cfg['variant']:>9}: {len(params)} params, logits {errors['logits']:.1e}, loss {errors['loss']:.1e}, "
          f"worst {worst} {errors[worst]:.1e} -> {'ok' if ok else 'FAIL'}")
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dump", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    subprocess.run([args.dump, args.workdir], check=True)
    cases = sorted(f for f in os.listdir(args.workdir) if f.startswith("case_"))
    results = [check_case(os.path.join(args.workdir, f)) for f in cases]
    print(f"{sum(results)} passed, {len(results) - sum(results)} failed")
    sys.exit(0 if results and all(results) else 1)


if __name__ == "__main__":
    main()
