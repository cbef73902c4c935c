#!/usr/bin/env bash
# Builds and runs the test suite: scripts/test.sh [--preset release|debug|asan|cpu|ci|ci-asan|ci-emu]
# (default release). Installs missing packages first, so it works on a fresh machine. With ci-emu
# (the CUDA kernels on the emulated device) it then checks that the run reached every kernel path
# (scripts/emu-coverage.py).
set -euo pipefail
cd "$(dirname "$0")/.."
preset=release
while [ $# -gt 0 ]; do
  case "$1" in
    --preset) preset="$2"; shift 2 ;;
    *) echo "usage: scripts/test.sh [--preset release|debug|asan|cpu|ci|ci-asan|ci-emu]" >&2; exit 2 ;;
  esac
done
bash scripts/install-deps.sh
cmake --preset "$preset"
cmake --build --preset "$preset"
coverage="build/$preset/emu-coverage"  # where the ci-emu test preset's QKV_EMU_COVERAGE points
if [ "$preset" = ci-emu ]; then rm -rf "$coverage" && mkdir -p "$coverage"; fi
ctest --preset "$preset" --parallel "$(nproc)"
if [ "$preset" = ci-emu ]; then python3 scripts/emu-coverage.py "$coverage"; fi
