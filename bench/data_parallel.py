#!/usr/bin/env python3
"""Data-parallel throughput on this machine: one process against N ranks (mpirun) on the same work.

Trains the same GPT (same global batch, same steps, same data) once in one process with all the
cores, once as --ranks processes sharing the cores (qkvlab run --nproc), and prints tokens/s of
each, their ratio, and the all-reduce time the backward did not hide (the run's "data-parallel:"
line). The data is a generated text with a byte-level tokenizer (the fault suite's), so nothing
needs downloading. Ratios are taken in one run; the machine may be shared and noisy.

    python3 bench/data_parallel.py --qkvlab build/release/qkvlab [--ranks 2] [--steps 30]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "fault"))
from kill_resume import write_inputs  # noqa: E402

CONFIG = """\
name: dp-bench
task: {{kind: lm}}
lm: {{tokens: {tokens}}}
model: {{kind: gpt, vocab: 264, context: {context}, d_model: {d_model}, layers: {layers}, heads: 4, ffn_mult: 4.0,
         dropout: 0.0}}
optim: {{name: adamw, lr: 1.0e-3, weight_decay: 0.1, clip: 1.0}}
schedule: {{name: cosine, warmup_steps: 2}}
train: {{steps: {steps}, batch_size: {batch}, eval_every: {steps}, eval_batches: 1, eval_batch_size: 4,
         log_every: 5, peak_tflops: 1.0, threads: {threads}}}
sweep: {{variants: [QKV], seeds: [0]}}
"""


def run(qkvlab, args):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_btl_vader_single_copy_mechanism="none")
    p = subprocess.run([str(qkvlab), *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"qkvlab {' '.join(args)} failed ({p.returncode}):\n{p.stdout}")
    return p.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--qkvlab", required=True, type=Path)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batch", type=int, default=16, help="global batch (rows of --context tokens)")
    ap.add_argument("--context", type=int, default=128)
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    a = ap.parse_args()
    if not shutil.which("mpirun"):
        sys.exit("mpirun not found (Debian: openmpi-bin)")
    cores = os.cpu_count() or 1
    work = Path(tempfile.mkdtemp(prefix="qkvlab-dp-bench-"))
    try:
        tok, text = write_inputs(work)
        tokens = work / "tokens"
        run(a.qkvlab, ["data", "prepare", str(text), "--out", str(tokens), "--tokenizer", str(tok), "--val-fraction",
                       "0.1"])
        rows = []
        for ranks in (1, a.ranks):
            cfg = work / f"dp{ranks}.yaml"
            cfg.write_text(CONFIG.format(tokens=tokens, context=a.context, d_model=a.d_model, layers=a.layers,
                                         steps=a.steps, batch=a.batch, threads=max(1, cores // ranks)))
            out = run(a.qkvlab, ["run", str(cfg), "--out", str(work / f"runs{ranks}"),
                                 *(["--nproc", str(ranks)] if ranks > 1 else [])])
            result = json.loads(next((work / f"runs{ranks}").rglob("result.json")).read_text())
            tps = result["tokens_per_s"]
            m = re.search(r"not hidden by the backward ([0-9.]+) s \(([0-9.]+)% of ([0-9.]+) s\)", out)
            rows.append((ranks, tps, m.group(1) if m else "-", m.group(2) if m else "-"))
        print(f"GPT d{a.d_model} x{a.layers} layers, context {a.context}, global batch {a.batch}, {a.steps} steps, "
              f"{cores} cores shared by the ranks")
        print(f"{'ranks':>5} {'tokens/s':>10} {'vs 1 rank':>9} {'exposed all-reduce':>19}")
        for ranks, tps, sec, pct in rows:
            share = f"{sec} s ({pct}%)" if sec != "-" else "-"
            print(f"{ranks:>5} {tps:>10.0f} {tps / rows[0][1]:>8.2f}x {share:>19}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
