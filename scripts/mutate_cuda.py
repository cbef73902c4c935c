#!/usr/bin/env python3
"""The driver of scripts/mutate-cuda.sh (see there)."""
import argparse
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCRATCH = ROOT / "build" / "mutate" / "src"
BUILD = SCRATCH / "build" / "ci-emu"
# The tests that launch CUDA kernels on the emulated device; the rest of the selection runs after.
KERNEL_TESTS = r"^(harness|gpu|emulator|unit: ?flash)"


def parse(path):
    """[(name, file, before, after)] from the mutation list."""
    mutations, lines, i = [], path.read_text().splitlines(), 0
    while i < len(lines):
        if not lines[i].startswith("## "):
            i += 1
            continue
        name, file = lines[i][3:].strip(), lines[i + 1].strip()
        assert lines[i + 2] == "<<<", f"{path}: '{name}': expected <<< after the file"
        j = lines.index("===", i + 3)
        k = lines.index(">>>", j + 1)
        mutations.append((name, file, "\n".join(lines[i + 3:j]) + "\n", "\n".join(lines[j + 1:k]) + "\n"))
        i = k + 1
    return mutations


def copy_tree():
    """The working tree (tracked and untracked, not ignored) into SCRATCH, leaving its build."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, check=True).stdout.decode().split("\0")
    for f in filter(None, files):
        src, dst = ROOT / f, SCRATCH / f
        if not src.is_file():
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        if not dst.exists() or dst.read_bytes() != src.read_bytes():
            shutil.copy(src, dst)  # a fresh mtime: the build must see the change
    shared = ROOT.parent / "shared"
    link = SCRATCH.parent / "shared"
    if shared.exists() and not link.exists():
        link.symlink_to(shared)


def run(cmd, **kw):
    return subprocess.run(cmd, cwd=SCRATCH, **kw)


def build():
    return run(["cmake", "--build", str(BUILD)], capture_output=True, text=True)


def first_failure(extra):
    """The first failing test of `ctest --preset ci-emu` with `extra` options, or None."""
    env = dict(os.environ, QKV_EMU_COVERAGE="")
    r = run(["ctest", "--preset", "ci-emu", "--parallel", str(os.cpu_count() or 2), "--stop-on-failure", *extra],
            capture_output=True, text=True, env=env)
    if r.returncode == 0:
        return None
    m = re.search(r"Test +#\d+: (.*?) \.+\**(Failed|Exception|Timeout|SEGFAULT|Child aborted|Subprocess aborted)",
                  r.stdout)
    return m.group(1).strip() if m else "ctest failed (see its output)"


def main():
    parser = argparse.ArgumentParser(description="the mutation exercise on the CUDA kernels")
    parser.add_argument("--only", help="run only the mutation whose name contains this")
    parser.add_argument("--list", action="store_true", help="list the mutations and stop")
    args = parser.parse_args()
    mutations = parse(ROOT / "scripts" / "cuda-mutations.txt")
    if args.only:
        mutations = [m for m in mutations if args.only in m[0]]
    if args.list:
        for name, file, _, _ in mutations:
            print(f"{name}  ({file})")
        return 0
    for name, file, before, _ in mutations:  # every mutation still applies to the tree as it is
        if (ROOT / file).read_text().count(before) != 1:
            print(f"mutate-cuda: '{name}' no longer applies: its text is not exactly once in {file}")
            return 1
    copy_tree()
    configure = ["cmake", "--preset", "ci-emu"]
    if shutil.which("ccache"):
        configure += ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"]
    run(configure, check=True, capture_output=True)
    print("mutate-cuda: building the scratch copy (build/mutate/src) ...", flush=True)
    if build().returncode != 0:
        print("mutate-cuda: the unmutated scratch copy does not build")
        return 1
    results = []
    for name, file, before, after in mutations:
        path = SCRATCH / file
        original = path.read_text()
        path.write_text(original.replace(before, after, 1))
        start = time.time()
        try:
            built = build()
            if built.returncode != 0:
                caught = "the build (it does not compile)"
            else:
                caught = first_failure(["-R", KERNEL_TESTS]) or first_failure(["-E", KERNEL_TESTS])
        finally:
            path.write_text(original)
        results.append((name, caught))
        print(f"  {'caught' if caught else 'MISSED'}  {name}" + (f"  <- {caught}" if caught else "") +
              f"  ({time.time() - start:.0f} s)", flush=True)
    build()  # the scratch copy as it was
    missed = [n for n, c in results if not c]
    print(f"mutate-cuda: {len(results) - len(missed)} caught, {len(missed)} missed of {len(results)}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
