#!/usr/bin/env python3
"""Parity of qkvlab's ResNet-34 with torchvision's.

Builds torchvision.models.resnet34(weights=None) with random weights and random batch-norm
parameters and running statistics, writes its state dict (num_batches_tracked included) and a
batch of random images [2, 3, 64, 64] as safetensors, runs resnet_dump (which loads both with
qkvlab, strictly, and writes the pooled features and the logits), and compares those with
torchvision's in eval mode, each to 1e-4 relative to the reference's largest magnitude. Exit 77
(CTest: skipped) when PyTorch or torchvision is not installed.

  check_resnet.py --dump PATH_TO_resnet_dump --workdir DIR
"""
import argparse
import os
import subprocess
import sys

try:
    import torch
    import torchvision
except ImportError:
    print("parity: skipped (PyTorch or torchvision is not installed; Debian packages python3-torch, "
          "python3-torchvision)")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_models  # noqa: E402

RTOL = 1e-4


def rel_err(got, want):
    """Largest difference relative to the reference's largest magnitude."""
    return (got - want).abs().max().item() / max(want.abs().max().item(), 1e-12)


def random_model(gen):
    """resnet34 with torchvision's random init, then random batch-norm affine parameters and
    running statistics (so normalization is not the identity) and a non-zero batch count."""
    model = torchvision.models.resnet34(weights=None)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                c = m.num_features
                m.weight.copy_(0.5 + torch.rand(c, generator=gen))
                m.bias.copy_(0.2 * torch.randn(c, generator=gen))
                m.running_mean.copy_(0.2 * torch.randn(c, generator=gen))
                m.running_var.copy_(0.5 + torch.rand(c, generator=gen))
                m.num_batches_tracked.fill_(int(torch.randint(1, 1000, (1,), generator=gen)))
    return model.eval()


def torch_features(model, x):
    """torchvision's forward up to (and including) the pooling: the input of fc."""
    y = model.maxpool(model.relu(model.bn1(model.conv1(x))))
    y = model.layer4(model.layer3(model.layer2(model.layer1(y))))
    return torch.flatten(model.avgpool(y), 1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dump", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    model = random_model(gen)
    images = torch.randn(2, 3, 64, 64, generator=gen)
    weights_path = os.path.join(args.workdir, "resnet34.safetensors")
    images_path = os.path.join(args.workdir, "images.safetensors")
    out_path = os.path.join(args.workdir, "qkvlab_out.safetensors")
    torch_models.write_safetensors(weights_path, model.state_dict())
    torch_models.write_safetensors(images_path, {"images": images})
    subprocess.run([args.dump, weights_path, images_path, out_path], check=True)
    got = torch_models.read_safetensors(out_path)
    with torch.no_grad():
        want = {"features": torch_features(model, images), "logits": model(images)}
    ok = True
    for name, ref in want.items():
        err = rel_err(got[name], ref)
        good = got[name].shape == ref.shape and err <= RTOL
        ok &= good
        print(f"resnet34 {name:>8} {list(ref.shape)}: max rel err {err:.1e} -> {'ok' if good else 'FAIL'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
