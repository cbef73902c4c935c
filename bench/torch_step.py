#!/usr/bin/env python3
"""Times training steps of qkvlab's models rebuilt in PyTorch (tests/parity/torch_models.py), for
the benchmarks that print their peers beside qkvlab. Prints one JSON line: {"ms_per_step": ...}.
With --serve (bench/torch_session.cpp) it prints {"ready": true, ...} once warmed up, then for each
line "N [fp32|bf16]" read from stdin runs N steps and prints {"times_ms": [...]}, until stdin ends.

  torch_step.py encoder --d-model 64 --layers 2 --heads 4 --length 64 --batch 128 --threads 2
  torch_step.py vit --d-model 64 --layers 4 --heads 4 --patch 7 --image 28 --batch 128 --threads 2
  torch_step.py gpt --vocab 50257 --context 1024 --layers 12 --d-model 768 --heads 12 --length 64 \
                    --batch 4 --slots q,kv,kv --kv-heads 0 --steps 5 --threads 2
  --mode eager (default) or compile: torch.compile (inductor, PyTorch >= 2) of the model and the
  loss, the optimizer step too; --precision fp32,bf16: the precisions to warm up and serve (bf16:
  the forward and the loss under torch.autocast(device, torch.bfloat16), as train.precision: bf16).
  --device cuda[:N] (the GPT; bench_gpt --device cuda:0): the same modules on the GPU, the
  positions made there and each block's attention through F.scaled_dot_product_attention
  (cuDNN's backend preferred, then flash: torch.nn.attention.sdpa_kernel) on the same
  projections; AdamW fused (one kernel for all parameters; torch.compile compiles the model and
  the loss, not the fused update); every step ends with a device synchronize; each reply also
  carries torch.cuda.max_memory_allocated since the warm-up ("peak_bytes"), and the cached blocks
  are returned after each reply so that an idle twin holds only its model and optimizer state.
Exit 77 when PyTorch is not installed.
"""
import argparse
import contextlib
import inspect
import json
import math
import os
import sys

from peer_protocol import fail, run_main, serve, step_arguments, times_ms

try:
    import torch
except ImportError:
    fail(f"PyTorch is not installed in {sys.executable} (Debian: python3-torch; "
         "PyTorch 2: bash bench/peers/setup.sh)", 77)

import torch.nn.functional as F  # noqa: E402

import torch_gpu  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "parity"))
import torch_models  # noqa: E402

BACKENDS = {0: "math", 1: "flash", 2: "efficient", 3: "cudnn", 4: "overrideable"}  # torch._fused_sdp_choice


def build(a):
    """The model, its inputs and targets."""
    if a.model == "encoder":
        cfg = {"vocab": a.vocab, "classes": a.vocab, "layers": a.layers, "ffn_hidden": 2 * a.d_model,
               "d_model": a.d_model, "heads": a.heads, "slots": a.slots.split(","), "dropout": 0.1}
        return (torch_models.Encoder(cfg), torch.randint(0, a.vocab, (a.batch, a.length)),
                torch.randint(0, a.vocab, (a.batch, a.length)))
    if a.model == "gpt":
        cfg = {"vocab": a.vocab, "context": a.context, "layers": a.layers, "d_model": a.d_model, "heads": a.heads,
               "kv_heads": a.kv_heads, "slots": a.slots.split(","), "ffn": 4 * a.d_model}
        return (torch_models.GPT(cfg), torch.randint(0, a.vocab, (a.batch, a.length)),
                torch.randint(0, a.vocab, (a.batch, a.length)))
    cfg = {"image_height": a.image, "image_width": a.image, "channels": a.channels, "patch": a.patch,
           "classes": 10, "layers": a.layers, "d_model": a.d_model, "heads": a.heads, "slots": a.slots.split(","),
           "mlp_ratio": 4.0, "dropout": 0.0}
    return (torch_models.ViT(cfg), torch.randn(a.batch, a.channels, a.image, a.image),
            torch.randint(0, 10, (a.batch,)))


def sdpa_attention(attn, x):
    """torch_models.Attention.forward, causal, with the scores, softmax and mixing fused in
    F.scaled_dot_product_attention (K = V: k and v one tensor)."""
    B, T, _ = x.shape
    q, k, v = attn.split_heads(x)
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return attn.o(y.transpose(1, 2).reshape(B, T, attn.d))


def explicit_attention(attn, x):
    """torch_models.Attention.forward, causal, with the mask made on x's device (PyTorch < 2 has no
    scaled_dot_product_attention)."""
    B, T, _ = x.shape
    q, k, v = attn.split_heads(x)
    s = q @ k.transpose(-1, -2) / math.sqrt(attn.dh)
    s = s.masked_fill(torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1), float("-inf"))
    return attn.o((torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(B, T, attn.d))


def forward_on_device(model, ids, attention):
    """torch_models.GPT.forward with the positions made on ids' device and each block's attention
    through `attention` (the model's own modules and parameters)."""
    x = model.wte(ids) + model.wpe(torch.arange(ids.shape[1], device=ids.device))
    for b in model.blocks:
        x = x + attention(b.attn, b.ln1(x))
        x = x + b.proj(F.gelu(b.fc(b.ln2(x))))
    return model.ln_f(x) @ model.wte.weight.t()


def sdpa_preference():
    """(context factory, words): SDPA restricted to cuDNN's backend, then flash's, in that order
    (torch.nn.attention.sdpa_kernel with set_priority, PyTorch >= 2.6; earlier, both enabled and
    PyTorch's own order); None where this PyTorch cannot say."""
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:
        return None, "no torch.nn.attention.sdpa_kernel"
    backends = [getattr(SDPBackend, n) for n in ("CUDNN_ATTENTION", "FLASH_ATTENTION") if hasattr(SDPBackend, n)]
    if "set_priority" in inspect.signature(sdpa_kernel).parameters:
        return (lambda: sdpa_kernel(backends, set_priority=True)), "cuDNN first, then flash"
    return (lambda: sdpa_kernel(backends)), "cuDNN and flash enabled, PyTorch's order"


def sdpa_choice(model, dev, context):
    """The backend SDPA picks for the model's heads under `context` (private
    torch._fused_sdp_choice on a small bf16 probe), or '?'."""
    if not hasattr(torch, "_fused_sdp_choice"):
        return "?"
    a = model.blocks[0].attn
    q = torch.zeros(1, a.h, 128, a.dh, device=dev, dtype=torch.bfloat16, requires_grad=True)
    try:
        with context():
            return BACKENDS.get(int(torch._fused_sdp_choice(q, q, q, is_causal=True)), "?")
    except Exception:  # a private API: any failure just leaves the backend unknown
        return "?"


def adamw(model, lr, gpu):
    """torch.optim.AdamW, fused on a GPU where this PyTorch has it; and its description."""
    if gpu:
        try:
            return torch.optim.AdamW(model.parameters(), lr=lr, fused=True), "AdamW fused"
        except (TypeError, RuntimeError):
            pass
    return torch.optim.AdamW(model.parameters(), lr=lr), "AdamW"


def main():
    ap = argparse.ArgumentParser()
    step_arguments(ap)
    ap.add_argument("--mode", choices=["eager", "compile"], default="eager")
    ap.add_argument("--precision", default="fp32", help="fp32, bf16 or fp32,bf16: warmed up and served")
    # The GPU twin's code on the CPU, to test it where there is no GPU.
    ap.add_argument("--gpu-path", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    precisions = a.precision.split(",")
    if any(p not in ("fp32", "bf16") for p in precisions):
        fail(f"--precision: {a.precision} (fp32, bf16 or fp32,bf16)")
    if a.mode == "compile" and not hasattr(torch, "compile"):
        fail(f"PyTorch {torch.__version__} has no torch.compile (PyTorch 2: bash bench/peers/setup.sh)")
    dev, dev_name = torch_gpu.open_device(a.device)
    gpu = dev.type == "cuda" or a.gpu_path
    if gpu and a.model != "gpt":
        fail(f"--device {a.device}: only the gpt twin runs on a GPU")
    unsupported = ""
    if dev.type == "cpu" and "bf16" in precisions and hasattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported") \
            and not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        precisions.remove("bf16")
        unsupported = f"PyTorch {torch.__version__} has no bf16 matmul on this CPU"
        if not precisions:
            fail(unsupported)
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model, inputs, targets = torch_gpu.build_on(dev, lambda: build(a))
    opt, optimizer = adamw(model, 1e-4 if a.model == "gpt" else 1e-3, gpu)
    extra = {}
    forward = model
    preferred, attention = None, ""
    if gpu:
        have_sdpa = hasattr(F, "scaled_dot_product_attention")
        fn = sdpa_attention if have_sdpa else explicit_attention
        forward = lambda x: forward_on_device(model, x, fn)  # noqa: E731
        preferred, how = sdpa_preference() if have_sdpa else (None, "")
        attention = (f"SDPA {sdpa_choice(model, dev, preferred)} ({how})" if preferred
                     else f"SDPA, default backends ({how})" if have_sdpa
                     else f"explicit softmax attention: PyTorch {torch.__version__} has no SDPA")
        extra = {"device": dev_name, "attention": attention, "optimizer": optimizer}

    def loss_of(x, y):
        logits = forward(x)
        return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))

    def update():
        opt.step()

    if a.mode == "compile":
        import torch._inductor.config as inductor
        if not gpu:
            inductor.compile_threads = 1  # no pool of compile processes holding memory
        loss_of = torch.compile(loss_of)
        if not gpu:  # on a GPU the fused AdamW is already one kernel
            update = torch.compile(update)

    def attention_context(precision):
        # cuDNN's and flash's backends take 16-bit operands only.
        return preferred() if preferred and precision == "bf16" else contextlib.nullcontext()

    def step(precision):
        with attention_context(precision), \
                torch.autocast(dev.type, dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = loss_of(inputs, targets)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        update()
        torch_gpu.synchronize(dev)

    for p in list(precisions):
        try:
            for _ in range(a.warmup):
                step(p)
        except Exception as e:  # torch 2.5.1's inductor fails on the bf16 GPT (a C++ error in its code)
            if p == precisions[0]:
                raise
            precisions.remove(p)
            unsupported = (f"torch {torch.__version__}'s inductor failed on the {p} step "
                           f"({type(e).__name__}: {str(e).strip().splitlines()[0][:120]})")
    torch_gpu.reset_peak(dev)
    version = torch.__version__.split("+")[0]
    about = {"name": f"torch.compile {version}" if a.mode == "compile" else f"PyTorch {version}",
             "mode": a.mode, "threads": torch.get_num_threads(), "torch": torch.__version__,
             "precisions": precisions, "unsupported": unsupported,
             "parameters": sum(p.numel() for p in model.parameters()), **extra}

    def timed(n, p):
        times = times_ms(step, n, p)
        peak = torch_gpu.peak_and_release(dev)
        return times if peak is None else {"times_ms": times, "peak_bytes": peak}

    if a.serve:
        def answer(words):
            p = words[1] if len(words) > 1 else precisions[0]
            if p not in precisions:
                fail(f"{p} was not warmed up (--precision {a.precision})")
            return timed(int(words[0]), p)
        serve(about, answer)
        return
    reply = timed(a.steps, precisions[0])
    times = sorted(reply["times_ms"] if isinstance(reply, dict) else reply)
    peak = {"peak_bytes": reply["peak_bytes"]} if isinstance(reply, dict) else {}
    print(json.dumps(dict(ms_per_step=times[len(times) // 2], best_ms=times[0], **peak, **about)))


if __name__ == "__main__":
    run_main(main)
