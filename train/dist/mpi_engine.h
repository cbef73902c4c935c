// The mpi plugin's communication thread. It owns every MPI call of the process: it initializes
// MPI (MPI_THREAD_SERIALIZED requested, so MPI_Init and MPI_Finalize run on the same thread),
// starts each posted collective as its non-blocking form (MPI_Iallreduce, MPI_Iallgather,
// MPI_Ibcast, MPI_Ibarrier) in the order posted, and polls MPI_Testall, which is also what drives
// MPI's progress. Any thread may post and wait.
//
// Every collective has a deadline, the timeout after it was posted. The first one to pass it
// prints "qkvlab: rank R: <what> did not finish within N s: ..." and MPI_Aborts the job; that
// is what turns a dead or stalled rank into an error instead of a hang.
#pragma once
#include <mpi.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "train/dist/plugin_abi.h"

namespace qkv::dist::plugin {

using Clock = std::chrono::steady_clock;

// One collective, from the thread that posts it to the communication thread and back.
struct MpiTask {
  enum class Kind { all_reduce, all_gather, broadcast, barrier };
  Kind kind = Kind::barrier;
  void* data = nullptr;        // in place (all_reduce, broadcast) or the receive buffer (all_gather)
  const void* send = nullptr;  // all_gather
  int64_t count = 0;           // elements of `type`
  MPI_Datatype type = MPI_BYTE;
  MPI_Op op = MPI_SUM;
  int root = 0;
  std::string what;

  // Set under the engine's mutex.
  Clock::time_point deadline;
  bool done = false;
  std::string error;  // empty: it succeeded

  // The communication thread's own.
  std::vector<MPI_Request> requests;
  std::string start_error;  // it could not be started
};

class MpiEngine {
 public:
  // Starts the thread and waits for MPI to be initialized; nullptr with `error` set when it failed.
  static std::unique_ptr<MpiEngine> start(double timeout_seconds, std::string& error);
  ~MpiEngine();

  const qkv_dist_info& info() const { return info_; }

  void post(const std::shared_ptr<MpiTask>& task);
  // Blocks until the task is done; its `error` says how it went.
  void wait(MpiTask& task);
  // post + wait; returns the task's error.
  std::string run(const std::shared_ptr<MpiTask>& task);

  [[noreturn]] void abort(const char* message);
  void close(bool clean);

 private:
  explicit MpiEngine(double timeout_seconds) : timeout_seconds_(timeout_seconds) {}
  void main();
  bool initialize();
  void start_task(MpiTask& task);
  bool test_task(MpiTask& task);  // true when done (or failed)
  void finish(MpiTask& task, std::string error);
  std::string mpi_error(int code, const std::string& what) const;
  [[noreturn]] void timed_out(const MpiTask& task);

  const double timeout_seconds_;
  qkv_dist_info info_{};
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::thread thread_;

  std::mutex mu_;
  std::condition_variable wake_;  // the communication thread: work, stop or abort
  std::condition_variable done_;  // the waiters: a task finished, init or shutdown done
  std::deque<std::shared_ptr<MpiTask>> queue_;
  bool initialized_ = false;
  std::string init_error_;
  bool stop_ = false, clean_ = false, abort_ = false, finished_ = false;
  bool finalizing_ = false;
  int waiters_ = 0;  // callers blocked in wait(): the thread then polls without pausing
  Clock::time_point finalize_started_;
};

}  // namespace qkv::dist::plugin
