#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "kernels/cuda/attention/hopper/hopper_attention.h"
#include "kernels/cuda/attention/hopper/tensor_maps.h"
#include "tensor/cuda/check.h"

namespace qkv::kernels::cuda {
namespace {

// Whether device `index` is a compute capability 9.0 device (asked once per device).
bool hopper_device(int index) {
  static std::mutex mu;
  static std::vector<int> known;  // -1 unknown, 0 no, 1 yes
  std::lock_guard<std::mutex> lock(mu);
  if (size_t(index) >= known.size()) known.resize(size_t(index) + 1, -1);
  if (known[size_t(index)] < 0) {
    int major = 0, minor = 0;
    QKV_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, index));
    QKV_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, index));
    known[size_t(index)] = major == 9 && minor == 0 ? 1 : 0;
  }
  return known[size_t(index)] == 1;
}

// QKV_ATTENTION_KERNELS=mma: the mma.sync kernels also where the Hopper ones could run (read at
// each call, so a benchmark or a test can compare both in one process).
bool mma_requested() {
  const char* v = std::getenv("QKV_ATTENTION_KERNELS");
  return v != nullptr && std::strcmp(v, "mma") == 0;
}

}  // namespace

bool hopper_attention_supports(const Tensor& q, const Tensor& k, const Tensor& v) {
#ifndef QKV_HOPPER_KERNELS  // this build has no sm_90a code
  return false;
#endif
  if (q.dtype() != DType::bf16 && q.dtype() != DType::f16) return false;
  const int64_t D = q.size(3);
  if ((D != 64 && D != 128) || v.size(3) != D || k.dtype() != q.dtype() || v.dtype() != q.dtype()) return false;
  if (!hopper::mappable(q) || !hopper::mappable(k) || !hopper::mappable(v)) return false;
  return !mma_requested() && hopper_device(q.device().index);
}

}  // namespace qkv::kernels::cuda
