#!/usr/bin/env bash
# Runs the CPU benchmarks (qkvlab beside its peers) and rewrites their tables in docs/PERFORMANCE.md.
#
#   bash scripts/bench-report.sh [--build DIR] [--only encoder,vit,gpt,decode,decode-small] [--steps N]
#                                [--rounds R] [--new-tokens N] [--peers LIST] [--doc FILE]
#                                [--save DIR] [--from DIR]
#
# Runs DIR/bench/bench_encoder, bench_vit, bench_gpt and bench_decode (DIR: build/release), each
# once with its default cases, and bench_decode again on a small GPT (decode-small: d 256, 4 layers,
# 8 heads, batch 8 x 1024), then writes each one's table between the marker comments
# `<!-- bench-report: NAME begin -->` and `<!-- bench-report: NAME end -->` of the page (NAME:
# encoder, vit, gpt, decode, decode-small, and decode-bandwidth, the second table of the decode
# run), under a line giving the CPU (/proc/cpuinfo), the thread count and the date, and under the
# marker pair `peers` the versions of every peer's interpreter (bench/peers/versions.py: Python,
# torch, jax, jaxlib, numpy). A table has a column per peer the programs ran (PyTorch 1.13 from Debian; with
# the venv of bench/peers/setup.sh, PyTorch 2 eager, torch.compile and JAX), each cell the peer's
# median with, in brackets, the peer's time over qkvlab's. Everything outside the markers is left
# as it is; the page is only written once every selected program has run.
#   --only LIST       run these benchmarks only (the other tables stay as they are)
#   --steps, --rounds handed to bench_encoder, bench_vit and bench_gpt (timed steps, turns)
#   --new-tokens      handed to bench_decode (decoded tokens per case)
#   --peers LIST      handed to every program (default: theirs, "default"; see bench/torch_runner.h)
#   --doc FILE        the page to rewrite (default docs/PERFORMANCE.md)
#   --save DIR        keep each program's output as DIR/bench_NAME.txt (and the machine line)
#   --from DIR        read saved outputs from DIR instead of running the programs
# With the defaults and every peer it takes about half an hour on 2 cores (more while torch.compile
# fills its cache) and up to 17 GB of memory (bench_decode keeps each peer's model and cache for
# both variants); run it on an idle machine.
set -euo pipefail

usage() { sed -n '4,6p' "$0" | sed 's/^# *//' >&2; exit 2; }

build=""
doc=""
only=encoder,vit,gpt,decode,decode-small
save=""
from=""
step_args=()
decode_args=()
peer_args=()
while [ $# -gt 0 ]; do
  case "$1" in --build|--only|--steps|--rounds|--new-tokens|--peers|--doc|--save|--from) [ $# -ge 2 ] || { echo "bench-report: $1 needs a value" >&2; usage; } ;; esac
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    --steps|--rounds) step_args+=("$1" "$2"); shift 2 ;;
    --new-tokens) decode_args+=("$1" "$2"); shift 2 ;;
    --peers) peer_args+=("$1" "$2"); shift 2 ;;
    --doc) doc="$2"; shift 2 ;;
    --save) save="$2"; shift 2 ;;
    --from) from="$2"; shift 2 ;;
    -h|--help) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-report: unknown argument '$1'" >&2; usage ;;
  esac
done

# Paths given on the command line are relative to where the script was called from.
root=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "$build" ]; then build=$(realpath -m "$build"); else build="$root/build/release"; fi
[ -z "$save" ] || save=$(realpath -m "$save")
[ -z "$from" ] || from=$(realpath -m "$from")
if [ -n "$doc" ]; then doc=$(realpath -m "$doc"); else doc="$root/docs/PERFORMANCE.md"; fi
[ -f "$doc" ] || { echo "bench-report: no page $doc" >&2; exit 1; }

IFS=, read -r -a names <<<"$only"
for n in "${names[@]}"; do
  case "$n" in encoder|vit|gpt|decode|decode-small) ;; *) echo "bench-report: --only: unknown benchmark '$n'" >&2; exit 2 ;; esac
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
outputs="$work/out"
mkdir -p "$outputs"

# The machine line: "Measured on CPU (N logical CPUs, AVX-512, AVX512_BF16)"; the date and the
# threads are added per table.
machine_line() {
  local model cpus flags extras=""
  model=$(sed -n 's/^model name[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo | head -n 1)
  [ -n "$model" ] || model="an unnamed CPU"
  cpus=$(grep -c '^processor' /proc/cpuinfo)
  flags=$(sed -n 's/^flags[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo | head -n 1)
  case " $flags " in *" avx512f "*) extras+=", AVX-512" ;; *" avx2 "*) extras+=", AVX2" ;; esac
  case " $flags " in *" avx512_bf16 "*) extras+=", AVX512_BF16" ;; esac
  case " $flags " in *" amx_bf16 "*) extras+=", AMX-BF16" ;; esac
  echo "$model ($cpus logical CPUs$extras)"
}

if [ -n "$from" ]; then
  for n in "${names[@]}"; do
    [ -f "$from/bench_$n.txt" ] || { echo "bench-report: --from: no $from/bench_$n.txt" >&2; exit 1; }
    cp "$from/bench_$n.txt" "$outputs/"
  done
  if [ -f "$from/machine.txt" ]; then
    machine=$(sed -n 1p "$from/machine.txt")
    day=$(sed -n 2p "$from/machine.txt")
  else
    machine=$(machine_line)
    day=$(date +%Y-%m-%d)
  fi
  [ ! -f "$from/versions.txt" ] || cp "$from/versions.txt" "$work/versions.txt"
else
  for n in "${names[@]}"; do
    [ -x "$build/bench/bench_${n%%-*}" ] || {
      echo "bench-report: no $build/bench/bench_${n%%-*} (build the release preset, or pass --build DIR)" >&2
      exit 1
    }
  done
  machine=$(machine_line)
  day=$(date +%Y-%m-%d)
  for n in "${names[@]}"; do
    args=()
    case "$n" in
      encoder|vit|gpt) args=(${step_args[@]+"${step_args[@]}"}) ;;
      decode) args=(${decode_args[@]+"${decode_args[@]}"}) ;;
      # A small GPT's decode (d 256, 4 layers, 8 heads), batch 8 after a prompt of 1024.
      decode-small) args=(--layers 4 --d-model 256 --heads 8 --cases 8x1024 ${decode_args[@]+"${decode_args[@]}"}) ;;
    esac
    args+=(${peer_args[@]+"${peer_args[@]}"})
    echo "bench-report: bench_${n%%-*} ${args[*]-}" >&2
    "$build/bench/bench_${n%%-*}" ${args[@]+"${args[@]}"} | tee "$outputs/bench_$n.txt"
  done
  # The versions of each interpreter the programs ran peers with ("peers: KIND (PYTHON), ...").
  sed -n 's/^peers: //p' "$outputs"/bench_*.txt | tr ',' '\n' | sed -n 's/^ *\([a-z-]*\) (\([^ )]*\))$/\2 \1/p' |
    sort -u | awk '{ if ($1 in kinds) kinds[$1] = kinds[$1] ", " $2; else kinds[$1] = $2 } END { for (p in kinds) print p "\t" kinds[p] }' |
    sort | while IFS=$'\t' read -r python kinds; do
      echo "- \`${python#"$root"/}\` ($kinds): $("$python" "$root/bench/peers/versions.py" </dev/null 2>/dev/null || echo "versions unknown")"
    done >"$work/versions.txt"
fi
if [ -n "$save" ]; then
  mkdir -p "$save"
  cp "$outputs"/bench_*.txt "$save/"
  printf '%s\n%s\n' "$machine" "$day" >"$save/machine.txt"
  [ ! -f "$work/versions.txt" ] || cp "$work/versions.txt" "$save/"
fi

# --- parsing: each function reads one program's output and prints its table ---------------------

# The thread count a program's first line gives ("..., 2 threads").
threads_of() { head -n 1 "$1" | grep -o '[0-9]* threads' | head -n 1 || true; }

# Contestant lines (bench/torch_session.h, print_contestant): "  NAME  PREC-OR-VARIANT  MEDIAN-MS
# BEST-MS  SPEEDUP  (NOTE)", fields two spaces or more apart, "-" where a peer did not run. The
# helpers gather the peers as columns, in the order they first appear.
contestants_awk='
  function contestant(line, f) { return split(line, f, /  +/) >= 6 && f[1] == "" && f[2] != "contestant" }
  function column(name) { if (!(name in at)) { at[name] = ++ncol; col[ncol] = name } }
  function cell(ms, speedup) { return ms == "-" ? "–" : ms " ms (" speedup ")" }
  function missing(name, what, note) { if (note != "" && !((name, what) in noted)) { noted[name, what] = 1; notes = notes "\n" name ", " what ": " note } }
  function header(first,   i, sep) {
    printf "| %s | qkvlab |", first; sep = "|---|---:|"
    for (i = 1; i <= ncol; ++i) { printf " %s |", col[i]; sep = sep "---:|" }
    print ""; print sep
  }
  function footnotes() { if (notes != "") { gsub(/\n/, "\n- ", notes); printf "\nPeers that did not run:%s\n", notes } }
  function unbracket(s) { sub(/^\(/, "", s); sub(/\)$/, "", s); return s }
'

# bench_encoder: "encoder training step (...), batch 128, 2 layers, 4 heads, QKV, 2 threads", then
# per case "d_model D, length L" and its contestant lines.
encoder_table() {
  awk "$contestants_awk"'
    NR == 1 { match($0, /batch [0-9]+/); batch = substr($0, RSTART + 6, RLENGTH - 6)
              match($0, /[0-9]+ layers/); layers = substr($0, RSTART, RLENGTH) }
    /^d_model [0-9]+, length [0-9]+$/ { ++n; d[n] = $2; sub(/,/, "", d[n]); len[n] = $4; next }
    n > 0 && contestant($0, f) {
      if (f[2] == "qkvlab") { mine[n] = f[4]; next }
      column(f[2]); ms[n, f[2]] = f[4]; sp[n, f[2]] = f[6]
      if (f[4] == "-") missing(f[2], "d " d[n], unbracket(f[7]))
    }
    END {
      if (n == 0) exit 1
      header("benchmark")
      for (i = 1; i <= n; ++i) {
        printf "| encoder step, d %s, %s, length %s, batch %s | %s ms |", d[i], layers, len[i], batch, mine[i]
        for (c = 1; c <= ncol; ++c) printf " %s |", ((i, col[c]) in ms) ? cell(ms[i, col[c]], sp[i, col[c]]) : "–"
        print ""
      }
      footnotes()
    }' "$1"
}

# bench_vit: "ViT training step: d_model 64, 4 layers, 4 heads, patch 7, 28x28, batch 128, ...",
# then the contestant lines.
vit_table() {
  awk "$contestants_awk"'
    NR == 1 { match($0, /d_model [0-9]+/); d = substr($0, RSTART + 8, RLENGTH - 8)
              match($0, /[0-9]+ layers/); layers = substr($0, RSTART, RLENGTH)
              match($0, /patch [0-9]+/); patch = substr($0, RSTART, RLENGTH)
              match($0, /batch [0-9]+/); batch = substr($0, RSTART, RLENGTH) }
    NR > 1 && contestant($0, f) {
      if (f[2] == "qkvlab") { mine = f[4]; next }
      column(f[2]); ms[f[2]] = f[4]; sp[f[2]] = f[6]
      if (f[4] == "-") missing(f[2], "fp32", unbracket(f[7]))
    }
    END {
      if (mine == "") exit 1
      header("benchmark")
      printf "| ViT step, d %s, %s, %s, %s | %s ms |", d, layers, patch, batch, mine
      for (c = 1; c <= ncol; ++c) printf " %s |", cell(ms[col[c]], sp[col[c]])
      print ""
      footnotes()
    }' "$1"
}

# bench_gpt: the first line gives "batch 4 x 64 tokens"; rows "qkvlab fp32 <median> <best> <GFLOP/s>
# <fp32%> <bf16%>", "qkvlab bf16 ... [<r>x the fp32 step]", then the peers' contestant lines, one
# per peer and precision.
gpt_table() {
  awk "$contestants_awk"'
    NR == 1 { match($0, /batch [0-9]+ x [0-9]+/); batch = substr($0, RSTART, RLENGTH) }
    $1 == "qkvlab" && $2 == "fp32" { f_med = $3; f_best = $4; f_share = $6 }
    $1 == "qkvlab" && $2 == "bf16" { b_med = $3; if ($9 == "the" && $10 == "fp32") b_vs = $8 }
    contestant($0, f) {
      column(f[2]); ms[f[2], f[3]] = f[4]; sp[f[2], f[3]] = f[6]
      if (f[4] == "-") missing(f[2], f[3], unbracket(f[7]))
    }
    function peers(p,   c) {
      for (c = 1; c <= ncol; ++c) printf " %s |", ((col[c], p) in ms) ? cell(ms[col[c], p], sp[col[c], p]) : "–"
      print ""
    }
    END {
      if (f_med == "" && b_med == "") exit 1
      header("benchmark")
      if (f_med != "") {
        printf "| GPT-2 124M step, %s, fp32 | %s ms (best %s ms: %s of the fp32 GEMM peak) |", batch, f_med, f_best, f_share
        peers("fp32")
      }
      if (b_med != "") {
        printf "| GPT-2 124M step, `train.precision: bf16` | %s ms%s |", b_med, (b_vs == "" ? "" : " (" b_vs " the fp32 step)")
        peers("bf16")
      }
      footnotes()
    }' "$1"
}

# bench_decode: per case a line "batch B, prompt P, N new tokens", a header, a row per variant
# ("variant tokens/s MB/step GB/s of-copy speedup ideal of-ideal") up to a blank line, then the
# peers' contestant lines (variant in the second field). Mode "summary": tokens/s beside the peers'
# per case; mode "bandwidth": bytes per step against the ideal.
decode_table() {
  awk -v mode="$2" -v q="'" "$contestants_awk"'
    /^batch [0-9]+, prompt [0-9]+,/ { ++n; b[n] = $2; sub(/,/, "", b[n]); p[n] = $4; sub(/,/, "", p[n]); rows = 1; next }
    /^$/ { rows = 0 }
    rows && $1 != "variant" && NF >= 8 && $2 ~ /^[0-9.]+$/ {
      k = ++nv[n]; v[n, k] = $1; tps[n, k] = $2; mbs[n, k] = $3; sp[n, k] = $6; ideal[n, k] = $7; of[n, k] = $8
    }
    n > 0 && !rows && contestant($0, f) && f[2] != "qkvlab" {
      column(f[2]); pms[n, f[2], f[3]] = f[4]; psp[n, f[2], f[3]] = f[6]
      if (f[4] == "-") missing(f[2], f[3], unbracket(f[7]))
    }
    function tokens(i, name,   k, out, ratios, ms, ran) {
      for (k = 1; k <= nv[i]; ++k) {
        ms = ((i, name, v[i, k]) in pms) ? pms[i, name, v[i, k]] : "-"
        if (ms != "-") ran = 1
        out = out (k > 1 ? " / " : "") (ms == "-" ? "–" : sprintf("%.1f", 1000 * b[i] / ms))
        ratios = ratios (k > 1 ? " / " : "") (ms == "-" ? "–" : psp[i, name, v[i, k]])
      }
      return ran ? out " tokens/s (" ratios ")" : "–"
    }
    END {
      if (n == 0) exit 1
      if (mode == "summary") {
        header("benchmark")
        for (i = 1; i <= n; ++i) {
          names = v[i, 1]; ours = tps[i, 1]
          for (k = 2; k <= nv[i]; ++k) { names = names " / " v[i, k]; ours = ours " / " tps[i, k] }
          printf "| decode, batch %s, prompt %s, %s | %s tokens/s |", b[i], p[i], names, ours
          for (c = 1; c <= ncol; ++c) printf " %s |", tokens(i, col[c])
          print ""
        }
        footnotes()
        exit 0
      }
      printf "| batch x prompt |"; for (k = 1; k <= nv[1]; ++k) printf " MB/step %s |", v[1, k]
      for (k = 2; k <= nv[1]; ++k) printf " ideal | %s%ss speedup | of ideal |", v[1, k], q
      printf "\n|---|"; for (k = 1; k <= nv[1] + 3 * (nv[1] - 1); ++k) printf "---:|"; printf "\n"
      for (i = 1; i <= n; ++i) {
        printf "| %s x %s |", b[i], p[i]
        for (k = 1; k <= nv[i]; ++k) printf " %s |", mbs[i, k]
        for (k = 2; k <= nv[i]; ++k) printf " %s | %s | %s |", ideal[i, k], sp[i, k], of[i, k]
        print ""
      }
    }' "$1"
}

# --- the tables ----------------------------------------------------------------------------------

# block NAME PROGRAM-OUTPUT TABLE: writes $work/NAME.md, the text between the markers.
block() {
  local name="$1" file="$2" table="$3" threads
  [ -n "$table" ] || { echo "bench-report: could not read the results in bench_${name%%-*}'s output ($file)" >&2; exit 1; }
  threads=$(threads_of "$file")
  {
    echo "Measured on $machine${threads:+, $threads}, $day (\`bench_${name%%-*}\`):"
    echo
    printf '%s\n' "$table"
  } >"$work/$name.md"
}

tables=()
for n in "${names[@]}"; do
  f="$outputs/bench_$n.txt"
  case "$n" in
    encoder) block encoder "$f" "$(encoder_table "$f" || true)"; tables+=(encoder) ;;
    vit) block vit "$f" "$(vit_table "$f" || true)"; tables+=(vit) ;;
    gpt) block gpt "$f" "$(gpt_table "$f" || true)"; tables+=(gpt) ;;
    decode)
      block decode "$f" "$(decode_table "$f" summary || true)"
      block decode-bandwidth "$f" "$(decode_table "$f" bandwidth || true)"
      tables+=(decode decode-bandwidth) ;;
    decode-small)
      block decode-small "$f" "$(decode_table "$f" summary | sed 's/^| decode, /| decode (d 256, 4 layers, 8 heads), /' || true)"
      tables+=(decode-small) ;;
  esac
done
if [ -f "$work/versions.txt" ]; then
  {
    echo "The peers' interpreters in the run of $day (\`bench/peers/versions.py\`; the venv: \`bench/peers/setup.sh\`):"
    echo
    cat "$work/versions.txt"
  } >"$work/peers.md"
  tables+=(peers)
fi

# --- the page: each table replaces the lines between its markers -----------------------------------

page="$work/page.md"
cp "$doc" "$page"
for t in "${tables[@]}"; do
  awk -v begin="<!-- bench-report: $t begin -->" -v end="<!-- bench-report: $t end -->" -v body="$work/$t.md" '
    $0 == begin { print; while ((getline line < body) > 0) print line; skip = 1; ++begins; next }
    $0 == end { skip = 0; ++ends }
    !skip { print }
    END { if (begins != 1 || ends != 1 || skip) exit 3 }' "$page" >"$page.new" || {
    echo "bench-report: $doc needs exactly one '<!-- bench-report: $t begin -->' ... 'end -->' pair" >&2
    exit 1
  }
  mv "$page.new" "$page"
done
tmp=$(mktemp "$(dirname "$doc")/.$(basename "$doc").XXXXXX")
cat "$page" >"$tmp"
mv "$tmp" "$doc"
echo "bench-report: rewrote ${tables[*]} in $doc" >&2
