#!/usr/bin/env python3
"""Data-parallel training across hosts, and what a job does when a host fails.

The hosts are network namespaces on this machine (tests/multinode/netbed.sh): each its own
address, hostname and mount namespace, joined by a bridge; Open MPI starts the ranks from a
hostfile through an rsh agent and they talk over TCP (btl tcp, the out-of-band channel on those
addresses), as on a cluster. Each --case is one CTest test (label `multinode`):

  train           two hosts train what one process trains (losses and weights to float tolerance)
  kill-allreduce  rank 1 SIGKILLed as it starts a gradient all-reduce,
  kill-checkpoint rank 0 SIGKILLed between a checkpoint's two files,
  kill-eval       rank 1 SIGKILLed during validation: each time every rank ends within
                  --dist-timeout plus a few seconds, the output names the rank, its host and the
                  collective, the run folder holds only complete checkpoints, and --resume
                  continues to the uninterrupted run's metrics bit for bit
  link-down       rank 1's host loses its link mid-run: every rank ends by the timeout, no hang
  slow-link       rank 1's host is rate-limited: training completes, and the log's all-reduce line
                  shows more time not hidden by the backward than on a fast link
  hosts-change    a run killed on four hosts resumes on two, one killed on two resumes on four: same
                  data order and global batch, so each ends as the uninterrupted run (no dropout: to
                  float tolerance)
  disk-full       the output folder is a file system too small for a checkpoint: rank 0 names
                  the file and the full disk, every rank stops, nothing complete is lost
  rank0-output    only rank 0's host sees the output folder: the run trains, and a killed run
                  resumes bit for bit (rank 0 sends the checkpoint to the others)
  data-unreadable one host cannot read the token data: the job stops at the start, naming the
                  rank, its host and the folder

Exit 0 when the case holds, 1 when not, 77 (skipped) when the test bed cannot be made here (not
root, no iproute2 or namespaces) or mpirun is missing.

  multinode.py --qkvlab PATH --workdir DIR --case NAME
"""
import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "fault"))
sys.path.insert(0, str(HERE.parent / "dist"))
from kill_resume import outcome, write_inputs  # noqa: E402
import data_parallel  # noqa: E402

NETBED = HERE / "netbed.sh"
AGENT = HERE / "netbed-rsh"
TIMEOUT = 10  # --dist-timeout of every job
# mpirun and its daemons notice a host that stopped answering in about 11 s instead of TCP's
# default of over 8 minutes (docs/DATA_PARALLEL.md).
KEEPALIVE = ["--mca", "oob_tcp_keepalive_time", "5", "--mca", "oob_tcp_keepalive_intvl", "2",
             "--mca", "oob_tcp_keepalive_probes", "3"]
CASES = ["train", "kill-allreduce", "kill-checkpoint", "kill-eval", "link-down", "slow-link", "hosts-change",
         "disk-full", "rank0-output", "data-unreadable"]


class Failure(Exception):
    pass


def expect(cond, what):
    if not cond:
        raise Failure(what)


class Bed:
    """The hosts of one case: their own namespace prefix, so cases may run side by side."""

    def __init__(self, case, work):
        self.prefix = f"qm{CASES.index(case)}"
        self.work = work
        self.env = dict(os.environ, QKV_BED_PREFIX=self.prefix, OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1",
                        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_btl_vader_single_copy_mechanism="none")
        for k in [k for k in self.env if k.startswith("QKV_FAULT_") or k == "QKV_BED_HIDE"]:
            del self.env[k]

    def netbed(self, *args, check=True):
        p = subprocess.run(["bash", str(NETBED), *map(str, args)], env=self.env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        if p.returncode == 77:
            print(f"multinode: skipped ({p.stdout.strip()})")
            sys.exit(77)
        if check and p.returncode != 0:
            raise Failure(f"netbed {' '.join(map(str, args))}: exit {p.returncode}\n{p.stdout}")
        return p

    def __enter__(self):
        self.netbed("up", 4)
        return self

    def __exit__(self, *exc):
        self.netbed("down", check=False)

    def mpirun(self, hosts, qkvlab_args, qkvlab, env=None):
        """The command line of a job of one rank on each of the first `hosts` hosts."""
        hostfile = self.work / f"hosts{hosts}"
        hostfile.write_text("".join(f"10.77.0.{i + 1} slots=1\n" for i in range(hosts)))
        mpirun = ["mpirun", "--hostfile", str(hostfile), "-np", str(hosts), "--mca", "plm_rsh_agent", str(AGENT),
                  "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "10.77.0.0/24",
                  "--mca", "oob_tcp_if_include", "10.77.0.0/24", *KEEPALIVE, str(qkvlab), *map(str, qkvlab_args)]
        full_env = dict(self.env, **(env or {}))
        return ["bash", str(NETBED), "run", "h0", shlex.join(mpirun)], full_env

    def start(self, hosts, args, qkvlab, env=None):
        argv, full_env = self.mpirun(hosts, args, qkvlab, env)
        return subprocess.Popen(argv, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)

    def ranks_alive(self):
        """qkvlab processes still running on any host of the bed."""
        alive = []
        for i in range(4):
            pids = subprocess.run(["ip", "netns", "pids", f"{self.prefix}-h{i}"], stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True).stdout.split()
            for pid in pids:
                try:
                    if Path(f"/proc/{pid}/comm").read_text().strip() == "qkvlab":
                        alive.append((i, pid))
                except OSError:
                    pass
        return alive

    def run(self, hosts, args, qkvlab, env=None, within=120):
        start = time.monotonic()
        p = self.start(hosts, args, qkvlab, env)
        try:
            out, _ = p.communicate(timeout=within + 30)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, 9)
            out, _ = p.communicate()
            raise Failure(f"the job was still running after {within + 30} s (a hang):\n{out}")
        seconds = time.monotonic() - start
        expect(seconds <= within, f"the job took {seconds:.1f} s, more than {within} s:\n{out}")
        return p.returncode, out, seconds


def gpt_config(work, tokens, dropout, steps=12):
    text = data_parallel.GPT.format(tokens=tokens, dropout=dropout).replace("steps: 12,", f"steps: {steps},")
    path = work / f"gpt-d{dropout}-s{steps}.yaml"
    path.write_text(text)
    return path


def checkpoints_complete(run):
    ckpt = run / "checkpoints"
    models = sorted(p for p in ckpt.glob("step_*.safetensors") if ".state." not in p.name) if ckpt.exists() else []
    for m in models:
        expect(m.with_name(m.name.replace(".safetensors", ".state.safetensors")).exists() or m == models[-1],
               f"{m} has no state file and is not the newest (a torn checkpoint kept)")
    leftovers = [p for p in run.rglob("*") if p.is_file() and re.search(r"\.tmp", p.name)]
    return leftovers


class Case:
    def __init__(self, qkvlab, work, bed):
        self.q, self.work, self.bed = qkvlab, work, bed
        tok, text = write_inputs(work)
        self.tokens = work / "tokens"
        subprocess.run([str(qkvlab), "data", "prepare", str(text), "--tokenizer", str(tok), "--out", str(self.tokens)],
                       check=True, stdout=subprocess.DEVNULL)

    def train(self, hosts, out, dropout=0.1, extra=(), env=None, within=120, steps=12, resume=False):
        args = ["run", gpt_config(self.work, self.tokens, dropout, steps), "--out", out, "--dist-timeout", TIMEOUT,
                *(["--resume"] if resume else []), *extra]
        return self.bed.run(hosts, args, self.q, env=env, within=within)

    def run_dir(self, out):
        return Path(out) / "dp" / "Q-K=V" / "seed0"

    def reference(self, hosts=2, dropout=0.1):
        out = self.work / f"reference-{hosts}-{dropout}"
        rc, text, _ = self.train(hosts, out, dropout)
        expect(rc == 0, f"the uninterrupted {hosts}-host run failed:\n{text}")
        return outcome(self.run_dir(out))

    def killed_and_resumed(self, fault, rank, collective, hosts=2, resume_hosts=2, dropout=0.1, hide=False):
        out = self.work / f"killed-{fault.replace(':', '-')}"
        env = {"QKV_FAULT_KILL_AT": fault, "QKV_FAULT_RANK": str(rank)}
        if hide:
            env["QKV_BED_HIDE"] = str(out)
        rc, text, seconds = self.train(hosts, out, dropout, env=env, within=TIMEOUT + 20)
        expect(rc != 0, f"the job with rank {rank} killed at {fault} exited 0:\n{text}")
        expect(re.search(rf"qkvlab: rank \d \(host {self.bed.prefix}-h\d\): .*{collective}", text),
               f"no line names a rank, its host and '{collective}':\n{text}")
        expect(re.search(r"(rank|process) .*(10\.77\.0\.\d|" + self.bed.prefix + r"-h\d)", text, re.S),
               f"nothing names the host of the killed rank:\n{text}")
        leftovers = checkpoints_complete(self.run_dir(out))
        print(f"{fault} on rank {rank}: every rank ended in {seconds:.1f} s; temporary files left: {len(leftovers)}")
        print("  " + "\n  ".join(l for l in text.splitlines() if "qkvlab: rank" in l or "noticed" in l or "node" in l))
        env = {"QKV_BED_HIDE": str(out)} if hide else None
        rc, text, _ = self.train(resume_hosts, out, dropout, env=env, resume=True)
        expect(rc == 0, f"--resume on {resume_hosts} hosts failed:\n{text}")
        return outcome(self.run_dir(out)), text


def close(a, b, path="", rtol=2e-4, atol=2e-5):
    if isinstance(a, dict):
        expect(isinstance(b, dict) and a.keys() == b.keys(), f"{path}: keys differ")
        for k in a:
            close(a[k], b[k], f"{path}.{k}", rtol, atol)
    elif isinstance(a, (list, tuple)):
        expect(isinstance(b, (list, tuple)) and len(a) == len(b), f"{path}: lengths differ")
        for i, (x, y) in enumerate(zip(a, b)):
            close(x, y, f"{path}[{i}]", rtol, atol)
    elif isinstance(a, float) or isinstance(b, float):
        expect(abs(a - b) <= atol + rtol * abs(b), f"{path}: {a} vs {b}")
    elif path.split(".")[-1] not in ("ranks", "world_size", "resumed_from", "dist"):
        expect(a == b, f"{path}: {a!r} vs {b!r}")


def unhidden_seconds(text):
    m = re.findall(r"all-reduce time not hidden by the backward ([0-9.]+) s", text)
    expect(m, f"no all-reduce line in the log:\n{text}")
    return float(m[-1])


def run_case(name, c):
    if name == "train":
        two = c.reference(2, dropout=0.0)
        one = c.work / "one"
        p = subprocess.run([str(c.q), "run", gpt_config(c.work, c.tokens, 0.0), "--out", one],
                           env=dict(c.bed.env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        expect(p.returncode == 0, f"the one-process run failed:\n{p.stdout}")
        close(two, outcome(c.run_dir(one)))
        print("train: two hosts over TCP train what one process trains")
    elif name in ("kill-allreduce", "kill-checkpoint", "kill-eval"):
        # The survivors name the collective they were in when the launcher stopped them.
        fault, rank, collective = {"kill-allreduce": ("7:all-reduce", 1, "gradient bucket 1 of 5 at step 7"),
                                   "kill-checkpoint": ("12:checkpoint", 0, "the end of the job"),
                                   "kill-eval": ("6:eval", 1, "at step 7")}[name]
        ref = c.reference()
        got, _ = c.killed_and_resumed(fault, rank, collective)
        expect(got == ref, f"the resumed run's metrics differ from the uninterrupted run's")
        print(f"{name}: resumed bit for bit")
    elif name == "link-down":
        out = c.work / "link-down"
        p = c.bed.start(2, ["run", gpt_config(c.work, c.tokens, 0.1, steps=100000), "--out", out,
                            "--dist-timeout", TIMEOUT], c.q)
        metrics = c.run_dir(out) / "metrics.jsonl"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (not metrics.exists() or len(metrics.read_text().splitlines()) < 5):
            time.sleep(0.2)
        expect(metrics.exists(), "the run did not start training within 60 s")
        c.bed.netbed("link", "h1", "down")
        start = time.monotonic()
        while c.bed.ranks_alive() and time.monotonic() - start < TIMEOUT + 30:
            time.sleep(0.2)
        ranks_gone = time.monotonic() - start
        try:
            text, _ = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, 9)
            text, _ = p.communicate()
            raise Failure(f"mpirun hung after the link went down:\n{text}")
        seconds = time.monotonic() - start
        expect(ranks_gone <= TIMEOUT + 10, f"ranks were still running {ranks_gone:.1f} s after the link went down")
        expect(p.returncode != 0, f"the job exited 0 after its link went down:\n{text}")
        expect(re.search(rf"qkvlab: rank \d \(host {c.bed.prefix}-h\d\): .*did not finish within {TIMEOUT} s", text),
               f"no rank says which collective timed out:\n{text}")
        print(f"link-down: every rank ended {ranks_gone:.1f} s and mpirun {seconds:.1f} s after rank 1's link went "
              f"down (--dist-timeout {TIMEOUT})")
        print("  " + "\n  ".join(l for l in text.splitlines() if "qkvlab: rank" in l))
    elif name == "slow-link":
        fast = c.train(2, c.work / "fast")
        c.bed.netbed("rate", "h1", "2mbit")
        slow = c.train(2, c.work / "slow", within=300)
        expect(fast[0] == 0 and slow[0] == 0, f"a run failed:\n{fast[1]}\n{slow[1]}")
        f, s = unhidden_seconds(fast[1]), unhidden_seconds(slow[1])
        expect(s > f, f"the rate-limited link hid as much all-reduce time ({s} s) as the fast one ({f} s)")
        print(f"slow-link: all-reduce time not hidden by the backward {f:.3f} s on the bridge, {s:.3f} s at 2 Mbit/s")
    elif name == "hosts-change":
        ref = c.reference(2, dropout=0.0)
        got, text = c.killed_and_resumed("7:all-reduce", 3, "gradient bucket", hosts=4, resume_hosts=2, dropout=0.0)
        close(got, ref)
        got, text = c.killed_and_resumed("9:all-reduce", 1, "gradient bucket", hosts=2, resume_hosts=4, dropout=0.0)
        close(got, ref)
        print("hosts-change: killed on four hosts and resumed on two, and the other way round: each ends as the "
              "uninterrupted run")
    elif name == "disk-full":
        out = c.work / "small-disk"
        out.mkdir(exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=160k", "qkvbed-small", str(out)], check=True)
        try:
            rc, text, _ = c.train(2, out, within=TIMEOUT + 30)
            expect(rc != 0, f"the run on a full disk exited 0:\n{text}")
            expect(re.search(rf"qkvlab: rank 0 \(host {c.bed.prefix}-h0\): error: .*step_\d+\..*(disk full|No space)", text),
                   f"rank 0 does not name the checkpoint file and the full disk:\n{text}")
            expect(re.search(rf"qkvlab: rank 1 \(host {c.bed.prefix}-h1\): ", text), f"rank 1 says nothing:\n{text}")
            leftovers = checkpoints_complete(c.run_dir(out))
            expect(not leftovers, f"temporary files left on the full disk: {leftovers}")
            expect((c.run_dir(out) / "metrics.jsonl").exists(), "metrics.jsonl is gone")
        finally:
            subprocess.run(["umount", str(out)])
        print("disk-full: rank 0 named the file and the full disk, every rank stopped, no torn file")
    elif name == "rank0-output":
        ref = c.reference()
        got, text = c.killed_and_resumed("7:all-reduce", 1, "gradient bucket", hide=True)
        expect(got == ref, "the resumed run's metrics differ from the uninterrupted run's")
        expect("rank 0 sent the checkpoint to 1 rank(s)" in text, f"the checkpoint was not sent to rank 1:\n{text}")
        print("rank0-output: only h0 saw the output folder; killed and resumed bit for bit")
    elif name == "data-unreadable":
        rc, text, _ = c.train(2, c.work / "unreadable", env={"QKV_BED_HIDE": str(c.tokens)}, within=TIMEOUT + 30)
        expect(rc != 0, f"the run with unreadable data on h1 exited 0:\n{text}")
        expect(re.search(rf"qkvlab: rank 1 \(host {c.bed.prefix}-h1\): error: .*{re.escape(str(c.tokens))}", text),
               f"no error names rank 1, its host and the token folder:\n{text}")
        expect(not list((c.work / "unreadable").rglob("metrics.jsonl")), "it trained")
        print("  " + "\n  ".join(l for l in text.splitlines() if "qkvlab: rank" in l))
        print("data-unreadable: stopped at the start, naming rank 1 on its host and the folder")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--qkvlab", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--case", required=True, choices=CASES)
    a = ap.parse_args()
    if not shutil.which("mpirun"):
        print("multinode: skipped (mpirun not found; Debian: openmpi-bin)")
        return 77
    work = Path(a.workdir).resolve() / a.case
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        with Bed(a.case, work) as bed:
            run_case(a.case, Case(Path(a.qkvlab).resolve(), work, bed))
    except (Failure, subprocess.CalledProcessError) as e:
        print(f"multinode {a.case}: FAILED: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
