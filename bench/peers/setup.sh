#!/usr/bin/env bash
# Makes the virtual environment of the benchmarks' modern peers: PyTorch 2 (eager and
# torch.compile) and JAX on the CPU, pinned, from PyPI. Not part of CI or of scripts/test.sh: the
# benchmarks run without it (their peers are then Debian's PyTorch 1.13 alone).
#
#   bash bench/peers/setup.sh [DIR]        DIR: $QKV_PEERS_VENV, else build/peers-venv
#
# The benchmarks (bench_encoder, bench_vit, bench_gpt, bench_decode) find the venv at
# $QKV_PEERS_VENV or build/peers-venv and time torch, torch-compile and jax from it beside qkvlab
# (their --peers). PYTHON=python3.X picks the interpreter (the pins have wheels for Python
# 3.11-3.13). PyPI's torch wheel is its CUDA build (a few GB of nvidia-* packages come with it);
# on the CPU it runs the same kernels as the CPU-only wheel. transformers also makes the Hugging
# Face fixtures (tests/parity/make_hf_*_fixture.py) and checks the exports (tests/parity).
# Needs a network connection to PyPI; about 5 GB of disk.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
venv="${1:-${QKV_PEERS_VENV:-$root/build/peers-venv}}"
python="${PYTHON:-python3}"
pins=(torch==2.15.0 transformers==5.25.0 safetensors==0.8.0 "jax[cpu]==0.10.2" numpy==2.4.6)

command -v "$python" >/dev/null || { echo "peers/setup: no $python (set PYTHON=...)" >&2; exit 1; }
if [ ! -x "$venv/bin/python" ]; then
  echo "peers/setup: creating $venv with $("$python" --version 2>&1)" >&2
  "$python" -m venv "$venv" || {
    echo "peers/setup: '$python -m venv' failed (Debian: apt-get install python3-venv)" >&2
    exit 1
  }
fi
"$venv/bin/python" -m pip install --quiet "${pins[@]}"
"$venv/bin/python" -c 'import torch, jax' || { echo "peers/setup: torch or jax does not import in $venv" >&2; exit 1; }
echo "peers/setup: $venv: $("$venv/bin/python" "$root/bench/peers/versions.py")" >&2
