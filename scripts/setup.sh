#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a running qkvlab: installs what is missing,
# builds the release preset (with CUDA when nvcc is found), and runs the main job: the five
# synthetic tasks x six attention variants at smoke scale on the CPU, ending with Table 1.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset release
cmake --build --preset release
./build/release/qkvlab run experiments/synthetic/suite.yaml --scale smoke --out runs/smoke
