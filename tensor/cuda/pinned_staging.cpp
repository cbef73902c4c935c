// Host-to-device copies from pinned memory, asynchronous. A copy from pageable memory makes the
// CUDA driver wait for the device first; instead the host packs the bytes into a pinned staging
// block, queues cudaMemcpyAsync on the device's stream and returns. An event recorded after the
// transfer tells when the block may take another copy, so the host never overwrites bytes still
// in flight. Large copies go through in chunks; when the pool is at its cap the host waits for
// the oldest transfer (only model loading copies that much).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <vector>

#include "tensor/cuda/check.h"
#include "tensor/cuda/cuda_runtime.h"
#include "tensor/cuda/stream.h"

namespace qkv::cuda {
namespace {

constexpr size_t kChunkBytes = size_t(16) << 20;  // one transfer's staging block at most
constexpr size_t kPoolCapBytes = size_t(256) << 20;
constexpr size_t kMinBlockBytes = size_t(64) << 10;

struct Block {
  void* host = nullptr;
  size_t bytes = 0;
  cudaEvent_t done = nullptr;  // recorded after the block's last transfer
  int device = 0;
  bool in_flight = false;
  uint64_t issued = 0;  // order of the last transfer, to wait for the oldest first
};

class StagingPool {
 public:
  void copy(char* dst, const char* src, size_t bytes, int device) {
    std::lock_guard lock(mu_);
    for (size_t at = 0; at < bytes; at += kChunkBytes) {
      const size_t n = std::min(kChunkBytes, bytes - at);
      Block& b = acquire(n, device);
      std::memcpy(b.host, src + at, n);
      QKV_CUDA_CHECK(cudaMemcpyAsync(dst + at, b.host, n, cudaMemcpyHostToDevice, nullptr));
      QKV_CUDA_CHECK(cudaEventRecord(b.done, nullptr));
      b.in_flight = true;
      b.issued = ++issued_;
    }
  }

  void release() {
    std::lock_guard lock(mu_);
    for (Block& b : blocks_) {
      if (b.in_flight) cudaEventSynchronize(b.done);
      cudaEventDestroy(b.done);
      cudaFreeHost(b.host);
    }
    blocks_.clear();
    held_ = 0;
  }

 private:
  // Whether the block's last transfer has finished (its bytes may be overwritten).
  static bool idle(Block& b) {
    if (!b.in_flight) return true;
    const cudaError_t err = cudaEventQuery(b.done);
    if (err == cudaErrorNotReady) return false;
    QKV_CUDA_CHECK(err);
    b.in_flight = false;
    return true;
  }

  Block& acquire(size_t bytes, int device) {
    Block* best = nullptr;
    for (Block& b : blocks_)
      if (b.device == device && b.bytes >= bytes && idle(b) && (!best || b.bytes < best->bytes)) best = &b;
    if (best) return *best;
    while (held_ + block_bytes(bytes) > kPoolCapBytes && wait_oldest()) {
      for (Block& b : blocks_)
        if (b.device == device && b.bytes >= bytes && idle(b)) return b;
    }
    Block b;
    b.bytes = block_bytes(bytes);
    b.device = device;
    QKV_CUDA_CHECK(cudaSetDevice(device));
    QKV_CUDA_CHECK(cudaHostAlloc(&b.host, b.bytes, cudaHostAllocDefault));
    QKV_CUDA_CHECK(cudaEventCreateWithFlags(&b.done, cudaEventDisableTiming));
    held_ += b.bytes;
    blocks_.push_back(b);
    return blocks_.back();
  }

  // Waits for the oldest transfer in flight; false when none is.
  bool wait_oldest() {
    Block* oldest = nullptr;
    for (Block& b : blocks_)
      if (b.in_flight && (!oldest || b.issued < oldest->issued)) oldest = &b;
    if (!oldest) return false;
    QKV_CUDA_CHECK(cudaEventSynchronize(oldest->done));
    oldest->in_flight = false;
    return true;
  }

  static size_t block_bytes(size_t bytes) {
    size_t b = kMinBlockBytes;
    while (b < bytes) b *= 2;
    return b;
  }

  std::mutex mu_;
  std::vector<Block> blocks_;  // a reference from acquire() is used before the next acquire()
  size_t held_ = 0;
  uint64_t issued_ = 0;
};

StagingPool& pool() {
  static auto* p = new StagingPool();  // never destroyed: copies may be in flight at exit
  return *p;
}

}  // namespace

void copy_h2d_async(void* dst, const void* src, size_t bytes, int device) {
  if (bytes == 0) return;
  refuse_while_capturing("a host-to-device copy");  // the staging block is reused before a replay
  QKV_CUDA_CHECK(cudaSetDevice(device));
  pool().copy(static_cast<char*>(dst), static_cast<const char*>(src), bytes, device);
}

void release_pinned_staging() { pool().release(); }

}  // namespace qkv::cuda
