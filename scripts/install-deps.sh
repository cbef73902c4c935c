#!/usr/bin/env bash
# Installs the Debian 12 packages qkvlab needs, skipping those already present:
#   bash scripts/install-deps.sh          everything: building and running qkvlab, its tests,
#                                         benchmarks, fuzzers and source-tree checks
#   bash scripts/install-deps.sh --app    only what building and running qkvlab needs (scripts/setup.sh)
# Runs apt-get as root (or through sudo). The CUDA toolkit is not a Debian package: when nvcc
# exists under /usr/local/cuda the CUDA backend can be built too, otherwise the build is CPU-only.
set -euo pipefail

app=(
  build-essential cmake ninja-build git  # toolchain
  libeigen3-dev                          # vectorized math, small and float64 GEMMs on the CPU
  libdnnl-dev                            # oneDNN: CPU GEMMs (float32, and bfloat16 on AVX512_BF16)
  nlohmann-json3-dev                     # safetensors headers
  libcli11-dev                           # the qkvlab command line
  libyaml-cpp-dev                        # experiment configuration files
  libstb-dev pkg-config                  # JPEG decoding (stb)
  gnuplot-nox                            # figures (PNG, SVG, PDF)
  dataset-fashion-mnist zlib1g-dev       # Fashion-MNIST (IDX .gz in /usr/share/datasets) and gzip reading
  libpcre2-dev libzstd-dev               # GPT-2 BPE regex, .zst corpora
  openmpi-bin libopenmpi-dev             # data-parallel training across processes (mpirun) and the NCCL bootstrap
)
checks=(
  clang-format                           # the formatting check (scripts/check-tree.sh)
  doctest-dev                            # tests
  python3-torch libopenblas0-pthread     # parity tests and benchmarks against PyTorch (optimized BLAS)
  python3-torchvision                    # ResNet-34 parity test against torchvision
  python3-regex zstd                     # BPE reference test, .zst test corpora
  clang libclang-rt-14-dev libomp-dev llvm  # fuzzing (scripts/fuzz.sh): libFuzzer + ASan, OpenMP, llvm-symbolizer
  patchelf                               # the GPU check's bundle: $ORIGIN rpaths (scripts/gpu-check.sh build)
  iproute2                               # the multinode tests' hosts: network namespaces, veth, tc
)

packages=("${app[@]}")
case "${1:-}" in
  --app) ;;
  "") packages+=("${checks[@]}") ;;
  *) echo "usage: scripts/install-deps.sh [--app]" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
