#!/usr/bin/env bash
# Installs the Debian 12 packages qkvlab builds with, skipping those already present.
# Runs apt-get as root (or through sudo). The CUDA toolkit is not a Debian package: when nvcc
# exists under /usr/local/cuda the CUDA backend is built too, otherwise the build is CPU-only.
set -euo pipefail

packages=(
  build-essential cmake ninja-build git  # toolchain
  clang-format                           # the formatting check (scripts/check-tree.sh)
  libeigen3-dev                          # vectorized math, small and float64 GEMMs on the CPU
  libdnnl-dev                            # oneDNN: CPU GEMMs (float32, and bfloat16 on AVX512_BF16)
  nlohmann-json3-dev                     # safetensors headers
  libcli11-dev                           # the qkvlab command line
  libyaml-cpp-dev                        # experiment configuration files
  libstb-dev pkg-config                  # JPEG decoding, JPEGs in the tests (stb)
  gnuplot-nox                            # figures (PNG, SVG, PDF)
  doctest-dev                            # tests
  dataset-fashion-mnist zlib1g-dev       # Fashion-MNIST (IDX .gz in /usr/share/datasets) and gzip reading
  python3-torch libopenblas0-pthread     # parity tests and benchmarks against PyTorch (optimized BLAS)
  python3-torchvision                    # ResNet-34 parity test against torchvision
  libpcre2-dev libzstd-dev python3-regex zstd  # GPT-2 BPE regex, .zst corpora, BPE reference test
  clang libclang-rt-14-dev libomp-dev llvm    # fuzzing (scripts/fuzz.sh): libFuzzer + ASan, OpenMP, llvm-symbolizer
  openmpi-bin libopenmpi-dev              # data-parallel training across CPU processes (mpirun) and the NCCL bootstrap
  patchelf                                # the GPU check's bundle: $ORIGIN rpaths (scripts/gpu-check.sh build)
)

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
