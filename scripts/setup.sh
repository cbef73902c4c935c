#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a running qkvlab: installs what building and
# running qkvlab needs (scripts/install-deps.sh --app), builds the qkvlab binary and the modules it
# loads (preset app: no tests or benchmarks; with the CUDA backend when this machine has an
# NVIDIA GPU and nvcc), and runs the main job: the five synthetic tasks x six attention variants
# at smoke scale on the CPU, ending with Table 1. The tests have their own command,
# scripts/test.sh, which installs and builds the rest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh --app
cuda=OFF
if [ -x /usr/local/cuda/bin/nvcc ] && nvidia-smi -L >/dev/null 2>&1; then cuda=ON; fi
echo "setup: building qkvlab (CUDA backend: $cuda) with $(nproc) parallel jobs"
cmake --preset app -DQKV_CUDA="$cuda" >/dev/null
cmake --build --preset app
echo "setup: built build/app/qkvlab; the main job: qkvlab run experiments/synthetic/suite.yaml --scale smoke"
./build/app/qkvlab run experiments/synthetic/suite.yaml --scale smoke --out runs/smoke
