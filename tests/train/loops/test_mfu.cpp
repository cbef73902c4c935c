// The peak MFU is reported against (train/loops/mfu.h): configured, a known GPU's data-sheet
// dense peak for the run's precision, or a GEMM measured on the device.
#include <doctest/doctest.h>

#include "train/loops/mfu.h"

using namespace qkv;
using namespace qkv::loops;

TEST_CASE("mfu: known GPUs by product name, the more specific name first") {
  CHECK(known_peak_flops("NVIDIA H200", Precision::bf16) == doctest::Approx(989.4e12));
  CHECK(known_peak_flops("NVIDIA H100 80GB HBM3", Precision::bf16) == doctest::Approx(989.4e12));
  CHECK(known_peak_flops("NVIDIA H100 PCIe", Precision::bf16) == doctest::Approx(756.5e12));
  CHECK(known_peak_flops("NVIDIA A100-SXM4-80GB", Precision::fp32) == doctest::Approx(19.5e12));
  CHECK(known_peak_flops("NVIDIA L40S", Precision::bf16) == doctest::Approx(362.05e12));
  CHECK_FALSE(known_peak_flops("Tesla V100-SXM2-16GB", Precision::bf16).has_value());
  CHECK_FALSE(known_peak_flops("cpu", Precision::fp32).has_value());
}

TEST_CASE("mfu: a configured peak wins, and a CPU measures its float32 GEMM for either precision") {
  const PeakFlops configured = peak_flops(kCPU, Precision::bf16, 2.5);
  CHECK(configured.flops == doctest::Approx(2.5e12));
  CHECK(configured.source.find("configured") != std::string::npos);
  const PeakFlops measured = peak_flops(kCPU, Precision::bf16, 0);
  CHECK(measured.flops > 1e8);
  CHECK(measured.source == "measured float32 GEMM on cpu");
}
