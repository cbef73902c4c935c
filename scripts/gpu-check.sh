#!/usr/bin/env bash
# The GPU check: proves the CUDA backend on an NVIDIA GPU machine that has the CUDA toolkit and
# PyTorch but none of Debian's packages and no network, inside a short lease (two calls of at
# most 5 minutes, at most 8 files back).
#
#   bash scripts/gpu-check.sh build
#       On the development machine: builds build/gpu (CUDA for sm_80 and sm_90a, no -march=native,
#       -lineinfo for the sanitizers) and packs the programs the check runs with the shared
#       libraries they need, except the C library and the large CUDA libraries (cuBLAS, NCCL),
#       into build/gpu-check/bundle.tar.gz (carry that path; it must stay under 64 MiB). The
#       programs find those libraries through an $ORIGIN rpath: nothing exports LD_LIBRARY_PATH,
#       so python, PyTorch and compute-sanitizer keep the machine's own libraries. The benchmarks
#       bench_kernels, bench_gpt and bench_decode are one program, bench_multi, packed once and
#       linked under the three names (each alone would carry its own copy of the CUDA kernels).
#   bash scripts/gpu-check.sh run core|more [--budget SECONDS] [--dry-run]
#       On the GPU machine, with the archive carried, in the order of what matters most when the
#       budget runs out: correctness, the attention ratio, the training step, the decode study.
#       `core`: preflight, ops, harness, GPU parity, the bf16 kernel benchmarks beside PyTorch
#       (attention on the Hopper and the mma.sync kernels beside SDPA's cuDNN and flash backends),
#       memcheck and racecheck on small samples; then, in the time left, the 300M step of Q-K=V.
#       `more`: synthetic runs cuda:0 vs CPU, bf16/fp16 model runs at head dim 64, a one-rank NCCL
#       job, the 300M GPT's training step beside PyTorch eager and torch.compile, the decode study
#       (QKV, Q-K=V, Q-MQA at 2k and 8k positions, bf16 and int8 caches, eager and CUDA graphs,
#       beside PyTorch's decode twin); then, in the time left, `qkvlab bench decode` of the
#       variants the study cannot build and the float32 kernel benchmarks. Every step runs under
#       its own timeout (each part's first steps' timeouts add up to about 290 s) and a global
#       deadline (--budget, default 270 s), after which the remaining steps are "skipped
#       (budget)". After every step the summary and a tarball of the logs are rewritten in $OUT
#       (default build/gpu-check/out): summary-PART.md, logs-PART.tar.gz and bench-PART.md (the
#       benchmark tables) — six files for both parts, so a killed run still returns what it did.
#       --dry-run lays out the same files with the commands each step would run (any machine).
#   bash scripts/gpu-check.sh pack
#       Packs the archive again from an existing build/gpu.
# Exit status: 0 when no step failed.
set -uo pipefail
cd "$(dirname "$0")/.."
self=$PWD/scripts/gpu-check.sh
build=build/gpu
bundle=build/gpu-check

# ---- the build half ------------------------------------------------------------------------------

# Programs packed into bin/ (the NCCL plugin sits beside qkvlab, where it is looked for), and the
# names bench_multi answers to there (bench/bench_multi.cpp).
packed_programs=("$build/qkvlab" "$build/tests/op_harness" "$build/tests/gpu_parity" "$build/bench/bench_multi"
  "$build/libqkv_dist_nccl.so")
bench_names=(bench_kernels bench_gpt bench_decode)

pack() {
  set -e
  rm -rf "$bundle/stage" && mkdir -p "$bundle/stage/bin" "$bundle/stage/lib"
  local bin lib
  for bin in "${packed_programs[@]}"; do
    cp "$bin" "$bundle/stage/bin/"
    # Libraries the device may lack: everything but the C runtime and the loader, which every
    # Linux has, and the large CUDA libraries (cuBLAS, NCCL), which are the GPU machine's; the
    # CUDA runtime (1 MiB) comes along.
    ldd "$bin" | awk '$3 ~ /^\// {print $3}' |
      grep -v -E '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*)\.so|/libnccl\.so|/libcublas' |
      while read -r lib; do cp -L "$lib" "$bundle/stage/lib/"; done
  done
  strip "$bundle/stage/bin/"* "$bundle/stage/lib/"*
  # DT_RPATH (not RUNPATH) so the bundled folder also serves the libraries' own dependencies;
  # the CUDA toolkit's lib64 second, for cuBLASLt and NCCL.
  for bin in "$bundle/stage/bin/"*; do
    patchelf --force-rpath --set-rpath '$ORIGIN/../lib:/usr/local/cuda/lib64' "$bin"
  done
  for lib in "$bundle/stage/lib/"*; do patchelf --force-rpath --set-rpath '$ORIGIN' "$lib"; done
  for name in "${bench_names[@]}"; do ln -s bench_multi "$bundle/stage/bin/$name"; done
  tar -C "$bundle/stage" -cf - bin lib | gzip -9 >"$bundle/bundle.tar.gz"
  rm -rf "$bundle/stage"
  local bytes mib
  bytes=$(stat -c %s "$bundle/bundle.tar.gz")
  mib=$((bytes / 1048576))
  echo "gpu-check: packed $bundle/bundle.tar.gz ($(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }') MiB of the" \
    "64 a device machine takes); carry it and run 'bash scripts/gpu-check.sh run core' there"
  if ((mib >= 64)); then
    echo "gpu-check: the archive is over the 64 MiB a device machine takes" >&2
    exit 1
  fi
}

# ---- the steps' bodies (run as `gpu-check.sh _do FUNCTION ARGS`, so `timeout` can bound them) ----

# The machine in a few seconds: the GPU and driver, glibc, and every packed program's libraries
# (a library not found fails the check; where the CUDA libraries resolve is printed).
preflight() {
  local rc=0 f missing
  nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv,noheader || rc=1
  echo "glibc: $(ldd --version | head -n 1)"
  echo "compute-sanitizer: $(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || echo none)"
  for f in "$bin"/*; do
    missing=$(ldd "$f" 2>&1 | grep 'not found' | grep -v libnccl || true)  # NCCL: the nccl step's
    if [ -n "$missing" ]; then
      echo "FAILED: $(basename "$f") cannot load: $missing"
      rc=1
    fi
    ldd "$f" | grep -E 'libcudart|libcublas|libnccl|libstdc\+\+' | sed "s|^|  $(basename "$f"): |"
  done
  for f in libcublasLt.so.13 libnccl.so.2; do echo "$f: $(library_dir "$f" || echo 'not found')"; done
  return "$rc"
}

# The folder holding library $1: the CUDA toolkit's lib64, the loader's cache, or PyTorch's
# nvidia-* packages.
library_dir() {
  local d
  for d in /usr/local/cuda/lib64 $(ldconfig -p 2>/dev/null | awk -v l="$1" '$1 == l {print $NF}' | xargs -r -n1 dirname) \
    $(find $(python3 -c 'import nvidia; print(*nvidia.__path__)' 2>/dev/null) -name "$1" -printf '%h\n' 2>/dev/null); do
    [ -e "$d/$1" ] && echo "$d" && return 0
  done
  return 1
}

# The large CUDA libraries the programs load from the machine: where /usr/local/cuda/lib64 (the
# rpath's second folder) lacks one, a link to the one found elsewhere goes into the bundle's lib/
# (the rpath's first), so nothing needs LD_LIBRARY_PATH.
link_machine_libraries() {
  local lib dir
  for lib in libcublasLt.so.13 libcublas.so.13 libnccl.so.2; do
    [ -e "/usr/local/cuda/lib64/$lib" ] && continue
    dir=$(library_dir "$lib") && ln -sf "$dir/$lib" "$bundle/unpacked/lib/$lib"
  done
}

every_row_has_cuda() {
  "$bin/qkvlab" ops | tee "$work/ops.txt"
  # The last line reads "N ops (N with a CUDA kernel), ...".
  tail -n 1 "$work/ops.txt" | grep -E '^([0-9]+) ops \(\1 with a CUDA kernel\)'
}

# sanitize TOOL TESTS: compute-sanitizer over op_harness cases, their small samples only
# (QKV_HARNESS_SMALL=1), every tensor its own exact-size allocation. Fails on what the sanitizer
# reports; the cases' own comparisons are the harness step's. 3 (unavailable) where the
# sanitizer cannot use this machine's GPU (some container runtimes refuse it).
sanitize() {
  local tool=$1 tests=$2 sanitizer rc=0
  sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  [ -x "$sanitizer" ] || { echo "no compute-sanitizer on this machine"; return 3; }
  QKV_CUDA_EXACT_ALLOC=1 QKV_HARNESS_SMALL=1 "$sanitizer" --tool "$tool" --error-exitcode 86 "$bin/op_harness" \
    --require-gpu "-tc=$tests" 2>&1 | tee "$work/$tool.out" || rc=$?
  if grep -q -E "Device not supported|Unable to find injection library" "$work/$tool.out"; then return 3; fi
  grep -q -E "ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards" "$work/$tool.out" || return 1
  ((rc != 86)) || return 1
  echo "$tool: no errors (exit $rc of the cases themselves)"
}

# bench DTYPE: qkvlab's kernels and PyTorch's in one dtype (f32 or bf16), side by side; the
# table goes to $OUT/bench-PART.md. In bf16 the attention also covers FlashAttention's shapes
# (sequence 2048 and 4096, head dims 64 and 128, causal) on both of qkvlab's kernel paths, every
# case checked against the CPU first, beside SDPA forced to cuDNN and to flash. A side that fails
# still leaves the other's numbers in the table; the step fails after it.
bench() {
  local dt=$1 torch_dt=float32 rc=0 cases=all paths=default backends=default
  if [ "$dt" = bf16 ]; then
    torch_dt=bfloat16 cases=all,flash paths=default,mma backends=default,cudnn,flash
  fi
  "$bin/bench_kernels" --device cuda:0 --dtype "$dt" --attention "$cases" --attention-kernels "$paths" \
    --json "$work/bench-qkvlab-$dt.json" || rc=1
  python3 -u bench/torch_kernels.py --device cuda:0 --dtype "$torch_dt" --attention "$cases" --sdpa-backends "$backends" \
    --json "$work/bench-torch-$dt.json" || rc=1
  python3 bench/compare_kernels.py "$work/bench-qkvlab-$dt.json" "$work/bench-torch-$dt.json" | tee -a "$bench_table"
  return "$rc"
}

# gpt_step VARIANT PEER-TIMEOUT: the training step of the paper's 300M GPT (experiments/lm/gpt-300m.yaml
# at --scale paper: micro-batch 6 x 2048 tokens, bf16 autocast) on cuda:0 beside PyTorch eager
# (SDPA, cuDNN's backend first) and torch.compile of the same model on the same card, in turns:
# tokens/s, MFU against the card's data-sheet peak, peak memory. A twin not ready (compiled) within
# PEER-TIMEOUT seconds, or failing, gets a line saying so; qkvlab's row prints regardless.
gpt_step() {
  "$bin/bench_gpt" --device cuda:0 --variant "$1" --steps 10 --rounds 2 --peer-timeout "$2" \
    --peers torch@python3,torch-compile@python3 | tee -a "$bench_table"
}

# The decode study: QKV, Q-K=V and Q-MQA of the 300M GPT with bf16 weights, decoding to 2048 and
# 8192 positions (32 new tokens after a prompt of 2016 or 8160) from bf16 and int8 caches, eager
# and replayed as CUDA graphs, in turns; each variant's bytes per step against its speedup, Q-K=V's
# speedup beside the byte ratios (the goal: 95% of the ideal); PyTorch's decode twin (eager, bf16)
# for QKV and Q-K=V in the same turns.
decode() {
  {
    echo "#### bench_decode (the 300M GPT, bf16 weights)"
    echo '```'
  } >>"$bench_table"
  "$bin/bench_decode" --device cuda:0 --config experiments/lm/gpt-300m.yaml --scale paper \
    --variants QKV,Q-K=V,Q-MQA --cases 1x2016,1x8160 --new-tokens 32 --precision bf16 --cache-dtype bf16,int8 \
    --modes eager,graph --peers torch@python3 --peer-variants QKV,Q-K=V --peer-timeout 30 | tee -a "$bench_table"
  local rc=${PIPESTATUS[0]}
  echo '```' >>"$bench_table"
  # The Llama block: K=V keys turned as the split-KV kernel reads them, eager and replayed.
  {
    echo "#### bench_decode (the Llama 300M, bf16 weights)"
    echo '```'
  } >>"$bench_table"
  "$bin/bench_decode" --device cuda:0 --config experiments/lm/llama-300m.yaml --scale paper \
    --variants QKV,Q-K=V --cases 1x2016 --new-tokens 32 --precision bf16 --cache-dtype bf16 \
    --modes eager,graph --no-torch | tee -a "$bench_table"
  ((rc != 0)) || rc=${PIPESTATUS[0]}
  echo '```' >>"$bench_table"
  return "$rc"
}

# `qkvlab bench decode` (the app's own study, with the variants bench_decode cannot build: a
# low-rank V residual, linear attention) with an int8 cache, 300M shapes at 2k positions.
decode_cli() {
  "$bin/qkvlab" bench decode experiments/lm/gpt-300m.yaml --scale paper \
    "sweep.variants=[Q-K=V,Q-MQA,Q-K=V+LR16,Q=K=V+linear]" --context 2048 --prompt 2016 --new-tokens 32 \
    --cache-dtype int8 --device cuda:0 | tee -a "$bench_table" || return 1
}

# The smoke runs shortened for a lease: 4096 training sequences, 2 epochs (64 steps), every
# step's loss in metrics.jsonl.
short_run=(--scale smoke "sweep.seeds=[0]" task.train_size=4096 task.val_size=256 task.test_size=512
  train.log_every=1)

# Synthetic runs on cuda:0 and on the CPU: the first 10 steps equal to 1e-4 relative, later ones
# (where summation order has had time to drift) to 1e-2 relative + 1e-3.
synthetic_runs() {
  local f dev
  for f in copy sort; do
    for dev in cuda:0 cpu; do
      "$bin/qkvlab" run "experiments/synthetic/$f.yaml" "${short_run[@]}" "sweep.variants=[QKV, Q-K=V, (Q=K=V)+]" \
        "train.device=$dev" --out "$work/synthetic-${dev%%:*}" || return 1
    done
  done
  python3 scripts/gpu_check/compare_runs.py "$work/synthetic-cuda" "$work/synthetic-cpu" --rtol 1e-4 \
    --tight-steps 10 --rtol-late 1e-2
}

# Mixed precision with head dim 64 (d_model 128, 2 heads), so the tensor-core flash kernels run:
# bf16 and fp16 (loss-scaled) runs of a plain and a (+) variant train to the end on cuda:0 with
# finite losses, the first 5 steps within 3% of the float32 CPU run's.
low_precision() {
  local p
  for p in bf16 fp16; do
    "$bin/qkvlab" run experiments/synthetic/copy.yaml "${short_run[@]}" model.d_model=128 model.heads=2 \
      task.length=80 "sweep.variants=[Q-K=V, (Q=K=V)+]" train.device=cuda:0 "train.precision=$p" \
      --out "$work/synthetic-$p" || return 1
  done
  "$bin/qkvlab" run experiments/synthetic/copy.yaml "${short_run[@]}" model.d_model=128 model.heads=2 \
    task.length=80 "sweep.variants=[Q-K=V, (Q=K=V)+]" train.device=cpu --out "$work/synthetic-f32" || return 1
  for p in bf16 fp16; do
    python3 scripts/gpu_check/compare_runs.py "$work/synthetic-$p" "$work/synthetic-f32" --rtol 3e-2 \
      --tight-steps 5 --rtol-late inf || return 1
  done
}

# The data-parallel path on one GPU: a job of one rank through NCCL equals the plain cuda run.
nccl_world_of_one() {
  "$bin/qkvlab" run experiments/synthetic/copy.yaml "${short_run[@]}" \
    "sweep.variants=[QKV, Q-K=V, (Q=K=V)+]" train.device=cuda:0 --dist-backend nccl --dist-timeout 20 \
    --out "$work/nccl" || return 1
  "$bin/qkvlab" run experiments/synthetic/copy.yaml "${short_run[@]}" "sweep.variants=[QKV, Q-K=V, (Q=K=V)+]" \
    train.device=cuda:0 --out "$work/plain-cuda" || return 1
  python3 scripts/gpu_check/compare_runs.py "$work/nccl" "$work/plain-cuda" --rtol 1e-6 --tight-steps 1000000 \
    --rtol-late 1e-6 --atol-late 0
}

# ---- the run half --------------------------------------------------------------------------------

steps=() # "name|result|seconds|what|detail"

write_summary() {
  {
    echo "# gpu-check $part ($(date -u +%FT%TZ), budget ${budget}s)"
    echo
    echo "| step | result | seconds | what | last line of its log |"
    echo "|---|---|---:|---|---|"
    local s
    for s in "${steps[@]}"; do echo "| ${s//|/ | } |"; done
  } >"$out/summary-$part.md.tmp" && mv "$out/summary-$part.md.tmp" "$out/summary-$part.md"
  # The logs, without run folders' checkpoints (only what reads as text matters here).
  tar -C "$work/.." --exclude='*.safetensors' --exclude='*.bin' -czf "$out/logs-$part.tar.gz.tmp" "$part" &&
    mv "$out/logs-$part.tar.gz.tmp" "$out/logs-$part.tar.gz"
}

# step NAME TIMEOUT WHAT FUNCTION-OR-PROGRAM ARGS...: runs it under min(TIMEOUT, what the
# deadline leaves), logs to $work/NAME.log, records the result and rewrites the summary.
step() {
  local name=$1 limit=$2 what=$3
  shift 3
  local left=$((deadline - SECONDS - 5)) start=$SECONDS result=passed rc=0 log="$work/$name.log"
  ((limit > left)) && limit=$left
  if ((limit < 10)); then
    steps+=("$name|skipped (budget)|0|$what|")
    echo "== $name: skipped (budget)"
    write_summary
    return
  fi
  echo "== $name (at most ${limit}s): $*" >"$log"
  if [ "$dry_run" = 1 ]; then
    result="dry-run (limit ${limit}s)"
    declare -F "$1" >/dev/null && declare -f "$1" >>"$log"
  else
    if declare -F "$1" >/dev/null; then set -- bash "$self" _do "$@"; fi
    timeout -k 5 "$limit" "$@" >>"$log" 2>&1 || rc=$?
    case $rc in
      0) ;;
      3) result=unavailable ;;
      124 | 137) [[ $name == *check ]] && result="incomplete (timeout)" || result="FAILED (timeout)" ;;
      *) result="FAILED (exit $rc)" ;;
    esac
  fi
  if [ "$dry_run" = 1 ]; then head -n 1 "$log"; else tail -n 3 "$log"; fi  # a dry run's log: the command, then its body
  local detail="$*"
  [ "$dry_run" = 1 ] || detail=$(grep -v '^\s*$' "$log" | tail -n 1)
  detail=$(echo "$detail" | tr -d '|' | cut -c1-140)
  steps+=("$name|$result|$((SECONDS - start))|$what|$detail")
  write_summary
}

run_check() {
  part=${1:-}
  shift || true
  budget=270 dry_run=0
  while (($#)); do
    case $1 in
      --budget) budget=$2 && shift 2 ;;
      --dry-run) dry_run=1 && shift ;;
      *) echo "gpu-check: unknown option $1" >&2 && exit 2 ;;
    esac
  done
  if [[ $part != core && $part != more ]]; then
    echo "usage: bash scripts/gpu-check.sh run core|more [--budget SECONDS] [--dry-run]" >&2
    exit 2
  fi
  deadline=$((SECONDS + budget))
  [ -f "$bundle/bundle.tar.gz" ] || {
    echo "gpu-check: $bundle/bundle.tar.gz is missing: run 'bash scripts/gpu-check.sh build' on the" \
      "development machine and carry $bundle/bundle.tar.gz" >&2
    exit 2
  }
  out=${OUT:-$PWD/$bundle/out}
  work=$PWD/$bundle/work/$part
  bench_table=$out/bench-$part.md
  rm -rf "$work" "$out/summary-$part.md" "$out/logs-$part.tar.gz" "$bench_table"
  mkdir -p "$out" "$work" "$bundle/unpacked"
  tar -C "$bundle/unpacked" -xzf "$bundle/bundle.tar.gz"
  [ "$dry_run" = 1 ] || link_machine_libraries
  bin=$PWD/$bundle/unpacked/bin
  # The benchmarks find their twins (bench/*.py) and experiment files in this checkout, and the
  # twins' own messages (a compiler's, a traceback) go to a log in the tarball.
  QKV_SOURCE_DIR=$PWD QKV_PEER_LOG=$work/peers-stderr.log
  export bin work bench_table QKV_SOURCE_DIR QKV_PEER_LOG

  step preflight 10 "GPU, driver, glibc, every program's libraries" preflight
  if [[ ${steps[0]} != *"|passed|"* && $dry_run == 0 ]]; then
    echo "gpu-check: the preflight failed; nothing else runs (see $out/summary-$part.md)"
    exit 1
  fi
  # Each part's first steps' timeouts add up to about 290 s (with the preflight), most valuable
  # first; the last steps of each run in whatever time the budget leaves.
  if [ "$part" = core ]; then
    step ops 10 "every op-table row has a CUDA kernel" every_row_has_cuda
    step harness 80 "every op on cuda:0 vs the CPU, float32 and bf16/f16" env QKV_CUDA_SYNC=1 "$bin/op_harness" --require-gpu
    step parity 50 "GPT, ResNet34, encoder, ViT, graphs: cuda:0 vs CPU" "$bin/gpu_parity" --require-gpu
    step bench_bf16 60 "bf16 GEMMs; attention (Hopper, mma.sync) vs SDPA cuDNN/flash, 2k/4k, D 64/128" bench bf16
    step memcheck 40 "compute-sanitizer memcheck, every op, small samples" sanitize memcheck 'op *,attention: bf16*'
    step racecheck 40 "compute-sanitizer racecheck, the ops that share memory" sanitize racecheck \
      'op attention,op attention_backward,op softmax,op log_softmax,op layer_norm*,op rms_norm*,op dropout_add_*,op cross_entropy,op sum,op amax,op cache_attention,attention: bf16*'
    step gpt_step_kv 110 "300M step, Q-K=V, bf16, vs PyTorch eager/compile (time left)" gpt_step Q-K=V 80
  else
    step synthetic 55 "smoke runs cuda:0 vs CPU (1e-4 first 10 steps, 1e-2 after)" synthetic_runs
    step precision 40 "bf16/fp16 runs at head dim 64 vs float32" low_precision
    step nccl 25 "one-rank NCCL job vs plain cuda:0, 1e-6" nccl_world_of_one
    step gpt_step 115 "300M step, QKV, bf16: tokens/s, MFU, memory vs PyTorch eager/compile" gpt_step QKV 90
    step decode 45 "decode QKV/Q-K=V/Q-MQA, 300M, 2k/8k, bf16/int8, eager/graph, vs PyTorch" decode
    step decode_cli 30 "qkvlab bench decode: Q-K=V, Q-MQA, +LR16, +linear, int8 (time left)" decode_cli
    step bench_f32 40 "float32 kernels beside PyTorch (time left)" bench f32
  fi

  echo
  cat "$out/summary-$part.md"
  local passed failed
  passed=$(grep -c '| passed |' "$out/summary-$part.md" || true)
  failed=$(grep -c '| FAILED' "$out/summary-$part.md" || true)
  echo
  echo "gpu-check $part: $passed passed, $failed failed, $((${#steps[@]} - passed - failed)) other (files in $out)"
  [ "$failed" -eq 0 ]
}

case "${1:-}" in
  build)
    set -e
    # Without oneDNN: the check is about CUDA, and its 40 MB library would not fit the bundle.
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DQKV_CUDA=ON -DQKV_NATIVE=OFF -DQKV_BUILD_BENCH=ON \
      -DQKV_ONEDNN=OFF "-DCMAKE_CUDA_ARCHITECTURES=80;90a" -DCMAKE_CUDA_FLAGS=-lineinfo
    cmake --build "$build" --target qkvlab op_harness gpu_parity bench_multi qkv_dist_nccl
    pack
    ;;
  pack) pack ;;
  run) shift && run_check "$@" ;;
  _do) shift && "$@" ;;
  *)
    echo "usage: bash scripts/gpu-check.sh build | pack | run core|more [--budget SECONDS] [--dry-run]" >&2
    exit 2
    ;;
esac
