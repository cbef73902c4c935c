"""What the PyTorch twins (torch_step.py, torch_decode.py) need to run on a GPU as they do on the
CPU: the device from --device, checked; the model built where it runs; a synchronize that makes
a step's wall time the device's time; the device's memory peak. Imported after torch."""
import contextlib

import torch

from peer_protocol import fail


def open_device(spec):
    """torch.device(spec) and its product name, or one JSON error line (and exit) when this
    PyTorch cannot use it."""
    try:
        dev = torch.device(spec)
    except RuntimeError as e:
        fail(f"--device {spec}: {e}")
    if dev.type == "cpu":
        return dev, "cpu"
    if dev.type != "cuda":
        fail(f"--device {spec}: the twins run on cpu or cuda[:N]")
    if not torch.cuda.is_available():
        fail(f"PyTorch {torch.__version__} sees no CUDA device (--device {spec})")
    if dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    if dev.index >= torch.cuda.device_count():
        fail(f"--device {spec}: PyTorch sees {torch.cuda.device_count()} CUDA device(s)")
    torch.cuda.set_device(dev)
    # float32 as qkvlab computes it: no TF32 in the matmuls (bf16 autocast is unaffected).
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return dev, torch.cuda.get_device_name(dev)


def build_on(dev, make):
    """make() -> (model, tensors...) with what it creates made on `dev` (PyTorch >= 2: torch.device
    as a context, so a 300M model's initialisation runs on the GPU), else made on the CPU and
    moved."""
    if dev.type == "cpu":
        return make()
    with dev if hasattr(dev, "__enter__") else contextlib.nullcontext():
        made = make()
    return tuple(t.to(dev) for t in made)


def synchronize(dev):
    """Waits for the device's queued work (a no-op on the CPU), so a timed step has finished."""
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def reset_peak(dev):
    """Returns cached blocks and restarts the memory peak (after a warm-up, before the timed steps)."""
    if dev.type == "cuda":
        synchronize(dev)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(dev)


def peak_and_release(dev):
    """The device's memory peak since reset_peak (torch.cuda.max_memory_allocated), then the
    cached blocks returned to the device, so that an idle twin holds its model and state only
    while the next contestant's turn runs; None on the CPU."""
    if dev.type != "cuda":
        return None
    peak = torch.cuda.max_memory_allocated(dev)
    torch.cuda.empty_cache()
    return peak
