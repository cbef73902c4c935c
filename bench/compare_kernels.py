#!/usr/bin/env python3
"""Prints bench_kernels' JSON (qkvlab) beside torch_kernels.py's (PyTorch) as a markdown table:
each measurement, both values, and qkvlab's speed relative to PyTorch's (> 1: qkvlab is faster;
for rates ours / theirs, for times theirs / ours). Attention rows show ms and GFLOP/s together.
Then, where the files hold them, attention per case and pass beside PyTorch's SDPA backends:
qkvlab's default kernels (Hopper where the device runs them), its mma.sync kernels
(attention.<case>@mma), SDPA forced to cuDNN and to flash (attention.<case>@cudnn, @flash) and
SDPA's own choice, with qkvlab's speed over cuDNN's and flash's (their ms over ours).

  compare_kernels.py QKVLAB.json TORCH.json

Standard library only. A missing or unreadable file leaves its column empty (with a note);
the exit status is 1 only when neither file can be read.
"""
import json
import sys

UNITS = {"gflops": "GF/s", "gbps": "GB/s", "ms": "ms"}


def load(path):
    try:
        with open(path) as f:
            return json.load(f), None
    except (OSError, ValueError) as e:
        return {}, f"{path}: {e}"


def unit_of(key):
    return UNITS.get(key.rsplit("_", 1)[-1].rsplit(".", 1)[-1], "")


def fmt(v):
    if v is None:
        return "-"
    return f"{v:.3f}" if abs(v) < 10 else f"{v:.1f}" if abs(v) < 1000 else f"{v:,.0f}"


def cell(res, key):
    """The value of `key` (with its GFLOP/s beside an attention time)."""
    v = res.get(key)
    if v is None:
        return "-"
    if key.endswith("_ms"):
        gf = res.get(key[: -len("_ms")] + "_gflops")
        return f"{fmt(v)} ms" + (f" ({fmt(gf)} GF/s)" if gf is not None else "")
    return f"{fmt(v)} {unit_of(key)}"


def ratio(a, b, key):
    if a is None or b is None or a <= 0 or b <= 0:
        return "-"
    return f"{(b / a if key.endswith('_ms') else a / b):.2f}x"


def label(key):
    parts = key.split(".")
    if parts[0] == "attention" and len(parts) == 3:
        return f"attention {parts[1]} {'fwd+bwd' if parts[2].startswith('fwdbwd') else 'fwd'}"
    if parts[0] == "matmul" and len(parts) == 3:
        return f"matmul {parts[1]}" + (" (Eigen)" if parts[2].startswith("eigen") else "")
    if parts[0] == "gemm" and len(parts) == 3:
        return f"gemm {parts[1]} (300M GPT)"
    if parts[0] == "bandwidth" and len(parts) == 3:
        return f"bandwidth {parts[1]}"
    return key


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: compare_kernels.py QKVLAB.json TORCH.json")
    (a, err_a), (b, err_b) = load(sys.argv[1]), load(sys.argv[2])
    for err in (err_a, err_b):
        if err:
            print(f"note: cannot read {err}")
    if err_a and err_b:
        return 1
    ra, rb = a.get("results", {}), b.get("results", {})
    name_a, name_b = a.get("implementation", "qkvlab"), b.get("implementation", "PyTorch")
    dev_b = b.get("device_name") or b.get("device", "?")
    print(f"kernel benchmarks on {a.get('device', b.get('device', '?'))} ({dev_b}): {name_a} vs {name_b}")
    if b.get("attention_impl"):
        print(f"PyTorch attention: {b['attention_impl']}")
    if b.get("sdpa_backends"):
        print("SDPA backends (fwd/bwd): " + ", ".join(f"{k} {v}" for k, v in b["sdpa_backends"].items()))
    if a.get("dtype") or b.get("dtype"):
        print(f"dtype of matmul, gemm and attention: {a.get('dtype', '?')} vs {b.get('dtype', '?')}")
    for what in ("device", "elements", "batch_div", "reps"):
        if what in a and what in b and a[what] != b[what]:
            print(f"warning: {what} differs: {a[what]} vs {b[what]}")
    sa, sb = a.get("attention_shapes", {}), b.get("attention_shapes", {})
    for case in sa:
        if case in sb and sa[case] != sb[case]:
            print(f"warning: attention {case}: shape {sa[case]} vs {sb[case]}")
    print()
    keys = list(ra) + [k for k in rb if k not in ra]
    keys = [k for k in keys if not (k.startswith("attention.") and k.endswith("_gflops"))]  # shown with the ms
    keys = [k for k in keys if "@" not in k]  # the kernel paths and forced backends: the table below
    print(f"| measurement | {name_a} | {name_b} | {name_a} speed / {name_b} |")
    print("|---|---:|---:|---:|")
    for k in keys:
        print(f"| {label(k)} | {cell(ra, k)} | {cell(rb, k)} | {ratio(ra.get(k), rb.get(k), k)} |")
    attention_table(a, b)
    return 0


def ms_cell(res, key):
    v = res.get(key)
    return "-" if v is None else fmt(v)


def attention_table(a, b):
    """Each attention case and pass: qkvlab's paths beside SDPA's backends, and the speed ratios."""
    ra, rb = a.get("results", {}), b.get("results", {})
    if not any("@" in k for k in list(ra) + list(rb)):
        return
    kernels = a.get("attention_kernels", {})
    shapes = dict(b.get("attention_shapes", {}), **a.get("attention_shapes", {}))
    print("\nattention beside PyTorch's SDPA backends (ms; a ratio is qkvlab's speed over the backend's: its ms "
          "over ours, > 1 when qkvlab is faster)\n")
    print("| case | shape | pass | qkvlab default (kernels) | qkvlab mma.sync | SDPA cuDNN | SDPA flash | SDPA default "
          "| default / cuDNN | mma.sync / cuDNN | default / flash |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for case, shape in shapes.items():
        for pas, name in (("fwd", "fwd"), ("fwdbwd", "fwd+bwd")):
            mine, mma = f"attention.{case}.{pas}_ms", f"attention.{case}@mma.{pas}_ms"
            cudnn, flash = f"attention.{case}@cudnn.{pas}_ms", f"attention.{case}@flash.{pas}_ms"
            default = f"attention.{case}.{pas}_ms"
            path = kernels.get(case, "?")
            print(f"| {case} | {shape} | {name} | {ms_cell(ra, mine)} ({path}) | {ms_cell(ra, mma)} | "
                  f"{ms_cell(rb, cudnn)} | {ms_cell(rb, flash)} | {ms_cell(rb, default)} | "
                  f"{ratio(ra.get(mine), rb.get(cudnn), mine)} | {ratio(ra.get(mma), rb.get(cudnn), mma)} | "
                  f"{ratio(ra.get(mine), rb.get(flash), mine)} |")
    for label_, why in b.get("sdpa_not_run", {}).items():
        print(f"\nSDPA {label_} did not run: {why}")
    bad = {k: v for k, v in b.get("checks", {}).items() if not v <= 2e-2}
    if bad:
        print("\nPyTorch rows whose sampled block is off float32 by more than 2e-2: " +
              ", ".join(f"{k} {v:.1e}" for k, v in bad.items()))

    summary = []
    for what, key, other in (("default", "", "cudnn"), ("mma.sync", "@mma", "cudnn")):
        for pas in ("fwd", "fwdbwd"):
            r = [rb[f"attention.{c}@{other}.{pas}_ms"] / ra[f"attention.{c}{key}.{pas}_ms"] for c in shapes
                 if ra.get(f"attention.{c}{key}.{pas}_ms") and rb.get(f"attention.{c}@{other}.{pas}_ms")]
            if r:
                summary.append(f"{what} {pas} {min(r):.2f}-{max(r):.2f}x")
    if summary:  # last: the GPU check's summary shows a step's last line
        print("\nqkvlab's attention speed over cuDNN's: " + ", ".join(summary))


if __name__ == "__main__":
    sys.exit(main())
