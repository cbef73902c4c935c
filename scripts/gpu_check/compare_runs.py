#!/usr/bin/env python3
"""Compares two trees of qkvlab run folders (the same experiments run on two devices).

Every run folder (one holding metrics.jsonl) under A must exist under B at the same relative
path. Their step losses (each logged step) and epoch train/validation losses are compared; the
largest relative difference per run is printed as a table, and the exit code is 1 when any run
differs by more than --rtol, or a run is missing or unfinished.

    compare_runs.py A B [--rtol 1e-4]
"""
import argparse
import json
import pathlib
import sys


def losses(path):
    """(label, value) pairs of a metrics.jsonl in file order: step losses and epoch losses."""
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            r = json.loads(line)
            kind = r.get("record")
            if kind == "step":
                out.append((f"step {r['step']} loss", r["loss"]))
            elif kind == "epoch":
                out.append((f"epoch {r['epoch']} train_loss", r["train_loss"]))
                out.append((f"epoch {r['epoch']} val_loss", r["val_loss"]))
            elif kind == "eval":
                out.append((f"step {r['step']} val_loss", r["val_loss"]))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a", type=pathlib.Path)
    ap.add_argument("b", type=pathlib.Path)
    ap.add_argument("--rtol", type=float, default=1e-4)
    args = ap.parse_args()

    runs = sorted(p.parent.relative_to(args.a) for p in args.a.rglob("metrics.jsonl"))
    if not runs:
        print(f"compare_runs: no run folders (metrics.jsonl) under {args.a}", file=sys.stderr)
        return 1
    bad = 0
    print(f"| run | values | max relative difference | worst at |\n|---|---:|---:|---|")
    for run in runs:
        pa, pb = args.a / run / "metrics.jsonl", args.b / run / "metrics.jsonl"
        if not pb.exists():
            print(f"| {run} | - | missing under {args.b} | |")
            bad += 1
            continue
        la, lb = losses(pa), losses(pb)
        if [k for k, _ in la] != [k for k, _ in lb] or not la:
            print(f"| {run} | {len(la)} vs {len(lb)} | different records | |")
            bad += 1
            continue
        worst, where = 0.0, ""
        for (k, va), (_, vb) in zip(la, lb):
            d = abs(va - vb) / max(abs(vb), 1e-12)
            if d > worst or d != d:
                worst, where = d, k
        ok = worst <= args.rtol
        bad += not ok
        print(f"| {run} | {len(la)} | {worst:.2e}{'' if ok else ' FAIL'} | {where} |")
    print(f"\ncompare_runs: {len(runs) - bad} of {len(runs)} runs within {args.rtol:g} relative")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
