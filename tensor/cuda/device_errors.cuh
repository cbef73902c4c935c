// Errors found by CUDA kernels (an index or class target out of range) without stopping the
// host: the first failing thread writes the bad value into a per-device record in pinned host
// memory mapped into the device, and the host raises the matching IndexError at the next
// synchronisation (a copy to the host, an explicit synchronize, or every op under
// QKV_CUDA_SYNC=1). Kernels that check skip the bad element instead of reading out of bounds.
#pragma once
#include <cstdint>

namespace qkv::cuda {

enum class DeviceErrorKind : int32_t { none = 0, index = 1, index_along = 2, target = 3 };

struct DeviceErrorRecord {
  int32_t flag;                           // 0 while clear; the first failing thread sets it
  int32_t kind;                           // a DeviceErrorKind
  const char* op;                         // a host string literal's address, passed in as a kernel argument
  int64_t value, position, limit, extra;  // extra: the dim (index_along) or ignore_index (target)
};

// The record of `device`, as a device pointer (allocated on first use).
DeviceErrorRecord* device_error_record(int device);

#if defined(__CUDACC__) || defined(QKV_CUDA_EMU_DEVICE)  // device code (tensor/cuda/emu/device.h)
__device__ inline void report_device_error(DeviceErrorRecord* r, DeviceErrorKind kind, const char* op, int64_t value,
                                           int64_t position, int64_t limit, int64_t extra) {
  if (atomicCAS(&r->flag, 0, 1) != 0) return;  // an earlier error is the one reported
  r->kind = int32_t(kind);
  r->op = op;
  r->value = value;
  r->position = position;
  r->limit = limit;
  r->extra = extra;
  __threadfence_system();
}
#endif

}  // namespace qkv::cuda
