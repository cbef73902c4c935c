// The CUDA runtime API for the emulated device (QKV_CUDA_EMU builds link this instead of
// libcudart): one device, cuda:0, whose memory is host memory. Every cudaMalloc is an allocation
// of exactly its size (AddressSanitizer sees an overrun past it), and the registry of live
// allocations is what a launch snapshots to compare its thread orders. Kernels run when they are
// launched (tensor/cuda/emu/launch.cpp), so streams and events only keep order that already
// holds; a stream that captures a graph records launches and asynchronous copies instead, and a
// graph's launch runs them again. Only the calls qkvlab makes are here.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "tensor/cuda/emu/device_memory.h"

namespace qkv::cuda_emu {
namespace {

constexpr size_t kAlignment = 256;  // what cudaMalloc guarantees

struct State {
  std::mutex mu;
  std::map<const void*, size_t> device;       // cudaMalloc
  std::map<const void*, size_t> mapped_host;  // cudaHostAlloc with cudaHostAllocMapped
  std::map<const void*, size_t> host;         // other cudaHostAlloc
  std::map<cudaStream_t, std::vector<std::function<void()>>> captures;
  std::map<const void*, int> max_shared;
  cudaError_t last_error = cudaSuccess;
};
State& state() {
  static State* s = new State();  // never destroyed: allocations may be freed during exit
  return *s;
}

template <class F> void each_region(State& s, F f) {
  for (auto& [p, n] : s.device) f(p, n);
  for (auto& [p, n] : s.mapped_host) f(p, n);
}

struct Event {
  std::chrono::steady_clock::time_point at;
};
struct Graph {
  std::vector<std::function<void()>> work;
};

}  // namespace

MemorySnapshot snapshot_memory() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  MemorySnapshot snap;
  each_region(s, [&](const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    snap.regions.push_back({p, std::vector<unsigned char>(b, b + n)});
  });
  return snap;
}

void restore_memory(const MemorySnapshot& snap) {
  for (const auto& r : snap.regions) std::memcpy(const_cast<void*>(r.data), r.bytes.data(), r.bytes.size());
}

std::string first_difference(const MemorySnapshot& snap) {
  for (const auto& r : snap.regions) {
    const auto* now = static_cast<const unsigned char*>(r.data);
    if (std::memcmp(now, r.bytes.data(), r.bytes.size()) == 0) continue;
    for (size_t i = 0; i < r.bytes.size(); ++i)
      if (now[i] != r.bytes[i])
        return std::to_string(i) + " of a " + std::to_string(r.bytes.size()) + "-byte allocation";
  }
  return {};
}

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
    default: return cudaErrorInvalidValue;
  }
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
  if (posix_memalign(p, qkv::cuda_emu::kAlignment, bytes) != 0) {
    *p = nullptr;
    return cudaErrorMemoryAllocation;
  }
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.device[*p] = bytes;
  return cudaSuccess;
}
cudaError_t cudaFree(void* p) {
  if (!p) return cudaSuccess;  // also what creates a context
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.device.erase(p) == 0) return cudaErrorInvalidValue;
  std::free(p);
  return cudaSuccess;
}
cudaError_t cudaHostAlloc(void** p, size_t bytes, unsigned int flags) {
  *p = std::malloc(bytes ? bytes : 1);
  if (!*p) return cudaErrorMemoryAllocation;
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  ((flags & cudaHostAllocMapped) ? s.mapped_host : s.host)[*p] = bytes;
  return cudaSuccess;
}
cudaError_t cudaFreeHost(void* p) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.mapped_host.erase(p) == 0 && s.host.erase(p) == 0) return cudaErrorInvalidValue;
  std::free(p);
  return cudaSuccess;
}
cudaError_t cudaHostGetDevicePointer(void** device, void* host, unsigned int) {
  *device = host;
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind) {
  if (bytes) std::memmove(dst, src, bytes);
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
