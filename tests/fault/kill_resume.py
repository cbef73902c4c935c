#!/usr/bin/env python3
"""Fault injection: a tiny language-model experiment, SIGKILLed again and again and resumed.

Everything it needs is made in --workdir: a byte-level GPT-2-format tokenizer (the 256 bytes and
<|endoftext|>, no merges), a generated text, its prepared token shards, and the experiment file.

1. `qkvlab data prepare` is killed before renaming a shard; the next prepare removes the
   temporary files it left, saying so.
2. The experiment runs uninterrupted once: the reference.
3. The same experiment in another output folder is killed at least --kills times, each time
   resumed with `--resume`: at fault points reached through the testing hook QKV_FAULT_KILL_AT
   (right after start, during training, during validation, between and inside the checkpoint
   files' writes, inside result.json's write) and at random times (seeded). On the way it checks
   that a run without --resume refuses to touch the checkpoints, that a second process on a
   locked run folder is refused with the holder named, that --restart deletes the checkpoints,
   and that the temporary files a kill left are removed by the next start.
4. Every resume must succeed (exit 0 or die by our SIGKILL, nothing else), and the final
   result.json metrics and metrics.jsonl records, apart from timing fields, must equal the
   reference's bit for bit. No temporary file may remain.

Exit status 0 when all holds, 1 otherwise.
"""
import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

STEPS, EVAL_EVERY, LOG_EVERY = 36, 6, 4  # LOG_EVERY does not divide EVAL_EVERY on purpose
TIMING = {"tokens_per_s", "mfu", "seconds", "resumed_from"}  # resumed_from differs by design
TEMP = re.compile(r"\..+\.tmp\.\d+\.[0-9a-f]{8}|.+\.tmp\.\d+|\.tokens\.\d+\.tmp")
KILLED = -signal.SIGKILL

CONFIG = """\
name: fault
task: {{kind: lm}}
lm: {{tokens: {tokens}}}
model: {{kind: gpt, vocab: 264, context: 32, d_model: 32, layers: 2, heads: 4, ffn_mult: 2.0, dropout: 0.1}}
optim: {{name: adamw, lr: 3.0e-3, beta1: 0.9, beta2: 0.95, weight_decay: 0.1, clip: 1.0}}
schedule: {{name: cosine, warmup_steps: 4, min_lr: 3.0e-4}}
train: {{steps: {steps}, batch_size: 8, eval_every: {eval_every}, eval_batches: 2, eval_batch_size: 8,
         log_every: {log_every}, keep_checkpoints: 2, peak_tflops: 1.0, threads: 1}}
sweep: {{variants: [Q=K-V], seeds: [0]}}
"""


class Failure(Exception):
    pass


def expect(cond, what):
    if not cond:
        raise Failure(what)


def byte_alphabet():
    """GPT-2's map from bytes to the printable characters that spell them in encoder.json."""
    bs = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def write_inputs(work):
    tok = work / "tokenizer"
    tok.mkdir()
    encoder = {ch: b for b, ch in byte_alphabet().items()}
    encoder["<|endoftext|>"] = 256
    (tok / "encoder.json").write_text(json.dumps(encoder), encoding="utf-8")
    (tok / "vocab.bpe").write_text("#version: 0.2\n", encoding="utf-8")
    rng = random.Random(0)  # the text is fixed; --seed varies only the kills
    words = "the a of to and in that it was for on are as with his they at be this from have or by".split()
    lines = []
    for _ in range(400):
        lines.append(" ".join(rng.choice(words) for _ in range(rng.randint(4, 12))).capitalize() + ".")
    text = work / "text.txt"
    text.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return tok, text


def temp_files(root):
    return sorted(p for p in Path(root).rglob("*") if p.is_file() and TEMP.fullmatch(p.name))


def newest_checkpoint(run):
    """The newest complete checkpoint's step (0: none), by the loop's exact file names."""
    best = 0
    for p in (run / "checkpoints").glob("step_*.state.safetensors"):
        m = re.fullmatch(r"step_(\d{8,})\.state\.safetensors", p.name)
        if m and (p.parent / f"step_{m.group(1)}.safetensors").is_file():
            best = max(best, int(m.group(1)))
    return best


def strip_timing(x):
    if isinstance(x, dict):
        return {k: strip_timing(v) for k, v in x.items() if k not in TIMING}
    if isinstance(x, list):
        return [strip_timing(v) for v in x]
    return x


def outcome(run):
    result = json.loads((run / "result.json").read_text())
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return strip_timing(result), [strip_timing(json.loads(l)) for l in lines]


class Driver:
    def __init__(self, qkvlab, work, verbose):
        self.qkvlab, self.work, self.verbose = qkvlab, work, verbose
        self.config = work / "fault.yaml"

    def start(self, args, fault=None, stop=False):
        env = {k: v for k, v in os.environ.items() if not k.startswith("QKV_FAULT_")}
        env["OMP_NUM_THREADS"] = "1"
        if fault:
            env["QKV_FAULT_KILL_AT"] = fault
        if stop:
            env["QKV_FAULT_SIGNAL"] = "SIGSTOP"
        return subprocess.Popen([str(self.qkvlab), *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, env=env)

    def run(self, args, fault=None, kill_after=None, timeout=600):
        p = self.start(args, fault)
        if kill_after is not None:
            try:
                p.wait(timeout=kill_after)
            except subprocess.TimeoutExpired:
                p.kill()
        out, _ = p.communicate(timeout=timeout)
        if self.verbose:
            print(f"  $ qkvlab {' '.join(args)}  [{fault or kill_after}] -> {p.returncode}")
        return p.returncode, out

    def lm_run(self, out, *flags, **kw):
        return self.run(["run", str(self.config), "--out", str(out), *flags], **kw)


def check_prepare(d, tok, text):
    """A prepare killed before renaming its second shard, then one that cleans up after it."""
    tokens = d.work / "tokens"
    args = ["data", "prepare", str(text), "--out", str(tokens), "--tokenizer", str(tok), "--shard-tokens", "4000",
            "--val-fraction", "0.2", "--threads", "1"]
    rc, out = d.run(args, fault="1:prepare-shard")
    expect(rc == KILLED, f"data prepare with a kill hook: exit {rc}, expected SIGKILL\n{out}")
    left = temp_files(tokens)
    expect(left, "a killed data prepare left no temporary file to clean up (the hook fired too late?)")
    rc, out = d.run(args)
    expect(rc == 0, f"data prepare after a killed one: exit {rc}\n{out}")
    for f in left:
        expect(f"removed {f}" in out, f"data prepare did not say it removed {f}:\n{out}")
    expect(not temp_files(tokens), f"temporary files remain after data prepare: {temp_files(tokens)}")
    return tokens


class KillRounds:
    """Kills runs of the experiment in `work/faulty*` until `kills` kills are done."""

    def __init__(self, d, rel, reference, rng, t_ref):
        self.d, self.rel, self.reference, self.rng, self.t_ref = d, rel, reference, rng, t_ref
        self.kills, self.rounds, self.phase_kills = 0, 0, {}
        self.new_round()

    def new_round(self):
        self.rounds += 1
        self.out = self.d.work / f"faulty{self.rounds}"
        self.run_dir = self.out / self.rel

    def finish_round(self):
        rc, out = self.d.lm_run(self.out, "--resume")
        expect(rc == 0, f"the final resume failed: exit {rc}\n{out}")
        got = outcome(self.run_dir)
        expect(got[0] == self.reference[0], f"result.json differs from the uninterrupted run's:\n"
               f"  got      {got[0]}\n  expected {self.reference[0]}")
        expect(len(got[1]) == len(self.reference[1]),
               f"metrics.jsonl has {len(got[1])} records, the uninterrupted run {len(self.reference[1])}")
        for i, (a, b) in enumerate(zip(got[1], self.reference[1])):
            expect(a == b, f"metrics.jsonl record {i + 1} differs:\n  got      {a}\n  expected {b}")
        expect(not temp_files(self.out), f"temporary files remain: {temp_files(self.out)}")

    def fault_for(self, phase):
        """A QKV_FAULT_KILL_AT value that will fire in the next run, resuming from its newest checkpoint."""
        r = newest_checkpoint(self.run_dir)
        evals = [s for s in range(EVAL_EVERY, STEPS + 1, EVAL_EVERY) if s > r]
        if phase == "start" or (phase != "result" and not evals):
            return "*:start"
        if phase == "result":
            return "0:result"
        if phase == "train":
            return f"{self.rng.randint(r + 1, min(STEPS, r + 2 * EVAL_EVERY))}:train"
        return f"{self.rng.choice(evals[:2])}:{phase}"

    def kill(self, phase):
        """One killed (or, for a random time that came too late, finished) attempt."""
        before = temp_files(self.out)
        if phase == "time":
            remaining = (STEPS - newest_checkpoint(self.run_dir)) / STEPS
            delay = self.rng.uniform(0.0, 0.8 * self.t_ref * remaining + 0.05)
            rc, out = self.d.lm_run(self.out, "--resume", kill_after=delay)
            what = f"SIGKILL after {delay:.3f} s"
        else:
            fault = self.fault_for(phase)
            rc, out = self.d.lm_run(self.out, "--resume", fault=fault)
            what = f"QKV_FAULT_KILL_AT={fault}"
            expect(rc == KILLED, f"{what}: exit {rc}, expected the hook's SIGKILL\n{out}")
            # Removed at start, before any fault point: no leftover survives a second start.
            for f in before:
                expect(not f.exists(), f"{what}: the temporary file {f} of an earlier kill was not removed")
        expect(rc in (0, KILLED), f"{what}: a resume failed with exit {rc}\n{out}")
        if rc == KILLED:
            self.kills += 1
            self.phase_kills[phase] = self.phase_kills.get(phase, 0) + 1
        # The run finished before the random kill, or the kill came after result.json was written
        # (while the tables were printed): check it and start another.
        if rc != KILLED or (self.run_dir / "result.json").exists():
            self.finish_round()
            self.new_round()

    def refuse_without_resume(self):
        """With checkpoints and no --resume the run stops, naming the folder and the newest checkpoint."""
        step = newest_checkpoint(self.run_dir)
        expect(step > 0, "no checkpoint to protect yet")
        files = sorted(p.name for p in (self.run_dir / "checkpoints").iterdir())
        rc, out = self.d.lm_run(self.out)
        newest = self.run_dir / "checkpoints" / f"step_{step:08d}.safetensors"
        expect(rc == 1, f"a run without --resume over checkpoints: exit {rc}, expected 1\n{out}")
        for part in (str(self.run_dir), str(newest), "--resume", "--restart"):
            expect(part in out, f"the refusal does not name '{part}':\n{out}")
        expect(sorted(p.name for p in (self.run_dir / "checkpoints").iterdir()) == files,
               "a refused run changed the checkpoints")

    def refuse_locked(self):
        """A second process on a run folder in use is refused, naming the holder; the holder is then killed."""
        holder = self.d.start(["run", str(self.d.config), "--out", str(self.out), "--resume"], fault="*:start",
                              stop=True)
        deadline = time.time() + 120
        while time.time() < deadline and holder.poll() is None:
            with open(f"/proc/{holder.pid}/stat") as f:
                if f.read().split(") ")[-1].startswith("T"):  # stopped at the fault point, holding the lock
                    break
            time.sleep(0.01)
        expect(holder.poll() is None, f"the holder exited ({holder.returncode}) instead of stopping")
        rc, out = self.d.lm_run(self.out, "--resume")
        holder.kill()
        holder.communicate()
        expect(rc == 1, f"a second run on a locked run folder: exit {rc}, expected 1\n{out}")
        for part in ("in use by another process", f"pid {holder.pid} ", str(self.run_dir)):
            expect(part in out, f"the lock refusal does not name '{part}':\n{out}")
        self.kills += 1
        self.phase_kills["locked"] = 1

    def restart(self):
        """--restart deletes the checkpoints (and says so), then starts over; killed right after start."""
        expect(newest_checkpoint(self.run_dir) > 0, "no checkpoint to delete yet")
        p = self.d.start(["run", str(self.d.config), "--out", str(self.out), "--restart"], fault="*:start")
        p.communicate()
        expect(p.returncode == KILLED, f"--restart with a kill at start: exit {p.returncode}")
        expect(newest_checkpoint(self.run_dir) == 0, "--restart left checkpoints behind")
        self.kills += 1
        self.phase_kills["restart"] = 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--qkvlab", required=True, type=Path, help="the qkvlab binary")
    ap.add_argument("--workdir", required=True, type=Path, help="scratch folder (emptied first)")
    ap.add_argument("--kills", type=int, default=24, help="SIGKILLs of training runs (default 24)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the kill points and times")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()
    work = a.workdir.resolve()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    d = Driver(a.qkvlab.resolve(), work, a.verbose)
    rng = random.Random(a.seed)
    t0 = time.time()
    try:
        tok, text = write_inputs(work)
        tokens = check_prepare(d, tok, text)
        d.config.write_text(CONFIG.format(tokens=tokens, steps=STEPS, eval_every=EVAL_EVERY, log_every=LOG_EVERY))

        start = time.time()
        rc, out = d.lm_run(work / "reference")
        t_ref = time.time() - start
        expect(rc == 0, f"the uninterrupted run failed: exit {rc}\n{out}")
        results = list((work / "reference").rglob("result.json"))
        expect(len(results) == 1, f"expected one run folder with result.json, found {results}")
        rel = results[0].parent.relative_to(work / "reference")
        reference = outcome(results[0].parent)

        k = KillRounds(d, rel, reference, rng, t_ref)
        # A fixed opening that reaches the CLI checks, then phases and random times, shuffled.
        for phase in ("start", "train", "checkpoint-state", "time"):
            k.kill(phase)
        while newest_checkpoint(k.run_dir) == 0:
            k.kill("train")
        k.refuse_without_resume()
        k.refuse_locked()
        k.restart()
        plan = ["start", "train", "eval", "checkpoint-model", "checkpoint", "checkpoint-state"] * 2 + ["result"]
        plan += ["time"] * max(0, a.kills - k.kills - len(plan))
        rng.shuffle(plan)
        for phase in plan:
            k.kill(phase)
        while k.kills < a.kills:
            k.kill(rng.choice(["time", "train", "eval", "checkpoint"]))
        k.finish_round()
    except Failure as e:
        print(f"FAIL: {e}", file=sys.stderr)
        print(f"(work folder kept: {work})", file=sys.stderr)
        return 1
    kinds = ", ".join(f"{p} {n}" for p, n in sorted(k.phase_kills.items()))
    print(f"kill-resume: {k.kills} kills in {k.rounds} round(s) ({kinds}); reference run {t_ref:.1f} s, all "
          f"{time.time() - t0:.0f} s; every resume succeeded and the final metrics equal the uninterrupted run's")
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
