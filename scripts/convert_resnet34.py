#!/usr/bin/env python3
"""Convert torchvision's ResNet34 checkpoint to the safetensors file qkvlab reads.

The anomaly task (experiments/vision/anomaly.yaml) encodes images with a frozen ImageNet-pretrained
ResNet34, read from `data.resnet_weights`: a safetensors file holding torchvision's resnet34
state_dict under torchvision's names (conv1.weight, bn1.running_mean, layer2.0.downsample.0.weight,
..., fc.bias; bn*.num_batches_tracked, when the checkpoint has them, are kept and ignored by
qkvlab). This script reads torchvision's file (resnet34-b627a593.pth, from torchvision's model
zoo: PyTorch is needed only to read it), checks every name and shape against resnet34's, and
writes that file.

    python3 scripts/convert_resnet34.py resnet34-b627a593.pth resnet34.safetensors
    qkvlab run experiments/vision/anomaly.yaml data.resnet_weights=resnet34.safetensors ...

It writes with the `safetensors` package when installed, else the format directly: an 8-byte
little-endian header length, a JSON header {name: {dtype, shape, data_offsets}} (padded with
spaces to a multiple of 8), then the raw little-endian bytes. The output appears atomically (a
temporary file renamed over it). Exit status 1 with a message naming the file and the key when
the checkpoint is not resnet34's.
"""
import argparse
import json
import os
import struct
import sys
import tempfile

STAGES = (3, 4, 6, 3)  # BasicBlocks per stage
WIDTHS = (64, 128, 256, 512)


def resnet34_layout(classes=1000):
    """torchvision.models.resnet34().state_dict(): {name: shape}, in torchvision's order."""
    out = {"conv1.weight": (64, 3, 7, 7)}

    def bn(prefix, c):
        for k in ("weight", "bias", "running_mean", "running_var"):
            out[f"{prefix}.{k}"] = (c,)
        out[f"{prefix}.num_batches_tracked"] = ()

    bn("bn1", 64)
    width_in = 64
    for stage, (blocks, width) in enumerate(zip(STAGES, WIDTHS), start=1):
        for b in range(blocks):
            p = f"layer{stage}.{b}"
            out[f"{p}.conv1.weight"] = (width, width_in, 3, 3)
            bn(f"{p}.bn1", width)
            out[f"{p}.conv2.weight"] = (width, width, 3, 3)
            bn(f"{p}.bn2", width)
            if b == 0 and stage > 1:
                out[f"{p}.downsample.0.weight"] = (width, width_in, 1, 1)
                bn(f"{p}.downsample.1", width)
            width_in = width
    out["fc.weight"] = (classes, 512)
    out["fc.bias"] = (classes,)
    return out


def fail(message):
    print(f"convert_resnet34: {message}", file=sys.stderr)
    sys.exit(1)


def load_state_dict(path):
    """The checkpoint's state dict: a plain {name: tensor} (torchvision's files), or one under a
    'state_dict' or 'model' key (training checkpoints)."""
    try:
        import torch
    except ImportError:
        fail("PyTorch is needed to read a .pth file (Debian: apt-get install python3-torch)")
    try:
        try:
            obj = torch.load(path, map_location="cpu", weights_only=True)
        except TypeError:  # PyTorch before 1.13 has no weights_only
            obj = torch.load(path, map_location="cpu")
    except Exception as e:  # a missing, truncated or foreign file
        fail(f"{path}: cannot read it as a PyTorch checkpoint: {e}")
    if isinstance(obj, dict) and not any(isinstance(v, torch.Tensor) for v in obj.values()):
        for key in ("state_dict", "model"):
            if isinstance(obj.get(key), dict):
                obj = obj[key]
                break
    if not isinstance(obj, dict) or not all(isinstance(v, torch.Tensor) for v in obj.values()):
        fail(f"{path}: expected a state dict (names to tensors), got {type(obj).__name__}")
    return obj


def check_layout(path, state):
    want = resnet34_layout()
    # Checkpoints saved before PyTorch 0.4 have no num_batches_tracked; qkvlab needs none.
    missing = [k for k in want if k not in state and not k.endswith("num_batches_tracked")]
    unexpected = [k for k in state if k not in want]
    if missing:
        fail(f"{path}: missing {len(missing)} tensor(s) of resnet34, e.g. '{missing[0]}'")
    if unexpected:
        fail(f"{path}: unexpected tensor(s) {', '.join(repr(k) for k in unexpected[:5])} (not in resnet34)")
    for name, shape in want.items():
        if name not in state:
            continue
        got = tuple(state[name].shape)
        if got != shape:
            fail(f"{path}: tensor '{name}' has shape {list(got)}, expected {list(shape)}")


def arrays(state):
    """{name: little-endian numpy array}: float32 weights and statistics, int64 counters."""
    import numpy as np
    out = {}
    for name, t in state.items():
        t = t.detach().cpu().contiguous()
        if name.endswith("num_batches_tracked"):
            out[name] = t.numpy().astype("<i8")
        else:
            out[name] = t.float().numpy().astype("<f4")
    return out


def write_direct(path, tensors, metadata):
    codes = {"float32": "F32", "int64": "I64"}
    header, offset = {"__metadata__": metadata}, 0
    for name, a in tensors.items():
        header[name] = {"dtype": codes[a.dtype.name], "shape": list(a.shape),
                        "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for a in tensors.values():
            f.write(a.tobytes())


def write(path, tensors, metadata):
    """Writes to a temporary file beside `path`, then renames it over `path`."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.tmp.", dir=folder)
    os.close(fd)
    try:
        try:
            from safetensors.numpy import save_file
            save_file(tensors, tmp, metadata=metadata)
            how = "safetensors package"
        except ImportError:
            write_direct(tmp, tensors, metadata)
            how = "written directly"
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp's file is private; the result need not be
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return how


def main():
    ap = argparse.ArgumentParser(
        description="Convert torchvision's resnet34 checkpoint (.pth) to the safetensors file that "
        "qkvlab's anomaly task reads in data.resnet_weights.",
        epilog="Example: convert_resnet34.py resnet34-b627a593.pth resnet34.safetensors")
    ap.add_argument("checkpoint", help="torchvision's resnet34 state dict, e.g. resnet34-b627a593.pth")
    ap.add_argument("output", help="the safetensors file to write")
    ap.add_argument("--force", action="store_true", help="replace the output file if it exists")
    args = ap.parse_args()
    if os.path.exists(args.output) and not args.force:
        fail(f"{args.output} exists; pass --force to replace it")
    state = load_state_dict(args.checkpoint)
    check_layout(args.checkpoint, state)
    tensors = arrays(state)
    metadata = {"source": os.path.basename(args.checkpoint), "model": "torchvision resnet34"}
    how = write(args.output, tensors, metadata)
    params = sum(a.size for n, a in tensors.items() if not n.endswith("num_batches_tracked")
                 and "running_" not in n)
    print(f"{args.output}: {len(tensors)} tensors, {params:,} parameters ({how})")


if __name__ == "__main__":
    main()
