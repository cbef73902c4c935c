#!/usr/bin/env bash
# The GPU check: proves the CUDA backend on any NVIDIA GPU machine, including one that has the
# CUDA toolkit, CMake and PyTorch but none of Debian's packages and no network. Two halves:
#
#   bash scripts/gpu-check.sh build   on the development machine: builds build/gpu (CUDA for
#       sm_80 and sm_90, no -march=native, -lineinfo for the sanitizers) and packs the four
#       programs the check runs (qkvlab, op_harness, gpu_parity, bench_kernels) with the shared
#       libraries they need from outside the CUDA toolkit and the C library into one archive,
#       build/gpu-check/bundle.tar.gz (carry that path; it must stay under 64 MiB).
#   bash scripts/gpu-check.sh run     on the GPU machine, with the archive carried. Each step's
#       log goes to $GPU_CHECK_LOGS (default build/gpu-check/logs):
#         ops         `qkvlab ops`: every op-table row has a CUDA kernel
#         harness     every op on cuda:0 against the CPU, outputs and gradients, and in bf16/f16
#                     (the tensor-core matmul and attention among them)
#                     (op_harness --require-gpu, with QKV_CUDA_SYNC=1 so a failure names its op)
#         memcheck    compute-sanitizer memcheck over the CUDA-heavy ops, exact-size allocations
#         racecheck   compute-sanitizer racecheck over the kernels that share memory
#         synthetic   `qkvlab run` of the synthetic smoke runs on cuda:0 and on the CPU: per-step
#                     and per-epoch losses equal to 1e-4 relative (scripts/gpu_check/compare_runs.py)
#         parity      a tiny GPT 20 steps, ResNet34 features and the synthetic encoder on cuda:0
#                     against the CPU (gpu_parity --require-gpu)
#         nccl        the copy smoke runs on cuda:0 through the data-parallel path with the NCCL
#                     back end in a job of one rank, against the synthetic step's plain cuda runs
#                     (1e-6); NCCL from the CUDA toolkit or PyTorch's nvidia-nccl package
#         bench       copy bandwidth, GEMM and attention, qkvlab beside PyTorch on the same card
#         bench_bf16  the same in bf16, plus the 300M GPT's GEMM shapes (cuBLASLt vs torch.mm) and
#                     the tensor-core attention forward vs SDPA's flash backend
#         decode      `qkvlab bench decode` of the 300M shapes, QKV and Q-K=V, bf16 cache, at 2k and
#                     8k positions (the split-KV kernel)
#       and prints a summary table last. Exits non-zero when any step failed; a sanitizer that
#       cannot use the machine's GPU (some container runtimes) is reported as unavailable.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build/gpu
bundle=build/gpu-check

pack() {
  rm -rf "$bundle/stage" && mkdir -p "$bundle/stage/bin" "$bundle/stage/lib"
  local bins=("$build/qkvlab" "$build/tests/op_harness" "$build/tests/gpu_parity" "$build/bench/bench_kernels")
  for bin in "${bins[@]}"; do
    cp "$bin" "$bundle/stage/bin/"
    # Libraries the device may lack: everything resolved outside the CUDA toolkit, except the C
    # runtime and the loader, which every Linux has.
    ldd "$bin" | awk '$3 ~ /^\// {print $3}' |
      grep -v -E '^/usr/local/cuda|/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*)\.so' |
      while read -r lib; do cp -L "$lib" "$bundle/stage/lib/"; done
  done
  # The NCCL plugin sits beside qkvlab, where it is looked for; libnccl itself (200 MiB) is the
  # GPU machine's (the CUDA toolkit's or PyTorch's).
  cp "$build/libqkv_dist_nccl.so" "$bundle/stage/bin/"
  strip "$bundle/stage/bin/"*
  tar -C "$bundle/stage" -czf "$bundle/bundle.tar.gz" bin lib
  rm -rf "$bundle/stage"
  local mib=$(($(stat -c %s "$bundle/bundle.tar.gz") / 1048576))
  echo "gpu-check: packed $bundle/bundle.tar.gz (${mib} MiB); carry it and run 'bash scripts/gpu-check.sh run' there"
  if ((mib >= 64)); then
    echo "gpu-check: the archive is over the 64 MiB a device machine takes" >&2
    exit 1
  fi
}

# ---- the run half ------------------------------------------------------------------------------

logs=${GPU_CHECK_LOGS:-$bundle/logs}
steps=()  # "name|status|seconds|note"

# step NAME NOTE COMMAND...: runs COMMAND with its output in $logs/NAME.log and records the result.
step() {
  local name=$1 note=$2
  shift 2
  local start=$SECONDS status=passed rc=0
  echo "== $name: $*" | tee "$logs/$name.log"
  "$@" >>"$logs/$name.log" 2>&1 || rc=$?
  if ((rc == 3)); then status=unavailable; elif ((rc != 0)); then status=FAILED; fi
  tail -n 3 "$logs/$name.log"
  steps+=("$name|$status|$((SECONDS - start))|$note")
}

every_row_has_cuda() {
  "$bin/qkvlab" ops | tee "$logs/ops.txt"
  # The last line reads "N ops (N with a CUDA kernel), ...".
  tail -n 1 "$logs/ops.txt" | grep -E '^([0-9]+) ops \(\1 with a CUDA kernel\)'
}

synthetic_runs() {
  local runs=(experiments/synthetic/copy.yaml experiments/synthetic/sort.yaml)
  for f in "${runs[@]}"; do
    for dev in cuda:0 cpu; do
      "$bin/qkvlab" run "$f" --scale smoke "sweep.variants=[QKV, Q-K=V, (Q=K=V)+]" "sweep.seeds=[0]" \
        "train.device=$dev" --out "$logs/synthetic-${dev%%:*}" || return 1
    done
  done
  python3 scripts/gpu_check/compare_runs.py "$logs/synthetic-cuda" "$logs/synthetic-cpu" --rtol 1e-4
}

# The data-parallel path on one GPU: a job of one rank through NCCL equals the plain run.
nccl_world_of_one() {
  local lib
  lib=$(python3 -c 'import os, nvidia.nccl as n; print(os.path.join(list(n.__path__)[0], "lib"))' 2>/dev/null || true)
  [ -n "$lib" ] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$lib"
  "$bin/qkvlab" run experiments/synthetic/copy.yaml --scale smoke "sweep.variants=[QKV, Q-K=V, (Q=K=V)+]" \
    "sweep.seeds=[0]" train.device=cuda:0 --dist-backend nccl --out "$logs/nccl" || return 1
  python3 scripts/gpu_check/compare_runs.py "$logs/nccl" "$logs/synthetic-cuda" --rtol 1e-6
}

# Mixed precision on the GPU: bf16 and fp16 (loss-scaled) smoke runs of a plain and a (+) variant
# train to the end on cuda:0 (the fp16 run's overflows, if any, are console lines in its log).
low_precision() {
  local p
  for p in bf16 fp16; do
    "$bin/qkvlab" run experiments/synthetic/copy.yaml --scale smoke "sweep.variants=[Q-K=V, (Q-K=V)+]" \
      "sweep.seeds=[0]" train.device=cuda:0 "train.precision=$p" --out "$logs/synthetic-$p" || return 1
  done
}

# sanitize TOOL TESTS: compute-sanitizer over op_harness cases; 3 (unavailable) where the
# sanitizer cannot use this machine's GPU (some container runtimes refuse it).
sanitize() {
  local tool=$1 tests=$2 rc=0
  QKV_CUDA_EXACT_ALLOC=1 timeout 150 "$sanitizer" --tool "$tool" --error-exitcode 1 "$bin/op_harness" --require-gpu \
    "-tc=$tests" 2>&1 | tee "$logs/$tool.out" || rc=$?
  if grep -q -E "Device not supported|not found|No such file" "$logs/$tool.out"; then return 3; fi
  return "$rc"
}

# decode: tokens/s of QKV and Q-K=V (the 300M shapes, bf16 cache read in place, split-KV
# attention) at caches of 2k and 8k positions, eager and replayed as a CUDA graph (--graph);
# then an int8 cache (widened per step on a GPU), the low-rank V residual and linear attention.
decode() {
  local ctx graph
  for ctx in 2048 8192; do
    for graph in "" --graph; do
      "$bin/qkvlab" bench decode experiments/lm/gpt-300m.yaml --scale paper "sweep.variants=[QKV,Q-K=V]" \
        --context "$ctx" --prompt $((ctx - 32)) --new-tokens 32 --precision bf16 --device cuda:0 $graph || return 1
    done
  done
  "$bin/qkvlab" bench decode experiments/lm/gpt-300m.yaml --scale paper \
    "sweep.variants=[Q-K=V,Q-MQA,Q-K=V+LR16,Q=K=V+linear]" --context 2048 --prompt 2016 --new-tokens 32 \
    --dtype int8 --device cuda:0 || return 1
}

# bench DTYPE: qkvlab's kernels and PyTorch's in one dtype (f32 or bf16), side by side.
bench() {
  # Functions run under `if` ignore set -e: each failure returns explicitly.
  local dt=$1 torch_dt=float32
  [ "$dt" = bf16 ] && torch_dt=bfloat16
  "$bin/bench_kernels" --device cuda:0 --dtype "$dt" --json "$logs/bench-qkvlab-$dt.json" || return 1
  python3 bench/torch_kernels.py --device cuda:0 --dtype "$torch_dt" --json "$logs/bench-torch-$dt.json" || return 1
  python3 bench/compare_kernels.py "$logs/bench-qkvlab-$dt.json" "$logs/bench-torch-$dt.json" | tee "$logs/bench-$dt.md"
}

run_check() {
  [ -f "$bundle/bundle.tar.gz" ] || {
    echo "gpu-check: $bundle/bundle.tar.gz is missing: run 'bash scripts/gpu-check.sh build' on the" \
      "development machine and carry $bundle/bundle.tar.gz" >&2
    exit 2
  }
  mkdir -p "$logs" "$bundle/unpacked"
  tar -C "$bundle/unpacked" -xzf "$bundle/bundle.tar.gz"
  bin=$PWD/$bundle/unpacked/bin
  export LD_LIBRARY_PATH="$PWD/$bundle/unpacked/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv,noheader | tee "$logs/gpu.txt"
  fi
  local heavy='op attention,op attention_backward,op conv2d,op conv2d_backward,op batch_norm,op max_pool2d'
  heavy+=',op adaptive_avg_pool2d,op adam_update,op sgd_update,op clip_grad_norm,op cross_entropy,op embedding'
  heavy+=',op cross_entropy_backward,op index_add,op scatter_add,op layer_norm_backward,op cache_attention,op kv_write'
  heavy+=',op quantize_int8'
  local shared='op attention,op attention_backward,op softmax,op log_softmax,op layer_norm,op layer_norm_backward'
  shared+=',op cross_entropy,op sum,op mean,op amax,op max,op clip_grad_norm,op conv2d_backward'

  step ops "every row has a CUDA kernel" every_row_has_cuda
  step harness "every op on cuda:0 vs the CPU" env QKV_CUDA_SYNC=1 "$bin/op_harness" --require-gpu
  step memcheck "compute-sanitizer memcheck, exact-size allocations" sanitize memcheck "$heavy"
  step racecheck "compute-sanitizer racecheck" sanitize racecheck "$shared"
  step synthetic "smoke runs, cuda:0 vs cpu, 1e-4" synthetic_runs
  step parity "GPT, ResNet34, encoder vs cpu" "$bin/gpu_parity" --require-gpu
  step nccl "one-rank NCCL job vs plain, 1e-6" nccl_world_of_one
  step precision "bf16 and fp16 smoke runs on cuda:0" low_precision
  step bench "qkvlab beside PyTorch, float32" bench f32
  step bench_bf16 "bf16 GEMMs (300M shapes), flash attention beside PyTorch" bench bf16
  step decode "decode tokens/s, QKV vs Q-K=V, 2k and 8k caches, eager and CUDA graph" decode

  echo
  {
    echo "| step | result | seconds | what |"
    echo "|---|---|---:|---|"
    for s in "${steps[@]}"; do
      IFS='|' read -r name status secs note <<<"$s"
      echo "| $name | $status | $secs | $note |"
    done
  } | tee "$logs/summary.md"
  local passed failed
  passed=$(grep -c '| passed |' "$logs/summary.md" || true)
  failed=$(grep -c '| FAILED |' "$logs/summary.md" || true)
  echo
  echo "gpu-check: $passed passed, $failed failed, $((${#steps[@]} - passed - failed)) unavailable (logs in $logs)"
  [ "$failed" -eq 0 ]
}

case "${1:-}" in
  build)
    # Without oneDNN: the check is about CUDA, and its 40 MB library would not fit the bundle.
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DQKV_CUDA=ON -DQKV_NATIVE=OFF -DQKV_BUILD_BENCH=ON \
      -DQKV_ONEDNN=OFF "-DCMAKE_CUDA_ARCHITECTURES=80;90" -DCMAKE_CUDA_FLAGS=-lineinfo
    cmake --build "$build" --target qkvlab op_harness gpu_parity bench_kernels qkv_dist_nccl
    pack
    ;;
  run) run_check ;;
  *)
    echo "usage: bash scripts/gpu-check.sh build|run" >&2
    exit 2
    ;;
esac
