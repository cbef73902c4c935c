#!/usr/bin/env python3
"""Runs a command under mpirun and checks how the job ended: its exit status, lines its output
must and must not hold, and how long it took. For the data-parallel tests (tests/CMakeLists.txt):
a rank that dies or stalls must end the job with a line naming the collective, in bounded time.

  run_mpi.py --mpirun /usr/bin/mpirun --np 2 --exit nonzero --within 30 \
      --expect 'rank 0: stopped by the launcher while in fault loop' -- dist_collectives --fault kill
"""
import argparse
import re
import subprocess
import sys
import time


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mpirun", required=True)
    p.add_argument("--np", type=int, default=2)
    p.add_argument("--exit", choices=["zero", "nonzero"], default="zero", help="the job's exit status")
    p.add_argument("--expect", action="append", default=[], help="a regex the output must match")
    p.add_argument("--reject", action="append", default=[], help="a regex the output must not match")
    p.add_argument("--within", type=float, default=60, help="seconds the job may take")
    p.add_argument("command", nargs=argparse.REMAINDER)
    a = p.parse_args()
    command = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not command:
        p.error("no command after --")

    argv = [a.mpirun, "--oversubscribe", "-np", str(a.np)] + command
    print("run_mpi:", " ".join(argv), flush=True)
    start = time.monotonic()
    try:
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
                              timeout=a.within + 30)
        output, status = done.stdout, done.returncode
    except subprocess.TimeoutExpired as e:
        output = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        status = None
    seconds = time.monotonic() - start
    print(output, end="" if output.endswith("\n") else "\n")
    print(f"run_mpi: exit status {status} after {seconds:.1f} s")

    problems = []
    if status is None:
        problems.append(f"the job was still running after {a.within + 30:.0f} s (a hang)")
    elif (status == 0) != (a.exit == "zero"):
        problems.append(f"expected a {a.exit} exit status, got {status}")
    if seconds > a.within:
        problems.append(f"the job took {seconds:.1f} s, more than the {a.within:g} s allowed")
    for rx in a.expect:
        if not re.search(rx, output, re.MULTILINE):
            problems.append(f"no line matches: {rx}")
    for rx in a.reject:
        if re.search(rx, output, re.MULTILINE):
            problems.append(f"a line matches what must not appear: {rx}")
    for problem in problems:
        print("run_mpi: FAIL:", problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
