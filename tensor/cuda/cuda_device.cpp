// CUDA devices: discovery, opening a device (a busy one is an error that says so),
// synchronisation that reports what went wrong on the device, the device-error records, the
// QKV_CUDA_SYNC switch and the events QKV_PROFILE times ops with.
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "tensor/cuda/check.h"
#include "tensor/cuda/cuda_runtime.h"
#include "tensor/cuda/device_errors.cuh"
#include "tensor/cuda/stream.h"
#include "tensor/device.h"
#include "tensor/index_errors.h"

namespace qkv {

bool cuda_compiled() { return true; }

std::string device_name(const Device& d) {
  if (d.is_cpu()) return "cpu";
  cudaDeviceProp prop{};
  QKV_CUDA_CHECK(cudaGetDeviceProperties(&prop, d.index));
  return prop.name;
}

int cuda_device_count() {
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();  // no driver or no device: clear the error, report zero
      return 0;
    }
    return n;
  }();
  return count;
}

namespace cuda {

namespace {

bool env_on(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::strcmp(v, "0") != 0;
}

// A CUDA error that is not the caller's fault is sticky: the context is lost and every later
// call fails the same way. Say so, and how to find the op that caused it.
[[noreturn]] void throw_device_failure(cudaError_t err, int device, const char* after) {
  std::string where = after ? cat(" after op '", after, "'") : std::string();
  std::string hint = sync_after_each_op() ? std::string()
                                          : std::string(
                                                " (kernels run asynchronously: run with QKV_CUDA_SYNC=1 to "
                                                "stop at the op that failed)");
  throw DeviceError(
      cat("CUDA error on cuda:", device, where, ": ", cudaGetErrorName(err), ": ", cudaGetErrorString(err), hint));
}

struct ErrorRecords {
  std::mutex mu;
  std::vector<DeviceErrorRecord*> host;  // per device: the mapped record's host address
  std::vector<DeviceErrorRecord*> dev;   // and its device address
};
ErrorRecords& records() {
  static auto* r = new ErrorRecords();  // never destroyed: kernels may use it until exit
  return *r;
}

// Raises the error a kernel recorded on `device`, clearing the record first.
void raise_recorded_error(int device) {
  ErrorRecords& r = records();
  DeviceErrorRecord* rec = nullptr;
  {
    std::lock_guard lock(r.mu);
    if (size_t(device) < r.host.size()) rec = r.host[size_t(device)];
  }
  if (!rec) return;
  volatile DeviceErrorRecord* v = rec;
  if (v->flag == 0) return;
  const DeviceErrorRecord e{v->flag, v->kind, v->op, v->value, v->position, v->limit, v->extra};
  v->flag = 0;
  switch (DeviceErrorKind(e.kind)) {
    case DeviceErrorKind::index: throw index_out_of_range(e.op, e.value, e.position, e.limit);
    case DeviceErrorKind::index_along: throw index_out_of_range_along(e.op, e.value, e.limit, e.extra);
    case DeviceErrorKind::target: throw target_out_of_range(e.value, e.position, e.limit, e.extra);
    case DeviceErrorKind::none: break;
  }
  throw DeviceError(cat("CUDA kernel reported an unknown error kind ", e.kind, " on cuda:", device));
}

}  // namespace

void open_device(int device, const char* what) {
  static std::mutex mu;
  static std::vector<bool> opened;
  std::lock_guard lock(mu);
  if (size_t(device) < opened.size() && opened[size_t(device)]) return;
  cudaError_t err = cudaSetDevice(device);
  if (err == cudaSuccess) err = cudaFree(nullptr);  // creates the context
  if (err != cudaSuccess) {
    cudaGetLastError();
    const bool busy = err == cudaErrorDevicesUnavailable;
    throw DeviceError(cat(what, ": cannot use cuda:", device, ": ", cudaGetErrorString(err),
                          busy ? " (the GPU is in exclusive compute mode and another process holds it, or it is "
                                 "prohibited; see nvidia-smi)"
                               : ""));
  }
  if (opened.size() <= size_t(device)) opened.resize(size_t(device) + 1, false);
  opened[size_t(device)] = true;
}

DeviceErrorRecord* device_error_record(int device) {
  ErrorRecords& r = records();
  std::lock_guard lock(r.mu);
  if (r.dev.size() <= size_t(device)) {
    r.dev.resize(size_t(device) + 1, nullptr);
    r.host.resize(size_t(device) + 1, nullptr);
  }
  if (!r.dev[size_t(device)]) {
    QKV_CUDA_CHECK(cudaSetDevice(device));
    void* host = nullptr;
    QKV_CUDA_CHECK(cudaHostAlloc(&host, sizeof(DeviceErrorRecord), cudaHostAllocMapped));
    std::memset(host, 0, sizeof(DeviceErrorRecord));
    void* dev = nullptr;
    QKV_CUDA_CHECK(cudaHostGetDevicePointer(&dev, host, 0));
    r.host[size_t(device)] = static_cast<DeviceErrorRecord*>(host);
    r.dev[size_t(device)] = static_cast<DeviceErrorRecord*>(dev);
  }
  return r.dev[size_t(device)];
}

void synchronize(int device, const char* after) {
  refuse_while_capturing("a device synchronisation");
  count_host_sync();
  QKV_CUDA_CHECK(cudaSetDevice(device));
  const cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) throw_device_failure(err, device, after);
  raise_recorded_error(device);
}

void memcpy_d2h(void* dst, const void* src, size_t bytes, int device) {
  refuse_while_capturing("a device-to-host read");
  count_host_sync();
  QKV_CUDA_CHECK(cudaSetDevice(device));
  const cudaError_t err = cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost);
  if (err != cudaSuccess) throw_device_failure(err, device, nullptr);
  raise_recorded_error(device);
}

void memcpy_d2d(void* dst, int dst_device, const void* src, int src_device, size_t bytes) {
  refuse_while_capturing("a copy between devices");
  QKV_CUDA_CHECK(cudaMemcpyPeer(dst, dst_device, src, src_device, bytes));
}

bool sync_after_each_op() {
  static const bool on = env_on("QKV_CUDA_SYNC");
  return on && !capturing();  // a captured step runs later: nothing to check per op
}

void* record_event(int device) {
  QKV_CUDA_CHECK(cudaSetDevice(device));
  cudaEvent_t e = nullptr;
  QKV_CUDA_CHECK(cudaEventCreate(&e));
  QKV_CUDA_CHECK(cudaEventRecord(e, current_stream()));
  return e;
}
float elapsed_ms(void* start, void* stop) {
  QKV_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(stop)));
  float ms = 0;
  QKV_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start), static_cast<cudaEvent_t>(stop)));
  return ms;
}
void destroy_event(void* event) { cudaEventDestroy(static_cast<cudaEvent_t>(event)); }

}  // namespace cuda
}  // namespace qkv
