#!/usr/bin/env python3
"""Which CUDA kernels the emulated run reached: scripts/emu-coverage.py COVERAGE_DIR [--require FILE].

Every QKV_LAUNCH site under tensor/ and kernels/ must have launched at least once, and every
requirement of FILE (default scripts/emu-coverage-required.txt) must hold: a kernel (its file, and
the kernel as written at its launch site), with the block regimes (one warp or several per block)
or the instantiations (text of the launching function's name) its dispatch chooses between. The folder holds what the emulator wrote at each process's exit under
QKV_EMU_COVERAGE (cuda_emu/launch.h). Prints what was missed; exits 1 if anything was.
"""
import argparse
import pathlib
import re
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
REGIMES = {"one-warp": 1, "several-warps": 2, "one-block": 4, "several-blocks": 8}


def squeeze(text):
    return re.sub(r"\s+", "", text)


def call_arguments(text, start):
    """The top-level, comma-separated arguments of the call whose '(' ends just before `start`."""
    depth, args, begin = 0, [], start
    for i in range(start, len(text)):
        c = text[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            if depth == 0:
                return args + [text[begin:i]]
            depth -= 1
        elif c == "," and depth == 0:
            args.append(text[begin:i])
            begin = i + 1
    return args


def launch_sites():
    """(file, kernel) of every QKV_LAUNCH(grid, block, shared, stream, kernel) in the sources."""
    sites = set()
    for folder in ("tensor", "kernels"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix not in (".cu", ".cuh", ".cpp", ".h") or path.name == "kernel_launch.h":
                continue
            text = path.read_text()
            for m in re.finditer(r"\bQKV_LAUNCH\(", text):
                args = call_arguments(text, m.end())
                # A kernel's template arguments split at their commas: the kernel is the rest.
                sites.add((str(path.relative_to(ROOT)), squeeze(",".join(args[4:]))))
    return sites


def demangle(names):
    """Type names in words (c++filt -t; libstdc++'s demangler refuses the local names of lambdas)."""
    if not names or not shutil.which("c++filt"):
        return {n: n for n in names}
    out = subprocess.run(["c++filt", "-t"], input="\n".join(names), capture_output=True, text=True).stdout
    return dict(zip(names, out.splitlines()))


def read_runs(folder):
    """{(file, kernel): {instance: regimes}} from every launches.*.txt."""
    seen = {}
    for path in pathlib.Path(folder).glob("launches.*.txt"):
        for line in path.read_text().splitlines():
            parts = line.split("\t")
            if len(parts) != 4:
                continue
            file, kernel, regimes, instance = parts
            rel = str(pathlib.Path(file).resolve().relative_to(ROOT)) if file.startswith("/") else file
            seen.setdefault((rel, squeeze(kernel)), {}).setdefault(instance, 0)
            seen[(rel, squeeze(kernel))][instance] |= int(regimes)
    words = demangle(sorted({inst for insts in seen.values() for inst in insts}))
    return {site: {words.get(i, i): r for i, r in insts.items()} for site, insts in seen.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder")
    parser.add_argument("--require", default=str(ROOT / "scripts" / "emu-coverage-required.txt"))
    args = parser.parse_args()
    seen = read_runs(args.folder)
    if not seen:
        print(f"emu-coverage: no launches recorded in {args.folder} (was QKV_EMU_COVERAGE set?)")
        return 1
    missed = []
    for file, kernel in sorted(launch_sites()):
        if (file, kernel) not in seen:
            missed.append(f"{file}: {kernel} never launched")
    for number, line in enumerate(pathlib.Path(args.require).read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        site, _, wants = line.partition("|")
        file, _, kernel = site.rpartition(": ")
        kernel, wants = squeeze(kernel), [w.strip() for w in wants.split(";") if w.strip()]
        runs = {inst: r for (f, k), insts in seen.items() if k == kernel and f == file.strip()
                for inst, r in insts.items()}
        if not runs:
            missed.append(f"{kernel} never launched ({args.require}:{number})")
            continue
        for want in wants:
            if want in REGIMES:
                if not any(r & REGIMES[want] for r in runs.values()):
                    missed.append(f"{kernel}: never launched with {want} ({args.require}:{number})")
            elif not any(squeeze(want) in squeeze(inst) for inst in runs):
                missed.append(f"{kernel}: no launch of an instance with '{want}' ({args.require}:{number})")
    total = sum(len(v) for v in seen.values())
    if missed:
        print(f"emu-coverage: {len(missed)} kernel paths the emulated run missed:")
        for m in missed:
            print(f"  {m}")
        return 1
    print(f"emu-coverage: every launch site and required path reached ({len(seen)} kernels, {total} instances)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
