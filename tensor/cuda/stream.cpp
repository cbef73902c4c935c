#include "tensor/cuda/stream.h"

#include "tensor/error.h"

namespace qkv::cuda {

namespace {
thread_local cudaStream_t t_stream = cudaStreamLegacy;
}  // namespace

cudaStream_t current_stream() { return t_stream; }
bool capturing() { return t_stream != cudaStreamLegacy; }

void refuse_while_capturing(const char* what) {
  if (capturing())
    throw DeviceError(cat(what,
                          " while a CUDA graph captures a step: a replay would not repeat it (the step must "
                          "read device memory written before replay(), and read results after it)"));
}

StreamGuard::StreamGuard(cudaStream_t stream) : previous_(t_stream) { t_stream = stream; }
StreamGuard::~StreamGuard() { t_stream = previous_; }

}  // namespace qkv::cuda
