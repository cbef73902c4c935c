// The stream qkvlab's CUDA work is issued to. Every kernel launch, cuBLASLt call, CUB call and
// asynchronous copy takes current_stream(): the legacy default stream, so that work on a device
// runs in the order it was issued (tensor/cuda/cuda_runtime.h), except while a CUDA graph
// captures a step (tensor/cuda/graph.h), when a StreamGuard points this thread at the capture's
// stream.
#pragma once
#include <cuda_runtime_api.h>

namespace qkv::cuda {

cudaStream_t current_stream();
// Whether this thread is capturing a CUDA graph (a StreamGuard is active): host reads,
// synchronisations and host-to-device copies are refused then, naming what was attempted.
bool capturing();
// Throws DeviceError when capturing(): `what` would not be part of the graph's replays.
void refuse_while_capturing(const char* what);

class StreamGuard {
 public:
  explicit StreamGuard(cudaStream_t stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  cudaStream_t previous_;
};

}  // namespace qkv::cuda
