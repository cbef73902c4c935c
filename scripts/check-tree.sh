#!/usr/bin/env bash
# The source-tree checks CI runs besides the tests: every C++/CUDA file is formatted as
# .clang-format says (clang-format 14, Debian's), no source file is longer than 600 lines
# (a longer file does more than one job: split it), and no file outside cuda_emu/ includes the
# emulated device's headers (an emulated build gives them to the .cu files through one CMake
# switch: cmake/cuda.cmake). Prints what to fix; exits 1 if anything is.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh >/dev/null
mapfile -t files < <(git ls-files '*.h' '*.cpp' '*.cu' '*.cuh')
failed=0

unformatted=$({ clang-format --dry-run --Werror "${files[@]}" 2>&1 || true; } |
              sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error:.*/\1/p' | sort -u)
if [ -n "$unformatted" ]; then
  echo "check-tree: not formatted with .clang-format (fix with: clang-format -i FILE...):"
  echo "$unformatted" | sed 's/^/  /'
  failed=1
fi

long=$(for f in "${files[@]}"; do n=$(wc -l <"$f"); [ "$n" -le 600 ] || echo "$f ($n lines)"; done)
if [ -n "$long" ]; then
  echo "check-tree: source files over 600 lines (split each by job):"
  echo "$long" | sed 's/^/  /'
  failed=1
fi

emulator=$(grep -ln '#include "cuda_emu/' "${files[@]}" | grep -v '^cuda_emu/' || true)
if [ -n "$emulator" ]; then
  echo "check-tree: files outside cuda_emu/ that include its headers (mark them emulated sources instead):"
  echo "$emulator" | sed 's/^/  /'
  failed=1
fi

[ "$failed" -eq 0 ] && echo "check-tree: ${#files[@]} source files formatted, none over 600 lines, the emulator included by none"
exit "$failed"
