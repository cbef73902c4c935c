#!/usr/bin/env bash
# Runs the CPU benchmarks (qkvlab beside PyTorch) and rewrites their tables in docs/PERFORMANCE.md.
#
#   bash scripts/bench-report.sh [--build DIR] [--only encoder,vit,gpt,decode] [--steps N]
#                                [--rounds R] [--new-tokens N] [--doc FILE] [--save DIR] [--from DIR]
#
# Runs DIR/bench/bench_encoder, bench_vit, bench_gpt and bench_decode (DIR: build/release), each
# once with its default cases, then writes each one's table between the marker comments
# `<!-- bench-report: NAME begin -->` and `<!-- bench-report: NAME end -->` of the page (NAME:
# encoder, vit, gpt, decode, and decode-bandwidth, the second table of the decode run), under a
# line giving the CPU (/proc/cpuinfo), the thread count and the date. Everything outside the
# markers is left as it is; the page is only written once every selected program has run.
#   --only LIST       run these benchmarks only (the other tables stay as they are)
#   --steps, --rounds handed to bench_encoder, bench_vit and bench_gpt (timed steps, turns)
#   --new-tokens      handed to bench_decode (decoded tokens per case)
#   --doc FILE        the page to rewrite (default docs/PERFORMANCE.md)
#   --save DIR        keep each program's output as DIR/bench_NAME.txt (and the machine line)
#   --from DIR        read saved outputs from DIR instead of running the programs
# With the defaults it takes several minutes on 2 cores; run it on an otherwise idle machine.
set -euo pipefail

usage() { sed -n '4,5p' "$0" | sed 's/^# *//' >&2; exit 2; }

build=""
doc=""
only=encoder,vit,gpt,decode
save=""
from=""
step_args=()
decode_args=()
while [ $# -gt 0 ]; do
  case "$1" in --build|--only|--steps|--rounds|--new-tokens|--doc|--save|--from) [ $# -ge 2 ] || { echo "bench-report: $1 needs a value" >&2; usage; } ;; esac
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    --steps|--rounds) step_args+=("$1" "$2"); shift 2 ;;
    --new-tokens) decode_args+=("$1" "$2"); shift 2 ;;
    --doc) doc="$2"; shift 2 ;;
    --save) save="$2"; shift 2 ;;
    --from) from="$2"; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
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
  case "$n" in encoder|vit|gpt|decode) ;; *) echo "bench-report: --only: unknown benchmark '$n'" >&2; exit 2 ;; esac
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
    torch=$(sed -n 3p "$from/machine.txt")
  else
    machine=$(machine_line)
    day=$(date +%Y-%m-%d)
    torch=""
  fi
else
  for n in "${names[@]}"; do
    [ -x "$build/bench/bench_$n" ] || {
      echo "bench-report: no $build/bench/bench_$n (build the release preset, or pass --build DIR)" >&2
      exit 1
    }
  done
  machine=$(machine_line)
  day=$(date +%Y-%m-%d)
  # The benchmarks' PyTorch is Debian's /usr/bin/python3; bench_decode does not print its version.
  torch=$(/usr/bin/python3 -c 'import torch; print(torch.__version__)' 2>/dev/null || true)
  for n in "${names[@]}"; do
    args=()
    case "$n" in
      encoder|vit|gpt) args=(${step_args[@]+"${step_args[@]}"}) ;;
      decode) args=(${decode_args[@]+"${decode_args[@]}"}) ;;
    esac
    echo "bench-report: bench_$n ${args[*]-}" >&2
    "$build/bench/bench_$n" ${args[@]+"${args[@]}"} | tee "$outputs/bench_$n.txt"
  done
fi
if [ -n "$save" ]; then
  mkdir -p "$save"
  cp "$outputs"/bench_*.txt "$save/"
  printf '%s\n%s\n%s\n' "$machine" "$day" "$torch" >"$save/machine.txt"
fi

# --- parsing: each function reads one program's output and prints the table rows --------------

# The PyTorch version in a program's notes ("(PyTorch 1.13.0, 2 threads, ...)"), else $torch.
torch_version() {
  local v
  v=$(grep -o '(PyTorch [^ ,)]*' "$1" | head -n 1 | sed 's/^(PyTorch //' || true)
  echo "${v:-$torch}"
}
# The thread count a program's first line gives ("..., 2 threads").
threads_of() { head -n 1 "$1" | grep -o '[0-9]* threads' | head -n 1 || true; }

# bench_encoder: "encoder training step (...), batch 128, 2 layers, 4 heads, QKV, 2 threads", then
# rows "d_model length qkvlab-ms PyTorch-ms speedup (note)", PyTorch's cells "-" when skipped.
encoder_rows() {
  awk '
    NR == 1 { match($0, /batch [0-9]+/); batch = substr($0, RSTART + 6, RLENGTH - 6)
              match($0, /[0-9]+ layers/); layers = substr($0, RSTART, RLENGTH) }
    $1 ~ /^[0-9]+$/ && NF >= 5 {
      theirs = ($4 == "-") ? "–" : $4 " ms"; ratio = ($5 == "-") ? "–" : $5
      printf "| encoder step, d %s, %s, length %s, batch %s | %s ms | %s | %s |\n", $1, layers, $2, batch, $3, theirs, ratio
    }' "$1"
}

# bench_vit: "ViT training step: d_model 64, 4 layers, 4 heads, patch 7, 28x28, batch 128, ...",
# "qkvlab <ms> ms/step ...", "PyTorch <ms> ms/step <n> images/s speedup <r>x (note)" or "PyTorch - (why)".
vit_rows() {
  awk '
    NR == 1 { match($0, /d_model [0-9]+/); d = substr($0, RSTART + 8, RLENGTH - 8)
              match($0, /[0-9]+ layers/); layers = substr($0, RSTART, RLENGTH)
              match($0, /patch [0-9]+/); patch = substr($0, RSTART, RLENGTH)
              match($0, /batch [0-9]+/); batch = substr($0, RSTART, RLENGTH) }
    $1 == "qkvlab" && $3 == "ms/step" { mine = $2 }
    $1 == "PyTorch" && $3 == "ms/step" { theirs = $2 " ms"; for (i = 4; i <= NF; ++i) if ($i == "speedup") ratio = $(i + 1) }
    END {
      if (mine == "") exit 1
      if (theirs == "") { theirs = "–"; ratio = "–" }
      printf "| ViT step, d %s, %s, %s, %s | %s ms | %s | %s |\n", d, layers, patch, batch, mine, theirs, ratio
    }' "$1"
}

# bench_gpt: the first line gives "batch 4 x 64 tokens"; rows "qkvlab fp32 <median> <best> <GFLOP/s>
# <fp32%> <bf16%>", "qkvlab bf16 ... [<r>x the fp32 step]", "PyTorch fp32 <median> <best> (note)"
# or "PyTorch fp32 - - (why)", and "speedup <median ratio>x <best ratio>x (...)".
gpt_rows() {
  awk '
    NR == 1 { match($0, /batch [0-9]+ x [0-9]+/); batch = substr($0, RSTART, RLENGTH) }
    $1 == "qkvlab" && $2 == "fp32" { f_med = $3; f_best = $4; f_share = $6 }
    $1 == "qkvlab" && $2 == "bf16" { b_med = $3; if ($9 == "the" && $10 == "fp32") b_vs = $8 }
    $1 == "PyTorch" && $2 == "fp32" && $3 != "-" { t_med = $3 }
    $1 == "speedup" { ratio = $2 }
    END {
      if (f_med == "" && b_med == "") exit 1
      if (f_med != "")
        printf "| GPT-2 124M step, %s, fp32 | %s ms (best %s ms: %s of the fp32 GEMM peak) | %s | %s |\n", batch, f_med,
               f_best, f_share, (t_med == "" ? "–" : t_med " ms"), (ratio == "" ? "–" : ratio)
      if (b_med != "")
        printf "| GPT-2 124M step, `train.precision: bf16` | %s ms%s | – | – |\n", b_med,
               (b_vs == "" ? "" : " (" b_vs " the fp32 step)")
    }' "$1"
}

# bench_decode: per case a line "batch B, prompt P, N new tokens", a header, then a row per variant:
# "variant tokens/s MB/step GB/s of-copy speedup ideal of-ideal [PyTorch-tok/s (qkvlab/PyTorch x)]".
# Mode "summary": tokens/s against PyTorch per case; mode "bandwidth": bytes per step against the ideal.
decode_rows() {
  awk -v mode="$2" -v q="'" '
    function flush(   i, names, ours, theirs, ratios, mb, rest) {
      if (n == 0) return
      if (mode == "header") { if (hn == 0) for (i = 1; i <= n; ++i) { hv[i] = v[i]; hn = n }; n = 0; return }
      names = v[1]; ours = tps[1]; theirs = tt[1]; ratios = tr[1]
      for (i = 2; i <= n; ++i) { names = names " / " v[i]; ours = ours " / " tps[i]; theirs = theirs " / " tt[i]; ratios = ratios " / " tr[i] }
      if (mode == "summary") {
        if (theirs ~ /–/) { theirs = "–"; ratios = "–" } else theirs = theirs " tokens/s"
        printf "| decode, batch %s, prompt %s, %s | %s tokens/s | %s | %s |\n", b, p, names, ours, theirs, ratios
      } else {
        mb = ""; rest = ""
        for (i = 1; i <= n; ++i) mb = mb " " mbs[i] " |"
        for (i = 2; i <= n; ++i) rest = rest " " ideal[i] " | " sp[i] " | " of[i] " |"
        printf "| %s x %s |%s%s\n", b, p, mb, rest
      }
      n = 0
    }
    /^batch [0-9]+, prompt [0-9]+,/ { flush(); b = $2; sub(/,/, "", b); p = $4; sub(/,/, "", p); incase = 1; next }
    incase && $1 != "variant" && NF >= 8 && $2 ~ /^[0-9.]+$/ {
      ++n; v[n] = $1; tps[n] = $2; mbs[n] = $3; sp[n] = $6; ideal[n] = $7; of[n] = $8
      if (NF >= 10) { tt[n] = $9; tr[n] = $10; gsub(/[()]/, "", tr[n]) } else { tt[n] = "–"; tr[n] = "–" }
    }
    /^$/ || /^MB\/step:/ { flush() }
    END {
      flush()
      if (mode == "header" && hn > 0) {
        printf "| batch x prompt |"; for (i = 1; i <= hn; ++i) printf " MB/step %s |", hv[i]
        for (i = 2; i <= hn; ++i) printf " ideal | %s%ss speedup | of ideal |", hv[i], q
        printf "\n|---|"; for (i = 1; i <= hn + 3 * (hn - 1); ++i) printf "---:|"; printf "\n"
      }
    }' "$1"
}

# --- the tables ----------------------------------------------------------------------------------

# block NAME PROGRAM-OUTPUT HEADER-LINES ROWS: writes $work/NAME.md, the text between the markers.
block() {
  local name="$1" file="$2" header="$3" rows="$4" threads
  [ -n "$rows" ] || { echo "bench-report: could not read the results in bench_${name%%-*}'s output ($file)" >&2; exit 1; }
  threads=$(threads_of "$file")
  {
    echo "Measured on $machine${threads:+, $threads}, $day (\`bench_${name%%-*}\`):"
    echo
    printf '%s\n' "$header"
    printf '%s\n' "$rows"
  } >"$work/$name.md"
}

summary_header() {
  local version
  version=$(torch_version "$1")
  printf '| benchmark | qkvlab | PyTorch%s | ratio |\n|---|---:|---:|---:|' "${version:+ $version}"
}

tables=()
for n in "${names[@]}"; do
  f="$outputs/bench_$n.txt"
  case "$n" in
    encoder) block encoder "$f" "$(summary_header "$f")" "$(encoder_rows "$f")"; tables+=(encoder) ;;
    vit) block vit "$f" "$(summary_header "$f")" "$(vit_rows "$f" || true)"; tables+=(vit) ;;
    gpt) block gpt "$f" "$(summary_header "$f")" "$(gpt_rows "$f" || true)"; tables+=(gpt) ;;
    decode)
      block decode "$f" "$(summary_header "$f")" "$(decode_rows "$f" summary)"
      block decode-bandwidth "$f" "$(decode_rows "$f" header)" "$(decode_rows "$f" bandwidth)"
      tables+=(decode decode-bandwidth) ;;
  esac
done

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
