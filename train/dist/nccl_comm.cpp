#include "train/dist/nccl_comm.h"

#include <unistd.h>

#include "train/dist/plugin_support.h"

namespace qkv::dist::plugin {

namespace {

// How often the watchdog looks while something is in flight.
constexpr auto kPoll = std::chrono::milliseconds(2);

// Makes `device` current for the scope and gives the calling thread its own device back after.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    int current = -1;
    if (cudaGetDevice(&current) == cudaSuccess && current == device) return;
    previous_ = current;
    cudaSetDevice(device);
  }
  ~DeviceScope() {
    if (previous_ >= 0) cudaSetDevice(previous_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = -1;
};

// Marks a host step over when the scope ends, however it ends.
struct StepOver {
  Watched& step;
  ~StepOver() { step.over = true; }
};

ncclDataType_t nccl_type(qkv_dist_dtype t) {
  switch (t) {
    case QKV_DIST_F32: return ncclFloat32;
    case QKV_DIST_F64: return ncclFloat64;
    case QKV_DIST_I64: return ncclInt64;
  }
  return ncclFloat32;
}

ncclRedOp_t nccl_op(qkv_dist_op op) {
  switch (op) {
    case QKV_DIST_SUM: return ncclSum;
    case QKV_DIST_MAX: return ncclMax;
    case QKV_DIST_MIN: return ncclMin;
  }
  return ncclSum;
}

std::string cuda_text(cudaError_t e) { return text(cudaGetErrorName(e), ": ", cudaGetErrorString(e)); }

std::string nccl_text(ncclResult_t r, ncclComm_t comm) {
  const char* last = ncclGetLastError(comm);
  return (last && *last) ? text(ncclGetErrorString(r), ": ", last) : std::string(ncclGetErrorString(r));
}

}  // namespace

Watched::~Watched() {
  if (done) cudaEventDestroy(done);
}

NcclComm::NcclComm(const qkv_dist_open_args& a)
    : job_(a.job),
      device_(a.device),
      timeout_seconds_(a.timeout_seconds),
      bootstrap_(a.bootstrap),
      bootstrap_comm_(a.bootstrap_comm) {}

NcclComm::~NcclComm() = default;

std::string NcclComm::failure(const std::string& what, const std::string& call, const std::string& why) const {
  return text("rank ", job_.rank, ": ", what, ": ", call, " failed on cuda:", device_, ": ", why);
}

NcclComm* NcclComm::open(const qkv_dist_open_args& args, std::string& error) {
  if (!args.bootstrap && args.job.size != 1) {
    error = text("a job of ", args.job.size, " ranks needs the mpi back end as NCCL's bootstrap");
    return nullptr;
  }
  auto* c = new NcclComm(args);
  c->thread_ = std::thread([c] { c->watchdog(); });
  error = c->setup();
  if (error.empty()) return c;
  c->close(false);
  return nullptr;
}

std::string NcclComm::setup() {
  const std::string what = text("setting up NCCL on cuda:", device_);
  std::shared_ptr<Watched> step = watch(what, nullptr);
  StepOver over{*step};
  DeviceScope scope(device_);
  cudaError_t e = cudaSetDevice(device_);
  if (e != cudaSuccess) return failure(what, "cudaSetDevice", cuda_text(e));
  if ((e = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)) != cudaSuccess)
    return failure(what, "cudaStreamCreateWithFlags", cuda_text(e));
  if ((e = cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming)) != cudaSuccess)
    return failure(what, "cudaEventCreateWithFlags", cuda_text(e));

  // Rank 0 makes the id; the bootstrap hands it to the others.
  ncclUniqueId id{};
  if (job_.rank == 0) {
    const ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) return failure(what, "ncclGetUniqueId", nccl_text(r, nullptr));
  }
  if (bootstrap_) {
    qkv_dist_error err{};
    if (bootstrap_->broadcast(bootstrap_comm_, &id, int64_t(sizeof id), 0, "the NCCL unique id", &err) != 0)
      return err.text;
  }
  ncclComm_t comm = nullptr;
  const ncclResult_t r = ncclCommInitRank(&comm, job_.size, id, job_.rank);
  if (r != ncclSuccess) return failure(what, "ncclCommInitRank", nccl_text(r, nullptr));
  std::lock_guard lock(comm_mu_);
  comm_ = comm;
  comm_live_ = true;
  return std::string();
}

std::shared_ptr<Watched> NcclComm::watch(const std::string& what, cudaEvent_t done) {
  auto w = std::make_shared<Watched>();
  w->what = what;
  w->done = done;
  w->deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_seconds_));
  {
    std::lock_guard lock(mu_);
    watched_.push_back(w);
  }
  wake_.notify_one();
  return w;
}

std::string NcclComm::all_reduce(void* data, int64_t count, qkv_dist_dtype dtype, qkv_dist_op op,
                                 const std::string& what, cudaStream_t producer, std::shared_ptr<Watched>& work) {
  std::lock_guard lock(start_mu_);
  DeviceScope scope(device_);
  cudaEvent_t done = nullptr;
  cudaError_t e = cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
  if (e != cudaSuccess) return failure(what, "cudaEventCreateWithFlags", cuda_text(e));
  // The comm stream starts after the work already queued on the producer (the gradients).
  if ((e = cudaEventRecord(ready_, producer)) != cudaSuccess ||
      (e = cudaStreamWaitEvent(stream_, ready_, 0)) != cudaSuccess) {
    cudaEventDestroy(done);
    return failure(what, "ordering the NCCL stream after the tensor's stream", cuda_text(e));
  }
  const ncclResult_t r = ncclAllReduce(data, data, size_t(count), nccl_type(dtype), nccl_op(op), comm_, stream_);
  if (r != ncclSuccess) {
    cudaEventDestroy(done);
    return failure(what, "ncclAllReduce", nccl_text(r, comm_));
  }
  if ((e = cudaEventRecord(done, stream_)) != cudaSuccess) {
    cudaEventDestroy(done);
    return failure(what, "cudaEventRecord", cuda_text(e));
  }
  work = watch(what, done);
  return std::string();
}

std::string NcclComm::order_after(const Watched& work, cudaStream_t producer) {
  DeviceScope scope(device_);
  const cudaError_t e = cudaStreamWaitEvent(producer, work.done, 0);
  return e == cudaSuccess ? std::string() : failure(work.what, "cudaStreamWaitEvent", cuda_text(e));
}

void NcclComm::watchdog() {
  cudaSetDevice(device_);  // the events below are this device's
  std::vector<std::shared_ptr<Watched>> now;
  for (;;) {
    {
      std::unique_lock lock(mu_);
      std::erase_if(watched_, [](const std::shared_ptr<Watched>& w) { return w->over.load(); });
      if (watched_.empty()) drained_.notify_all();
      if (stop_) break;
      if (watched_.empty()) wake_.wait(lock, [&] { return stop_ || !watched_.empty(); });
      else wake_.wait_for(lock, kPoll);
      if (stop_) break;
      now = watched_;
    }
    for (const auto& w : now) {
      if (w->over) continue;
      if (w->done) {
        const cudaError_t e = cudaEventQuery(w->done);
        if (e == cudaSuccess) {
          w->over = true;
          continue;
        }
        if (e != cudaErrorNotReady) fail_job(text(w->what, " failed on cuda:", device_, ": ", cuda_text(e)).c_str());
      }
      if (Clock::now() > w->deadline) fail_job(timeout_message(w->what, timeout_seconds_).c_str());
    }
    now.clear();
    // NCCL's own view: a peer that failed, a broken connection.
    std::string broken;
    {
      std::lock_guard lock(comm_mu_);
      ncclResult_t r = ncclSuccess;
      if (comm_live_ && ncclCommGetAsyncError(comm_, &r) == ncclSuccess && r != ncclSuccess && r != ncclInProgress)
        broken = text("NCCL failed on cuda:", device_, ": ", nccl_text(r, comm_));
    }
    if (!broken.empty()) fail_job(broken.c_str());
  }
}

void NcclComm::fail_job(const char* message) {
  if (failing_.exchange(true)) {
    // Another thread is already stopping the job.
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  if (message && *message) print_line(job_.rank, message);
  {
    std::lock_guard lock(comm_mu_);
    if (comm_live_) ncclCommAbort(comm_);
    comm_live_ = false;
  }
  if (bootstrap_) bootstrap_->abort(bootstrap_comm_, nullptr);
  ::_exit(1);
}

void NcclComm::close(bool clean) {
  if (clean && !failing_) {
    {
      std::unique_lock lock(mu_);
      drained_.wait(lock, [&] { return watched_.empty(); });  // the watchdog keeps the deadlines
    }
    std::shared_ptr<Watched> end = watch(text("the end of NCCL on cuda:", device_, " (ncclCommFinalize)"), nullptr);
    StepOver over{*end};
    ncclComm_t comm = nullptr;
    {
      std::lock_guard lock(comm_mu_);
      comm = comm_live_ ? comm_ : nullptr;
      comm_live_ = false;
    }
    DeviceScope scope(device_);
    if (comm) {
      ncclCommFinalize(comm);
      ncclCommDestroy(comm);
    }
  } else {
    std::lock_guard lock(comm_mu_);
    if (comm_live_) ncclCommAbort(comm_);
    comm_live_ = false;
  }
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
  {
    DeviceScope scope(device_);
    if (stream_) cudaStreamDestroy(stream_);
    if (ready_) cudaEventDestroy(ready_);
  }
  delete this;
}

}  // namespace qkv::dist::plugin
