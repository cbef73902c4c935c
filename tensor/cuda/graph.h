// A CUDA graph of one step: capture() runs the step once with its work recorded instead of run,
// replay() launches the recorded work again, with the same kernels, arguments and addresses, at
// the cost of one launch. For a decode step of many small kernels this removes the per-kernel
// launch overhead that dominates at batch 1.
//
// What a captured step must respect: its allocations come from the graph's memory pool
// (tensor/memory_pool.h), so they keep their addresses and nothing else takes them; it makes no
// host synchronisation (a device-to-host read fails the capture with a DeviceError naming the
// call); every value that changes between replays (a position, a length) lives in device memory
// the step reads, written before replay(), never in a kernel argument.
#pragma once
#include <cuda_runtime_api.h>

#include <functional>

#include "tensor/memory_pool.h"

namespace qkv::cuda {

class CudaGraph {
 public:
  explicit CudaGraph(int device);
  ~CudaGraph();
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  // Records `step`: its work goes to the graph's stream in relaxed capture mode (the pool may
  // still cudaMalloc), its allocations to the graph's pool. A second capture replaces the first.
  void capture(const std::function<void()>& step);
  // Runs the recorded step on the legacy default stream, after everything issued before it.
  void replay();
  bool captured() const { return exec_ != nullptr; }
  MemoryPool& pool() { return pool_; }

 private:
  int device_;
  MemoryPool pool_;
  cudaStream_t stream_ = nullptr;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace qkv::cuda
