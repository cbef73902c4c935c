#!/usr/bin/env bash
# Builds and runs the test suite: scripts/test.sh [--preset release|debug|asan|cpu|ci|ci-asan|ci-emu]
# (default release). Installs missing packages first, so it works on a fresh machine.
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
ctest --preset "$preset" --parallel "$(nproc)"
