#!/usr/bin/env python3
"""Data-parallel training proved against one process, with `qkvlab run --nproc 2` (mpirun).

Everything it needs is made in --workdir (a byte-level tokenizer and a generated text, as the
fault suite makes them). The checks:

1. The synthetic encoder (copy task, 1001 training examples so that the last batch splits 21/20):
   two ranks and one process train the same model: every logged loss agrees to float tolerance,
   and so do the best-validation weights and the test accuracy. One process through the whole
   data-parallel path (--dist-backend mpi, world size 1) equals the plain run bit for bit.
2. A tiny GPT with gradient accumulation 2, on two ranks and on one: the same losses, validation
   losses and final weights to float tolerance.
3. The same GPT with dropout on two ranks, SIGKILLed during training (the fault hook) and resumed
   with --resume on two ranks: metrics.jsonl and result.json equal the uninterrupted two-rank
   run's bit for bit (timing fields aside). The GPT without dropout killed on two ranks and
   resumed by one process ends as the one-process run, to float tolerance.
4. Two ranks given different configs (mpirun's MPMD form) stop before training, naming rank 1.

Exit status 0 when all holds, 1 otherwise (77: mpirun missing, reported as skipped).
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "fault"))
from kill_resume import outcome as lm_outcome, write_inputs  # noqa: E402  (the fault suite's inputs)

RTOL, ATOL = 2e-4, 2e-5

GPT = """\
name: dp
task: {{kind: lm}}
lm: {{tokens: {tokens}}}
model: {{kind: gpt, vocab: 264, context: 32, d_model: 32, layers: 2, heads: 4, ffn_mult: 2.0, dropout: {dropout}}}
optim: {{name: adamw, lr: 3.0e-3, beta1: 0.9, beta2: 0.95, weight_decay: 0.1, clip: 1.0}}
schedule: {{name: cosine, warmup_steps: 2, min_lr: 3.0e-4}}
train: {{steps: 12, batch_size: 8, grad_accum: 2, eval_every: 6, eval_batches: 2, eval_batch_size: 8,
         log_every: 1, keep_checkpoints: 2, peak_tflops: 1.0, threads: 1, bucket_mb: 0.01}}
sweep: {{variants: [Q-K=V], seeds: [0]}}
"""

ENCODER = ["task.train_size=1001", "task.val_size=200", "task.test_size=150", "task.length=8",
           "model.d_model=32", "model.dropout=0", "train.epochs=2", "train.batch_size=64", "train.eval_batch_size=64",
           "train.log_every=1", "train.threads=1", "train.bucket_mb=0.01", "sweep.variants=[Q=K-V]"]


class Failure(Exception):
    pass


def expect(cond, what):
    if not cond:
        raise Failure(what)


def run(qkvlab, args, env_extra=None, timeout=300):
    env = dict(os.environ, OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_btl_vader_single_copy_mechanism="none")
    env.update(env_extra or {})
    p = subprocess.run([str(qkvlab), *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                       timeout=timeout)
    return p.returncode, p.stdout


def must_run(qkvlab, args, **kw):
    rc, out = run(qkvlab, args, **kw)
    expect(rc == 0, f"qkvlab {' '.join(args)}: exit {rc}\n{out}")
    return out


EPOCH_TIMING = {"steps_per_second", "it_per_s", "data_wait_fraction", "seconds", "data_wait_s"}


def drop_timing(x):
    if isinstance(x, dict):
        return {k: drop_timing(v) for k, v in x.items() if k not in EPOCH_TIMING}
    if isinstance(x, (list, tuple)):
        return [drop_timing(v) for v in x]
    return x


def outcome(run):
    """result.json and metrics.jsonl without their timing fields (the LM ones and the epoch loop's)."""
    return drop_timing(lm_outcome(run))


def safetensors(path):
    """name -> list of floats (float32 tensors only), read with the format's own layout."""
    raw = Path(path).read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__" or info["dtype"] != "F32":
            continue
        a, b = info["data_offsets"]
        out[name] = struct.unpack(f"<{(b - a) // 4}f", raw[8 + n + a:8 + n + b])
    return out


def close(a, b):
    return abs(a - b) <= ATOL + RTOL * abs(b)


def compare_losses(one, two, what):
    """Every record with a loss or val_loss: the same records, values to tolerance."""
    def losses(records):
        return [(k, r[k]) for r in records for k in ("loss", "val_loss", "val_accuracy", "test_accuracy") if k in r]
    a, b = losses(one), losses(two)
    expect(len(a) == len(b) and len(a) > 0, f"{what}: {len(a)} loss records on one process, {len(b)} on two ranks")
    for (ka, va), (kb, vb) in zip(a, b):
        expect(ka == kb and close(vb, va), f"{what}: {ka} {va} on one process, {kb} {vb} on two ranks")
    return len(a)


def compare_weights(one, two, what):
    wa, wb = safetensors(one), safetensors(two)
    expect(wa.keys() == wb.keys() and wa, f"{what}: different tensors in {one} and {two}")
    worst = 0.0
    for name in wa:
        for x, y in zip(wa[name], wb[name]):
            expect(close(y, x), f"{what}: {name} differs: {x} on one process, {y} on two ranks")
            worst = max(worst, abs(x - y))
    return worst


def run_folder(out):
    found = list(Path(out).rglob("result.json"))
    expect(len(found) == 1, f"expected one finished run under {out}, found {found}")
    return found[0].parent


def newest_model(run):
    return max((run / "checkpoints").glob("step_*[0-9].safetensors"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--qkvlab", required=True, type=Path)
    ap.add_argument("--source", required=True, type=Path, help="the source tree (experiments/)")
    ap.add_argument("--workdir", required=True, type=Path)
    a = ap.parse_args()
    if not shutil.which("mpirun"):
        print("mpirun not found (Debian: openmpi-bin): skipped")
        return 77
    work = a.workdir.resolve()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    q = a.qkvlab.resolve()
    t0 = time.time()
    try:
        # 1. The synthetic encoder.
        copy = str(a.source / "experiments/synthetic/copy.yaml")
        must_run(q, ["run", copy, "--out", str(work / "enc1"), *ENCODER])
        out = must_run(q, ["run", copy, "--out", str(work / "enc2"), "--nproc", "2", *ENCODER])
        expect("mpirun -np 2" in out, f"--nproc 2 did not print the mpirun command:\n{out}")
        r1, r2 = run_folder(work / "enc1"), run_folder(work / "enc2")
        n = compare_losses(outcome(r1)[1], outcome(r2)[1], "encoder")
        w = compare_weights(r1 / "checkpoint.safetensors", r2 / "checkpoint.safetensors", "encoder")
        print(f"encoder: {n} losses and accuracies agree; best weights within {w:.2g}")
        must_run(q, ["run", copy, "--out", str(work / "enc-mpi1"), "--dist-backend", "mpi", *ENCODER])
        expect(outcome(run_folder(work / "enc-mpi1")) == outcome(r1),
               "one process through the data-parallel path (--dist-backend mpi) differs from the plain run")
        print("encoder: one rank through the data-parallel path equals the plain run bit for bit")

        # 2. The tiny GPT with gradient accumulation.
        tok, text = write_inputs(work)
        tokens = work / "tokens"
        must_run(q, ["data", "prepare", str(text), "--out", str(tokens), "--tokenizer", str(tok), "--shard-tokens",
                     "4000", "--val-fraction", "0.2", "--threads", "1"])
        plain, dropout = work / "gpt.yaml", work / "gpt-dropout.yaml"
        plain.write_text(GPT.format(tokens=tokens, dropout=0.0))
        dropout.write_text(GPT.format(tokens=tokens, dropout=0.1))
        must_run(q, ["run", str(plain), "--out", str(work / "gpt1")])
        must_run(q, ["run", str(plain), "--out", str(work / "gpt2"), "--nproc", "2"])
        r1, r2 = run_folder(work / "gpt1"), run_folder(work / "gpt2")
        n = compare_losses(outcome(r1)[1], outcome(r2)[1], "gpt")
        w = compare_weights(newest_model(r1), newest_model(r2), "gpt")
        print(f"gpt: {n} losses agree; final weights within {w:.2g}")

        # 3. Resume of a killed two-rank run.
        must_run(q, ["run", str(dropout), "--out", str(work / "ref"), "--nproc", "2"])
        rc, out = run(q, ["run", str(dropout), "--out", str(work / "killed"), "--nproc", "2"],
                      env_extra={"QKV_FAULT_KILL_AT": "9:train"})
        expect(rc != 0, f"a two-rank run killed at step 9 exited 0:\n{out}")
        must_run(q, ["run", str(dropout), "--out", str(work / "killed"), "--nproc", "2", "--resume"])
        ref, resumed = outcome(run_folder(work / "ref")), outcome(run_folder(work / "killed"))
        expect(resumed == ref, f"the resumed two-rank run differs from the uninterrupted one:\n{resumed}\n{ref}")
        print("resume: a two-rank run killed at step 9 and resumed equals the uninterrupted run bit for bit")
        rc, out = run(q, ["run", str(plain), "--out", str(work / "regrouped"), "--nproc", "2"],
                      env_extra={"QKV_FAULT_KILL_AT": "9:train"})
        expect(rc != 0, f"a two-rank run killed at step 9 exited 0:\n{out}")
        must_run(q, ["run", str(plain), "--out", str(work / "regrouped"), "--resume"])
        n = compare_losses(outcome(run_folder(work / "gpt1"))[1], outcome(run_folder(work / "regrouped"))[1],
                           "resumed by one process")
        print(f"resume: a two-rank run resumed by one process ends as the one-process run ({n} losses)")

        # 4. Ranks that disagree on the config.
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        base = ["run", copy, "--out", str(work / "mismatch"), *ENCODER]
        p = subprocess.run(["mpirun", "--oversubscribe", "-np", "1", str(q), *base, "optim.lr=0.002", ":", "-np", "1",
                            str(q), *base, "optim.lr=0.003"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, env=env, timeout=120)
        expect(p.returncode != 0 and "rank(s) 1 differ from rank 0's" in p.stdout,
               f"ranks with different configs: exit {p.returncode}, expected an error naming rank 1:\n{p.stdout}")
        expect(not list((work / "mismatch").rglob("metrics.jsonl")), "ranks with different configs trained")
        print("mismatch: ranks given different configs stop before training, naming rank 1")
    except (Failure, subprocess.TimeoutExpired) as e:
        print(f"FAIL: {e}\n(work folder kept: {work})", file=sys.stderr)
        return 1
    print(f"data-parallel: all checks hold ({time.time() - t0:.0f} s)")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
