#!/usr/bin/env bash
# The mutation exercise on the CUDA kernels: bash scripts/mutate-cuda.sh [--only NAME] [--list]
#
# Applies each bug of scripts/cuda-mutations.txt, one at a time, to a scratch copy of this tree
# (build/mutate/src, the working tree as it is now), rebuilds it incrementally with the ci-emu
# preset, and runs CI's emulated selection on it: the tests that launch kernels first, then the
# rest of `ctest --preset ci-emu`, each stopping at its first failure. Prints, per mutation, the
# test that caught it or MISSED, and exits 1 if any was missed or no longer applies. Not part of
# CI (a full build, then minutes per mutation); run it before changing what CI's emulated run
# selects, or after changing a kernel.
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 scripts/mutate_cuda.py "$@"
