#!/usr/bin/env python3
"""PyTorch's side of bench/bench_kernels.cpp: the same kernel measurements on the same device, with
the same shapes, FLOP counts, timing scheme and JSON keys, so bench/compare_kernels.py can print
the two side by side.

  --dtype    float32 (default) or bfloat16: the dtype of matmul, gemm and attention (bandwidth
             stays float32). bfloat16 is what autocast gives those ops: torch.mm on the tensor
             cores with float32 accumulation, SDPA's flash backend.
  matmul     square n x n torch.mm; in float32 with TF32 off (torch.backends.cuda.matmul.allow_tf32 =
             False, cudnn too, float32 matmul precision "highest"): full-precision float32 GEMMs,
             the arithmetic of qkvlab's cuBLASLt COMPUTE_32F path. GFLOP/s at 2 n^3 FLOPs.
  gemm       the paper's 300M GPT's GEMMs, x [M, K] @ W[N, K]^T (bench_kernels' table); default on
             CUDA only (--gemm).
  bandwidth  float32 [elements / 1024, 1024]: dst.copy_(x), x + y, F.gelu (erf), torch.softmax
             over the last dim, F.layer_norm over the last dim; GB/s of bytes read + written.
  attention  F.scaled_dot_product_attention in --dtype, forward (under no_grad) and forward +
             backward (out.backward(dO), gradients dropped after each run), at GPT-2 small, the
             paper's 300M GPT, a ViT/encoder shape, K=V (k and v one tensor) and GQA-4 ("all"),
             and FlashAttention's benchmark shapes ("flash": causal, 16k tokens a batch, d_model
             2048, sequence 2048 and 4096, head dims 64 and 128). --sdpa-backends default,cudnn,flash
             times each case again with SDPA forced to each backend (torch.nn.attention.sdpa_kernel;
             keys attention.<case>@<backend>), a backend that cannot take a case noted, not fatal;
             every row's output first checked on a sampled block (the last batch row's last head,
             its last 64 queries) against float32 arithmetic on the same device. is_causal
             masks top-left, which is qkvlab's bottom-right alignment when T == S (all cases here).
             GQA: k and v repeated per query head with repeat_interleave inside the timed call
             (--gqa repeat, the default: in float32 SDPA's enable_gqa routes to the math backend),
             or enable_gqa=True (--gqa enable, PyTorch >= 2.5). PyTorch without SDPA (< 2.0, e.g.
             Debian's 1.13) runs the explicit softmax(scale q k^T + mask) v instead, and says so.
             FLOPs: forward 4 B H T S D (two GEMMs of B H T S D multiply-adds), halved when causal;
             backward 2.5 x the forward.
Timing: every function runs once to warm up, then the functions of a group run alternately,
`reps` times, each call timed by the wall clock around the call plus a device synchronize; the
best time is reported (bench_kernels' scheme exactly).

  torch_kernels.py [--device cpu|cuda:0] [--dtype float32|bfloat16] [--gemm all|none]
                   [--sizes 256,512,...] [--elements N] [--reps R]
                   [--attention all,flash|none|case,...] [--sdpa-backends default,cudnn,flash]
                   [--batch-div K] [--gqa repeat|enable]
                   [--threads N] [--json FILE]
Exit 77 when PyTorch is not installed.
"""
import argparse
import contextlib
import json
import math
import os
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("torch_kernels.py: PyTorch is not installed", file=sys.stderr)
    sys.exit(77)

# name, B, H, Hk, T, S, D, causal, k=v: the table of bench_kernels.cpp's attention_cases().
CASES = [
    ("gpt2_small", 8, 12, 12, 1024, 1024, 64, True, False),
    ("gpt_300m", 6, 16, 16, 2048, 2048, 64, True, False),
    ("vit", 128, 4, 4, 64, 64, 16, False, False),
    ("gpt2_kv_shared", 8, 12, 12, 1024, 1024, 64, True, True),
    ("gpt2_gqa4", 8, 12, 3, 1024, 1024, 64, True, False),
]
# bench/attention_bench.cpp's flash_cases(): FlashAttention's benchmark shapes.
FLASH_CASES = [
    ("flash_t2048_d64", 8, 32, 32, 2048, 2048, 64, True, False),
    ("flash_t2048_d128", 8, 16, 16, 2048, 2048, 128, True, False),
    ("flash_t4096_d64", 4, 32, 32, 4096, 4096, 64, True, False),
    ("flash_t4096_d128", 4, 16, 16, 4096, 4096, 128, True, False),
]
# bench/attention_bench.cpp's small_cases(): shapes an emulated device runs in seconds.
SMALL_CASES = [
    ("small_gqa", 2, 4, 2, 80, 80, 64, True, False),
    ("small_kv", 1, 2, 2, 72, 72, 128, True, True),
]
FORCED = {"cudnn": "CUDNN_ATTENTION", "flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION", "math": "MATH"}
# name, M, K, N: bench_kernels.cpp's kGemmCases (the 300M GPT: 6 x 2048 tokens, d 1024).
GEMMS = [("qkv", 12288, 1024, 3072), ("proj", 12288, 1024, 1024), ("fc", 12288, 1024, 4096),
         ("fc_proj", 12288, 4096, 1024), ("lm_head", 12288, 1024, 50304)]
BACKENDS = {0: "math", 1: "flash", 2: "efficient", 3: "cudnn", 4: "overrideable"}


def torch_version():
    parts = []
    for p in torch.__version__.split("+")[0].split(".")[:2]:
        digits = "".join(ch for ch in p if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


HAVE_SDPA = hasattr(F, "scaled_dot_product_attention")
HAVE_ENABLE_GQA = HAVE_SDPA and torch_version() >= (2, 5)


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def best_seconds(fns, reps, dev):
    """Best of `reps` timings of each function, run alternately after one warm-up call each."""
    for f in fns:
        f()
    sync(dev)
    best = [math.inf] * len(fns)
    for _ in range(reps):
        for i, f in enumerate(fns):
            t0 = time.perf_counter()
            f()
            sync(dev)
            best[i] = min(best[i], time.perf_counter() - t0)
    return best


def reps_for(flops, reps, dev):
    budget = 2e9 if dev.type == "cpu" else 2e12
    return max(2, int(reps * min(1.0, budget / flops)))


def bench_matmul(sizes, reps, dev, dtype, res):
    print(f"\nmatmul ({dtype}, square, TF32 off, best of {reps})")
    print(f"{'n':>8} {'torch GF/s':>14}")
    g = torch.Generator(device=dev)
    for n in sizes:
        g.manual_seed(n)
        a = torch.randn(n, n, device=dev, generator=g).to(dtype)
        b = torch.randn(n, n, device=dev, generator=g).to(dtype)
        flops = 2.0 * n * n * n
        t = best_seconds([lambda: torch.mm(a, b)], reps_for(flops, reps, dev), dev)
        print(f"{n:>8} {flops / t[0] / 1e9:>14.1f}")
        res[f"matmul.{n}.gflops"] = flops / t[0] / 1e9


def bench_gemm(reps, dev, dtype, res):
    print(f"\ngemm ({dtype}, the 300M GPT's shapes, x W^T, best of {reps})")
    print(f"{'gemm':>10} {'M x K x N':>24} {'torch GF/s':>14}")
    g = torch.Generator(device=dev)
    for name, M, K, N in GEMMS:
        g.manual_seed(N)
        x = torch.randn(M, K, device=dev, generator=g).to(dtype)
        w = torch.randn(N, K, device=dev, generator=g).to(dtype)
        flops = 2.0 * M * K * N
        t = best_seconds([lambda: torch.mm(x, w.t())], reps_for(flops, reps, dev), dev)
        print(f"{name:>10} {f'{M} x {K} x {N}':>24} {flops / t[0] / 1e9:>14.1f}")
        res[f"gemm.{name}.gflops"] = flops / t[0] / 1e9


def bench_bandwidth(n, reps, dev, res):
    cols = 1024
    rows = n // cols
    g = torch.Generator(device=dev)
    g.manual_seed(7)
    x = torch.randn(rows, cols, device=dev, generator=g)
    y = torch.randn(rows, cols, device=dev, generator=g)
    w = torch.ones(cols, device=dev)
    bias = torch.zeros(cols, device=dev)
    dst = torch.empty_like(x)
    nbytes = rows * cols * 4.0
    cases = [
        ("copy", 2 * nbytes, lambda: dst.copy_(x)),
        ("add", 3 * nbytes, lambda: x + y),
        ("gelu", 2 * nbytes, lambda: F.gelu(x)),
        ("softmax", 2 * nbytes, lambda: torch.softmax(x, -1)),
        ("layer_norm", 2 * nbytes, lambda: F.layer_norm(x, (cols,), w, bias, 1e-5)),
    ]
    t = best_seconds([c[2] for c in cases], reps, dev)
    copy_bw = cases[0][1] / t[0]
    print(f"\nbandwidth (float32 [{rows}, {cols}], {nbytes / 2**20:.0f} MiB per tensor, best of {reps})")
    print(f"{'kernel':>12} {'GB/s':>10} {'of copy':>14}")
    for (name, moved, _), ti in zip(cases, t):
        bw = moved / ti
        print(f"{name:>12} {bw / 1e9:>10.1f} {100 * bw / copy_bw:>13.1f}%")
        res[f"bandwidth.{name}.gbps"] = bw / 1e9


def shape_str(B, H, Hk, T, S, D, causal, kv_shared):
    return f"B{B} H{H} Hk{Hk} T{T} S{S} D{D}" + (" causal" if causal else "") + (" k=v" if kv_shared else "")


def make_attention(H, Hk, T, S, D, causal, gqa, dev):
    """fn(q, k, v) -> out: SDPA (or the explicit formulation without it) with qkvlab's semantics."""
    group = H // Hk
    if HAVE_SDPA:
        if group > 1 and gqa == "enable":
            return lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
        if group > 1:
            return lambda q, k, v: F.scaled_dot_product_attention(
                q, k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1), is_causal=causal)
        return lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    scale = 1.0 / math.sqrt(D)
    # Bottom-right causal: query i sees key j <= i + S - T.
    mask = torch.ones(T, S, dtype=torch.bool, device=dev).triu(S - T + 1) if causal else None

    def explicit(q, k, v):
        if group > 1:
            k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        s = torch.matmul(q, k.transpose(-2, -1)) * scale
        if mask is not None:
            s = s.masked_fill(mask, float("-inf"))
        return torch.matmul(torch.softmax(s, -1), v)

    return explicit


def sdpa_backend(q, k, v, causal, gqa, group):
    """The backend SDPA picks for these inputs (private torch._fused_sdp_choice), or '?'."""
    if not HAVE_SDPA or not hasattr(torch, "_fused_sdp_choice"):
        return "?"
    try:
        if group > 1 and gqa != "enable":
            k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        kw = {"is_causal": causal}
        if group > 1 and gqa == "enable":
            kw["enable_gqa"] = True
        return BACKENDS.get(int(torch._fused_sdp_choice(q, k, v, **kw)), "?")
    except Exception:  # a private API: any failure just leaves the backend unknown
        return "?"


def forced_backend(name):
    """A context forcing SDPA's backend `name` (cudnn, flash, ...), or (None, why not)."""
    if name == "default":
        return contextlib.nullcontext, ""
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:
        return None, f"PyTorch {torch.__version__} has no torch.nn.attention.sdpa_kernel"
    if not hasattr(SDPBackend, FORCED[name]):
        return None, f"PyTorch {torch.__version__} has no {FORCED[name]} backend"
    return (lambda: sdpa_kernel(getattr(SDPBackend, FORCED[name]))), ""


def sampled_error(attn, q, k, v, causal):
    """||out - ref|| / ||ref|| on the last batch row's last head, its last 64 queries: `attn`'s
    output against float32 softmax(scale q k^T + mask) v on the same device."""
    T, S, D = q.shape[2], k.shape[2], q.shape[3]
    rows = min(64, T)
    with torch.no_grad():
        out = attn(q, k, v)[-1, -1, T - rows:].float()
        qs = q[-1, -1, T - rows:].float()
        ks, vs = k[-1, k.shape[1] - 1].float(), v[-1, v.shape[1] - 1].float()  # the last head's KV head
        s = qs @ ks.t() / math.sqrt(D)
        if causal:  # bottom-right: query i (of T) sees key j <= i + S - T
            i = torch.arange(T - rows, T, device=q.device)[:, None]
            s = s.masked_fill(torch.arange(S, device=q.device)[None, :] > i + S - T, float("-inf"))
        ref = torch.softmax(s, -1) @ vs
        return float((out - ref).norm() / ref.norm().clamp_min(1e-30))


def bench_attention(cases, reps, dev, dtype, gqa, backends_wanted, res, shapes, backends, notes, checks):
    if not cases:
        return
    print(f"\nattention ({dtype}, forward and forward+backward, best of up to {reps}"
          "; each output first checked on a sampled block against float32)")
    print(f"{'case':>16} {'SDPA':>8} {'shape':>36} {'fwd ms':>10} {'fwd GF/s':>10} {'fwd+bwd ms':>12} "
          f"{'fwd+bwd GF/s':>12}" + ("  SDPA backend fwd/bwd" if HAVE_SDPA and dev.type == "cuda" else ""))
    g = torch.Generator(device=dev)
    for name, B, H, Hk, T, S, D, causal, kv_shared in cases:
        g.manual_seed(11)
        q = torch.randn(B, H, T, D, device=dev, generator=g).to(dtype)
        k = torch.randn(B, Hk, S, D, device=dev, generator=g).to(dtype)
        v = k if kv_shared else torch.randn(B, Hk, S, D, device=dev, generator=g).to(dtype)
        dout = torch.randn(B, H, T, D, device=dev, generator=g).to(dtype)
        q.requires_grad_()
        k.requires_grad_()
        if not kv_shared:
            v.requires_grad_()
        attn = make_attention(H, Hk, T, S, D, causal, gqa, dev)
        shape = shape_str(B, H, Hk, T, S, D, causal, kv_shared)
        shapes[name] = shape

        def fwd():
            with torch.no_grad():
                attn(q, k, v)

        def fwdbwd():
            attn(q, k, v).backward(dout)
            q.grad = k.grad = v.grad = None

        flops = 4.0 * B * H * T * S * D / (2 if causal else 1)
        for backend in backends_wanted:
            context, why = forced_backend(backend) if HAVE_SDPA or backend == "default" else \
                (None, f"PyTorch {torch.__version__} has no scaled_dot_product_attention")
            label = f"{name}@{backend}" if backend != "default" else name
            if context is None:
                notes[label] = why
                print(f"{name:>16} {backend:>8}  not run: {why}")
                continue
            try:
                with context():
                    checks[label] = sampled_error(attn, q, k, v, causal)
                    t = best_seconds([fwd, fwdbwd], reps_for(3.5 * flops, reps, dev), dev)
            except RuntimeError as e:  # the forced backend cannot take this case
                notes[label] = (str(e).strip().splitlines() or [""])[0][:160]
                q.grad = k.grad = v.grad = None
                print(f"{name:>16} {backend:>8}  not run: {notes[label]}")
                continue
            fwd_gf, fb_gf = flops / t[0] / 1e9, 3.5 * flops / t[1] / 1e9
            line = (f"{name:>16} {backend:>8} {shape:>36} {1e3 * t[0]:>10.3f} {fwd_gf:>10.1f} {1e3 * t[1]:>12.3f} "
                    f"{fb_gf:>12.1f}")
            if HAVE_SDPA and backend == "default":
                with torch.no_grad():
                    bf = sdpa_backend(q.detach(), k.detach(), v.detach(), causal, gqa, H // Hk)
                bb = sdpa_backend(q, k, v, causal, gqa, H // Hk)
                backends[name] = f"{bf}/{bb}"
                if dev.type == "cuda":
                    line += f"  {bf}/{bb}"
            if label in checks:
                line += f"  (sampled block vs float32: {checks[label]:.1e})"
            print(line)
            key = f"attention.{label}."
            res[key + "fwd_ms"] = 1e3 * t[0]
            res[key + "fwd_gflops"] = fwd_gf
            res[key + "fwdbwd_ms"] = 1e3 * t[1]
            res[key + "fwdbwd_gflops"] = fb_gf


def select_cases(which, batch_div):
    known = CASES + FLASH_CASES + SMALL_CASES
    groups = {"all": CASES, "flash": FLASH_CASES, "small": SMALL_CASES, "none": []}
    out = []
    for name in which.split(","):
        add = groups[name] if name in groups else [c for c in known if c[0] == name]
        if not add and name != "none":
            sys.exit(f"torch_kernels.py: --attention: no case or group '{name}' "
                     f"(all, flash, small, none, or one of {', '.join(c[0] for c in known)})")
        out += [c for c in add if c[0] not in {o[0] for o in out}]
    return [(c[0], max(1, c[1] // batch_div)) + c[2:] for c in out]


def write_json_atomically(path, obj):
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description="PyTorch's numbers for bench_kernels' measurements")
    ap.add_argument("--device", default="cpu", help="cpu or cuda:N")
    ap.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32",
                    help="dtype of matmul, gemm and attention")
    ap.add_argument("--gemm", choices=["all", "none"], default="",
                    help="the 300M GPT's GEMM shapes (default all on CUDA, none on the CPU)")
    ap.add_argument("--sizes", default="", help="square matmul sizes (default 256,512,1024,2048, and 4096 on CUDA)")
    ap.add_argument("--elements", type=int, default=1 << 24, help="elements per tensor in the bandwidth test")
    ap.add_argument("--reps", type=int, default=10, help="timed repetitions (best is reported)")
    ap.add_argument("--attention", default="all",
                    help="attention cases, comma-separated: all (the models' shapes), flash (FlashAttention's "
                         "benchmark shapes), none, or case names")
    ap.add_argument("--sdpa-backends", default="default",
                    help="SDPA backends each case runs on, comma-separated: default (SDPA's choice), cudnn, flash, "
                         "efficient, math")
    ap.add_argument("--batch-div", type=int, default=0, help="divide the attention batches (default 8 on CPU, 1 on CUDA)")
    ap.add_argument("--gqa", choices=["repeat", "enable"], default="repeat",
                    help="GQA by repeat_interleave of k/v (default) or SDPA's enable_gqa (PyTorch >= 2.5)")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (default: the CPUs this process may use)")
    ap.add_argument("--json", default="", help="also write every number to this JSON file (atomically)")
    a = ap.parse_args()

    dev = torch.device(a.device)
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            sys.exit("torch_kernels.py: this PyTorch has no usable CUDA device")
        torch.cuda.set_device(dev)
        dev_name = torch.cuda.get_device_name(dev)
    else:
        dev_name = "cpu"
    threads = a.threads or (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count())
    torch.set_num_threads(threads)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if hasattr(torch, "set_float32_matmul_precision"):
        torch.set_float32_matmul_precision("highest")
    backends_wanted = a.sdpa_backends.split(",")
    for b in backends_wanted:
        if b != "default" and b not in FORCED:
            sys.exit(f"torch_kernels.py: --sdpa-backends: '{b}' is not default, {', '.join(FORCED)}")
    gqa = a.gqa
    if gqa == "enable" and not HAVE_ENABLE_GQA:
        print(f"note: PyTorch {torch.__version__} has no enable_gqa; GQA uses repeat_interleave")
        gqa = "repeat"
    sizes = [int(s) for s in a.sizes.split(",") if s] or ([256, 512, 1024, 2048] if dev.type == "cpu"
                                                          else [256, 512, 1024, 2048, 4096])
    batch_div = a.batch_div or (8 if dev.type == "cpu" else 1)
    cases = select_cases(a.attention, batch_div)
    if HAVE_SDPA:
        attn_impl = "F.scaled_dot_product_attention, GQA by " + (
            "enable_gqa=True" if gqa == "enable" else "repeat_interleave of k and v")
    else:
        attn_impl = (f"explicit softmax(scale q k^T + mask) v: PyTorch {torch.__version__} has no "
                     "scaled_dot_product_attention; GQA by repeat_interleave")

    dtype = getattr(torch, a.dtype)
    gemm = a.gemm or ("all" if dev.type == "cuda" else "none")
    print(f"PyTorch {torch.__version__} kernel benchmark on {a.device} ({dev_name}), {torch.get_num_threads()} threads, "
          f"{a.dtype}")
    print(f"attention: {attn_impl}")
    res, shapes, backends, notes, checks = {}, {}, {}, {}, {}
    bench_matmul(sizes, a.reps, dev, dtype, res)
    if gemm == "all":
        bench_gemm(a.reps, dev, dtype, res)
    bench_bandwidth(a.elements, a.reps, dev, res)
    bench_attention(cases, a.reps, dev, dtype, gqa, backends_wanted, res, shapes, backends, notes, checks)
    if a.json:
        write_json_atomically(a.json, {
            "implementation": f"PyTorch {torch.__version__}",
            "device": a.device,
            "device_name": dev_name,
            "dtype": a.dtype,
            "threads": torch.get_num_threads(),
            "reps": a.reps,
            "elements": a.elements,
            "batch_div": batch_div,
            "timing": "best of N, wall clock around each call plus a device synchronize",
            "tf32": False,
            "attention_impl": attn_impl,
            "sdpa_backends": backends,  # case -> "forward/backward" backend SDPA picks, when known
            "sdpa_not_run": notes,  # case@backend -> why a forced backend did not run
            "checks": checks,  # case[@backend] -> relative error of the sampled block against float32
            "attention_shapes": shapes,
            "results": res,
        })
        print(f"\nwrote {a.json}")


if __name__ == "__main__":
    main()
