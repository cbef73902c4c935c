// The CUDA runtime API for the emulated device (QKV_CUDA_EMU builds link this instead of
// libcudart): one device, cuda:0, with compute capability 9.0, whose memory is the arena of
// cuda_emu/device_memory.h (the host cannot touch it; copies go through cudaMemcpy, as on a GPU).
// Kernels run when they are launched (cuda_emu/launch.cpp), so streams and events only keep
// order that already holds; a stream that captures a graph records launches and asynchronous
// copies instead, and a graph's launch runs them again. The driver entry point qkvlab asks the
// runtime for, cuTensorMapEncodeTiled, is the emulator's (cuda_emu/tensor_copy.h). Only the calls
// qkvlab makes are here.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "cuda_emu/device_memory.h"
#include "cuda_emu/tensor_copy.h"

namespace qkv::cuda_emu {
namespace {

struct State {
  std::mutex mu;
  std::map<const void*, unsigned> host;  // cudaHostAlloc: pointer -> flags
  std::map<cudaStream_t, std::vector<std::function<void()>>> captures;
  std::map<const void*, int> max_shared;
  cudaError_t last_error = cudaSuccess;
};
State& state() {
  static State* s = new State();  // never destroyed: allocations may be freed during exit
  return *s;
}

struct Event {
  std::chrono::steady_clock::time_point at;
};
struct Graph {
  std::vector<std::function<void()>> work;
};

}  // namespace

std::vector<std::function<void()>>* capture_of(cudaStream_t stream) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.captures.find(stream);
  return it == s.captures.end() ? nullptr : &it->second;
}

void set_launch_error(cudaError_t e) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.last_error == cudaSuccess) s.last_error = e;
}

int max_dynamic_shared(const void* kernel) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.max_shared.find(kernel);
  return it == s.max_shared.end() ? 0 : it->second;
}

}  // namespace qkv::cuda_emu

using qkv::cuda_emu::state;

extern "C" {

// ---- device ---------------------------------------------------------------------------------

cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : cudaErrorInvalidDevice; }
cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device != 0) return cudaErrorInvalidDevice;
  *prop = cudaDeviceProp{};
  std::strncpy(prop->name, "qkvlab emulated CUDA device (CPU)", sizeof(prop->name) - 1);
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = 4;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->sharedMemPerBlock = size_t(48) << 10;
  prop->sharedMemPerBlockOptin = size_t(227) << 10;
  prop->totalGlobalMem = size_t(8) << 30;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (device != 0) return cudaErrorInvalidDevice;
  switch (attr) {
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = 227 << 10; return cudaSuccess;
    case cudaDevAttrMultiProcessorCount: *value = 4; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMajor: *value = 9; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor: *value = 0; return cudaSuccess;
    default: return cudaErrorInvalidValue;
  }
}

// The driver entry points qkvlab asks for: the emulator's own.
cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** fn, unsigned int, unsigned long long,
                                             cudaDriverEntryPointQueryResult* status) {
  *fn = nullptr;
  if (std::strcmp(symbol, "cuTensorMapEncodeTiled") == 0)
    *fn = reinterpret_cast<void*>(&qkv::cuda_emu::encode_tensor_map_tiled);
  if (status) *status = *fn ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
  return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) return cudaSuccess;
  if (value < 0 || value > (227 << 10)) return cudaErrorInvalidValue;
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.max_shared[func] = value;
  return cudaSuccess;
}

// ---- errors ---------------------------------------------------------------------------------

cudaError_t cudaGetLastError() {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  const cudaError_t e = s.last_error;
  s.last_error = cudaSuccess;
  return e;
}

const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    default: return "cudaErrorUnknown";
  }
}
const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    default: return "unknown error (emulated device)";
  }
}

// ---- memory ---------------------------------------------------------------------------------

cudaError_t cudaMalloc(void** p, size_t bytes) {
  *p = nullptr;
  if (bytes == 0) return cudaSuccess;
  *p = qkv::cuda_emu::device_allocate(bytes);
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFree(void* p) {
  if (!p) return cudaSuccess;  // also what creates a context
  return qkv::cuda_emu::device_free(p) ? cudaSuccess : cudaErrorInvalidValue;
}
cudaError_t cudaHostAlloc(void** p, size_t bytes, unsigned int flags) {
  *p = std::malloc(bytes ? bytes : 1);
  if (!*p) return cudaErrorMemoryAllocation;
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.host[*p] = flags;
  if (flags & cudaHostAllocMapped) qkv::cuda_emu::register_mapped_host(*p, bytes);
  return cudaSuccess;
}
cudaError_t cudaFreeHost(void* p) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.host.find(p);
  if (it == s.host.end()) return cudaErrorInvalidValue;
  if (it->second & cudaHostAllocMapped) qkv::cuda_emu::unregister_mapped_host(p);
  s.host.erase(it);
  std::free(p);
  return cudaSuccess;
}
cudaError_t cudaHostGetDevicePointer(void** device, void* host, unsigned int) {
  *device = host;
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind) {
  const qkv::cuda_emu::DeviceAccess access;
  if (bytes) std::memmove(dst, src, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemset(void* dst, int value, size_t bytes) {
  const qkv::cuda_emu::DeviceAccess access;
  if (bytes) std::memset(dst, value, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
  if (auto* graph = qkv::cuda_emu::capture_of(stream)) {
    graph->push_back([=] { cudaMemcpy(dst, src, bytes, kind); });
    return cudaSuccess;
  }
  return cudaMemcpy(dst, src, bytes, kind);
}
cudaError_t cudaMemcpyPeer(void* dst, int, const void* src, int, size_t bytes) {
  return cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice);
}

// ---- streams, events, graphs ----------------------------------------------------------------

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int) {
  *stream = reinterpret_cast<cudaStream_t>(new char(0));
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  delete reinterpret_cast<char*>(stream);
  return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned int) { return cudaSuccess; }

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode) {
  if (stream == nullptr || stream == cudaStreamLegacy) return cudaErrorStreamCaptureUnsupported;
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.captures.emplace(stream, std::vector<std::function<void()>>{}).second) return cudaErrorIllegalState;
  return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.captures.find(stream);
  if (it == s.captures.end()) return cudaErrorIllegalState;
  *graph = reinterpret_cast<cudaGraph_t>(new qkv::cuda_emu::Graph{std::move(it->second)});
  s.captures.erase(it);
  return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  *exec = reinterpret_cast<cudaGraphExec_t>(new qkv::cuda_emu::Graph(*reinterpret_cast<qkv::cuda_emu::Graph*>(graph)));
  return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t) {
  for (const auto& work : reinterpret_cast<qkv::cuda_emu::Graph*>(exec)->work) work();
  return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete reinterpret_cast<qkv::cuda_emu::Graph*>(graph);
  return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete reinterpret_cast<qkv::cuda_emu::Graph*>(exec);
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  *event = reinterpret_cast<cudaEvent_t>(new qkv::cuda_emu::Event{std::chrono::steady_clock::now()});
  return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int) { return cudaEventCreate(event); }
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t) {
  reinterpret_cast<qkv::cuda_emu::Event*>(event)->at = std::chrono::steady_clock::now();
  return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t) { return cudaSuccess; }
cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  const auto d = reinterpret_cast<qkv::cuda_emu::Event*>(end)->at - reinterpret_cast<qkv::cuda_emu::Event*>(start)->at;
  *ms = std::chrono::duration<float, std::milli>(d).count();
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete reinterpret_cast<qkv::cuda_emu::Event*>(event);
  return cudaSuccess;
}

}  // extern "C"
