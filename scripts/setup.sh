#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a running qkvlab: installs what is missing,
# builds the release preset (with CUDA when nvcc is found), and runs the main job.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset release
cmake --build --preset release
./build/release/qkvlab demo
