#!/usr/bin/env python3
"""Compares two trees of qkvlab run folders (the same experiments run on two devices).

Every run folder (one holding metrics.jsonl) under A must exist under B at the same relative
path. Their step losses (each logged step) and epoch train/validation losses are compared. Two
devices sum in different orders, and the difference grows as training goes on, so the steps up
to --tight-steps are held to --rtol and everything later (epoch records too) to
|a - b| <= --rtol-late * |b| + --atol-late: a kernel bug shows in the first steps, drift does not.
The largest difference of each kind per run is printed as a table, and the exit code is 1 when
any run is outside its tolerances, a value is not finite, or a run is missing or unfinished.

    compare_runs.py A B [--rtol 1e-4] [--tight-steps 10] [--rtol-late 1e-2] [--atol-late 1e-3]
"""
import argparse
import json
import math
import pathlib
import sys


def losses(path):
    """(label, value, step or None) triples of a metrics.jsonl in file order: step losses and epoch losses."""
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            r = json.loads(line)
            kind = r.get("record")
            if kind == "step":
                out.append((f"step {r['step']} loss", r["loss"], r["step"]))
            elif kind == "epoch":
                out.append((f"epoch {r['epoch']} train_loss", r["train_loss"], None))
                out.append((f"epoch {r['epoch']} val_loss", r["val_loss"], None))
            elif kind == "eval":
                out.append((f"step {r['step']} val_loss", r["val_loss"], r["step"]))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a", type=pathlib.Path)
    ap.add_argument("b", type=pathlib.Path)
    ap.add_argument("--rtol", type=float, default=1e-4, help="relative tolerance of the early steps")
    ap.add_argument("--tight-steps", type=int, default=10, help="steps held to --rtol")
    ap.add_argument("--rtol-late", type=float, default=1e-2, help="relative tolerance after them")
    ap.add_argument("--atol-late", type=float, default=1e-3, help="absolute tolerance after them")
    args = ap.parse_args()

    runs = sorted(p.parent.relative_to(args.a) for p in args.a.rglob("metrics.jsonl"))
    if not runs:
        print(f"compare_runs: no run folders (metrics.jsonl) under {args.a}", file=sys.stderr)
        return 1
    bad = 0
    print("| run | values | early max rel. diff | late max diff (rel.) | worst at |\n|---|---:|---:|---:|---|")
    for run in runs:
        pa, pb = args.a / run / "metrics.jsonl", args.b / run / "metrics.jsonl"
        if not pb.exists():
            print(f"| {run} | - | missing under {args.b} | | |")
            bad += 1
            continue
        la, lb = losses(pa), losses(pb)
        if [k for k, _, _ in la] != [k for k, _, _ in lb] or not la:
            print(f"| {run} | {len(la)} vs {len(lb)} | different records | | |")
            bad += 1
            continue
        early, late, where, ok = 0.0, 0.0, "", True
        for (k, va, step), (_, vb, _) in zip(la, lb):
            diff = abs(va - vb)
            rel = diff / max(abs(vb), 1e-12)
            if not (math.isfinite(va) and math.isfinite(vb)):
                ok, where = False, f"{k} not finite"
            elif step is not None and step <= args.tight_steps:
                early = max(early, rel)
                if rel > args.rtol and ok:
                    ok, where = False, k
            else:
                late = max(late, rel)
                if diff > args.rtol_late * abs(vb) + args.atol_late and ok:
                    ok, where = False, k
        bad += not ok
        print(f"| {run} | {len(la)} | {early:.2e} | {late:.2e} | {'' if ok else 'FAIL '}{where} |")
    print(f"\ncompare_runs: {len(runs) - bad} of {len(runs)} runs within {args.rtol:g} relative (steps <= "
          f"{args.tight_steps}), {args.rtol_late:g} relative + {args.atol_late:g} after")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
