#!/usr/bin/env bash
# Builds the libFuzzer targets (preset `fuzz`) and fuzzes every file reader for a bounded time:
#   scripts/fuzz.sh [--time SECONDS] [--jobs N] [TARGET...]
# (default: 20 s per target, as many targets at once as there are cores, every target of
# fuzz/targets.cmake). Each target starts from a copy of fuzz/corpus/<target> plus
# fuzz/regressions/<target>, so the checked-in corpus never grows; new inputs and crash
# reproducers go under build/fuzz/runs/<target>/. Prints one summary line per target and exits 1
# when any target crashed, leaked, ran out of memory or timed out, naming the reproducer.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=20
jobs=$(nproc)
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --time) seconds="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "usage: scripts/fuzz.sh [--time SECONDS] [--jobs N] [TARGET...]" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(sed -n 's/^ *\([a-z0-9_]*\):qkv_[a-z]*)\{0,1\}$/\1/p' fuzz/targets.cmake)
fi

bash scripts/install-deps.sh
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
start=$SECONDS
cmake --preset fuzz "${launcher[@]}" >/dev/null
cmake --build --preset fuzz
echo "fuzz: built ${#targets[@]} targets in $((SECONDS - start)) s"

runs=build/fuzz/runs
rm -rf "$runs"
# One target: fuzz a copy of its corpus; the last line of its log is its summary.
fuzz_one() {
  local t=$1 dir="$runs/$1" bin="build/fuzz/fuzz/fuzz_$1"
  mkdir -p "$dir/corpus" "$dir/artifacts"
  cp -r "fuzz/corpus/$t/." "$dir/corpus/"
  local args=("$dir/corpus")
  [ -d "fuzz/regressions/$t" ] && args+=("fuzz/regressions/$t")
  [ -f "fuzz/dicts/$t.dict" ] && args+=("-dict=fuzz/dicts/$t.dict")
  local seeds rc=0
  seeds=$(find "$dir/corpus" -type f | wc -l)
  # -close_fd_mask=1: the readers' progress lines on stdout are noise here (reports go to stderr).
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
    "$bin" "${args[@]}" -max_total_time="$seconds" -rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=25 \
    -artifact_prefix="$dir/artifacts/" -close_fd_mask=1 -print_final_stats=1 >"$dir/log" 2>&1 || rc=$?
  local execs cov found repro
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -1)
  cov=$({ grep -o 'cov: [0-9]*' "$dir/log" || true; } | tail -1 | cut -d' ' -f2)
  found=$(find "$dir/corpus" -type f | wc -l)
  repro=$(find "$dir/artifacts" -type f | head -1)
  if [ "$rc" -eq 0 ] && [ -z "$repro" ]; then
    printf 'fuzz: %-16s ok     %8s runs, coverage %5s, corpus %3s -> %s\n' "$t" "${execs:-?}" "${cov:-?}" "$seeds" "$found" \
      >>"$dir/summary"
  else
    printf 'fuzz: %-16s FAILED (exit %s) reproducer: %s\n' "$t" "$rc" "${repro:-none, see the log}" >>"$dir/summary"
    printf '        log: %s; replay: build/fuzz/fuzz/fuzz_%s %s\n' "$dir/log" "$t" "${repro:-$dir/corpus}" \
      >>"$dir/summary"
  fi
}

failed=0
running=0
for t in "${targets[@]}"; do
  [ -x "build/fuzz/fuzz/fuzz_$t" ] || { echo "fuzz: no target '$t' (see fuzz/targets.cmake)" >&2; exit 2; }
  fuzz_one "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait -n || true
    running=$((running - 1))
  fi
done
wait || true
for t in "${targets[@]}"; do
  cat "$runs/$t/summary"
  grep -q FAILED "$runs/$t/summary" && failed=1
done
if [ "$failed" -ne 0 ]; then
  echo "fuzz: a reader crashed: replay the reproducer as printed; once fixed, keep it as" \
    "fuzz/regressions/<target>/<what-it-exercises> so every test run replays it"
fi
echo "fuzz: ${#targets[@]} targets, ${seconds} s each, $((SECONDS - start)) s in all"
exit "$failed"
