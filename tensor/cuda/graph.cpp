#include "tensor/cuda/graph.h"

#include "tensor/cuda/check.h"
#include "tensor/cuda/stream.h"

namespace qkv::cuda {

CudaGraph::CudaGraph(int device) : device_(device), pool_(Device(DeviceType::cuda, device)) {
  QKV_CUDA_CHECK(cudaSetDevice(device));
  QKV_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}

CudaGraph::~CudaGraph() {
  if (exec_) cudaGraphExecDestroy(exec_);
  if (graph_) cudaGraphDestroy(graph_);
  if (stream_) cudaStreamDestroy(stream_);
}

void CudaGraph::capture(const std::function<void()>& step) {
  QKV_CUDA_CHECK(cudaSetDevice(device_));
  if (exec_) QKV_CUDA_CHECK(cudaGraphExecDestroy(exec_));
  if (graph_) QKV_CUDA_CHECK(cudaGraphDestroy(graph_));
  exec_ = nullptr;
  graph_ = nullptr;
  {
    PoolScope pool(pool_);
    StreamGuard on(stream_);
    QKV_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed));
    try {
      step();
    } catch (...) {  // end the capture, drop what it recorded, report the step's error
      cudaGraph_t partial = nullptr;
      cudaStreamEndCapture(stream_, &partial);
      if (partial) cudaGraphDestroy(partial);
      cudaGetLastError();
      throw;
    }
    QKV_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph_));
  }
  QKV_CUDA_CHECK(cudaGraphInstantiate(&exec_, graph_, 0));
}

void CudaGraph::replay() {
  check<ValueError>(exec_ != nullptr, "cuda graph: replay() before capture()");
  QKV_CUDA_CHECK(cudaSetDevice(device_));
  QKV_CUDA_CHECK(cudaGraphLaunch(exec_, cudaStreamLegacy));
}

}  // namespace qkv::cuda
