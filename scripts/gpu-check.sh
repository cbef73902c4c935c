#!/usr/bin/env bash
# The GPU check, in two halves, because the device machine has the CUDA toolkit, CMake and
# PyTorch but none of Debian's packages:
#
#   bash scripts/gpu-check.sh build   here: builds build/gpu (CUDA backend for sm_90, no
#                                     -march=native) with the op harness and qkvlab, copies the
#                                     shared libraries they need from outside /usr/local/cuda and
#                                     the C library into build/gpu/lib, and prints the size to carry
#                                     (the device takes at most 64 MiB).
#   bash scripts/gpu-check.sh run     on the device, with build/gpu carried: prints the GPU, runs
#                                     every op that has a CUDA kernel against the CPU kernel
#                                     (op_harness --require-gpu: a missing GPU is a failure there),
#                                     and prints the op table as that machine sees it.
#
# Exits non-zero on the first failure; the last line says what passed.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build/gpu

case "${1:-}" in
  build)
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DQKV_CUDA=ON -DQKV_NATIVE=OFF \
      -DQKV_BUILD_BENCH=OFF -DCMAKE_CUDA_ARCHITECTURES=90
    cmake --build "$build" --target op_harness qkvlab
    mkdir -p "$build/lib"
    # Libraries the device may lack: everything resolved outside the CUDA toolkit, except the
    # C runtime and the loader, which every Linux has.
    for bin in "$build/tests/op_harness" "$build/qkvlab"; do
      ldd "$bin" | awk '$3 ~ /^\// {print $3}' |
        grep -v -E '^/usr/local/cuda|/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*)\.so' |
        while read -r lib; do cp -L "$lib" "$build/lib/"; done
    done
    echo "gpu-check: built $build; carry these (total $(du -shc "$build/tests/op_harness" "$build/qkvlab" \
      "$build/lib" | tail -1 | cut -f1)): $build/tests/op_harness $build/qkvlab $build/lib"
    ;;
  run)
    for f in "$build/tests/op_harness" "$build/qkvlab"; do
      [ -x "$f" ] || { echo "gpu-check: $f is missing: run 'bash scripts/gpu-check.sh build' here and carry $build" >&2; exit 2; }
    done
    export LD_LIBRARY_PATH="$PWD/$build/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    if command -v nvidia-smi >/dev/null; then nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; fi
    "$build/tests/op_harness" --require-gpu
    "$build/qkvlab" ops
    echo "gpu-check: passed (every op with a CUDA kernel matches the CPU)"
    ;;
  *)
    echo "usage: bash scripts/gpu-check.sh build|run" >&2
    exit 2
    ;;
esac
