// The nccl plugin's communicator: NCCL all-reduces of device buffers on a private stream, ordered
// against the legacy default stream every qkvlab kernel runs on, and a watchdog thread.
//
//   start: record `ready` on the producer stream -> the comm stream waits on it -> ncclAllReduce
//          on the comm stream -> record the work's `done` event
//   wait:  the producer stream waits on `done` (the host is not blocked)
//
// The watchdog polls the `done` events and ncclCommGetAsyncError. A collective past its deadline
// or an NCCL error prints "qkvlab: rank R: <what> ...", aborts the NCCL communicator (so no
// kernel spins forever on the GPU) and stops the job through the bootstrap (the mpi plugin).
// The setup (unique id, ncclCommInitRank) and the clean end (ncclCommFinalize) are watched too.
#pragma once
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "train/dist/plugin_abi.h"

namespace qkv::dist::plugin {

using Clock = std::chrono::steady_clock;

// One thing the watchdog waits for: a collective (its `done` event) or a step on the host.
struct Watched {
  std::string what;
  Clock::time_point deadline;
  cudaEvent_t done = nullptr;  // null: a host step, over when `over` is set
  std::atomic<bool> over{false};
  ~Watched();
};

class NcclComm {
 public:
  // Sets up NCCL on args.device (nullptr and `error` set when that fails).
  static NcclComm* open(const qkv_dist_open_args& args, std::string& error);

  const qkv_dist_info& info() const { return job_; }

  // Starts the all-reduce; returns "" or the error.
  std::string all_reduce(void* data, int64_t count, qkv_dist_dtype dtype, qkv_dist_op op, const std::string& what,
                         cudaStream_t producer, std::shared_ptr<Watched>& work);
  // The producer stream waits for `work`; returns "" or the error.
  std::string order_after(const Watched& work, cudaStream_t producer);

  // Prints the line (when given), aborts NCCL, stops the job. Any thread.
  [[noreturn]] void fail_job(const char* message);
  void close(bool clean);  // and deletes this

 private:
  explicit NcclComm(const qkv_dist_open_args& args);
  ~NcclComm();
  std::string setup();
  std::shared_ptr<Watched> watch(const std::string& what, cudaEvent_t done);
  void watchdog();
  std::string failure(const std::string& what, const std::string& call, const std::string& why) const;

  const qkv_dist_info job_;
  const int device_;
  const double timeout_seconds_;
  const qkv_dist_backend* const bootstrap_;
  qkv_dist_comm* const bootstrap_comm_;

  ncclComm_t comm_ = nullptr;
  bool comm_live_ = false;  // under comm_mu_: comm_ may be queried or aborted
  std::mutex comm_mu_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_ = nullptr;
  std::mutex start_mu_;  // one all-reduce is queued at a time (ready_ is shared)

  std::mutex mu_;
  std::condition_variable wake_;     // the watchdog: something to watch, or stop
  std::condition_variable drained_;  // close(): nothing left to watch
  std::vector<std::shared_ptr<Watched>> watched_;
  bool stop_ = false;
  std::atomic<bool> failing_{false};
  std::thread thread_;
};

}  // namespace qkv::dist::plugin
