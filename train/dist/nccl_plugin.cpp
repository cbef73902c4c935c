// The nccl plugin, libqkv_dist_nccl.so: the table of plugin_abi.h over nccl_comm.h. Device
// all-reduces only; host collectives go through its bootstrap in the main program.
#include <exception>
#include <memory>

#include "train/dist/nccl_comm.h"
#include "train/dist/plugin_abi.h"
#include "train/dist/plugin_support.h"

namespace qkv::dist::plugin {

namespace {

struct NcclWork {
  NcclComm* comm;
  std::shared_ptr<Watched> watched;
  cudaStream_t producer;
  bool waited = false;
};

NcclComm* comm_of(qkv_dist_comm* c) { return reinterpret_cast<NcclComm*>(c); }
const NcclComm* comm_of(const qkv_dist_comm* c) { return reinterpret_cast<const NcclComm*>(c); }
NcclWork* work_of(qkv_dist_work* w) { return reinterpret_cast<NcclWork*>(w); }

qkv_dist_comm* open_comm(const qkv_dist_open_args* args, qkv_dist_error* error) {
  try {
    std::string why;
    NcclComm* c = NcclComm::open(*args, why);
    if (!c) fail(error, why);
    return reinterpret_cast<qkv_dist_comm*>(c);
  } catch (const std::exception& e) {
    fail(error, text("cannot start NCCL: ", e.what()));
    return nullptr;
  }
}

void info(const qkv_dist_comm* comm, qkv_dist_info* out) { *out = comm_of(comm)->info(); }

int all_reduce_start(qkv_dist_comm* comm, void* data, int64_t count, qkv_dist_dtype dtype, qkv_dist_op op,
                     const char* what, void* stream, qkv_dist_work** work, qkv_dist_error* error) {
  try {
    // NULL: the legacy default stream, where qkvlab runs every kernel (tensor/cuda/cuda_runtime.h).
    cudaStream_t producer = stream ? static_cast<cudaStream_t>(stream) : cudaStreamLegacy;
    std::shared_ptr<Watched> watched;
    const std::string e =
        comm_of(comm)->all_reduce(data, count, dtype, op, what ? what : "an all-reduce", producer, watched);
    if (!e.empty()) return fail(error, e);
    *work = reinterpret_cast<qkv_dist_work*>(new NcclWork{comm_of(comm), std::move(watched), producer});
    return 0;
  } catch (const std::exception& e) { return fail(error, e.what()); }
}

int work_wait(qkv_dist_work* work, qkv_dist_error* error) {
  NcclWork* w = work_of(work);
  if (w->waited) return 0;
  w->waited = true;
  const std::string e = w->comm->order_after(*w->watched, w->producer);
  return e.empty() ? 0 : fail(error, e);
}

void work_free(qkv_dist_work* work) {
  NcclWork* w = work_of(work);
  // Dropped unwaited: still order the stream after it, or the tensor's memory could be reused
  // by the next kernel while NCCL writes it.
  if (!w->waited) w->comm->order_after(*w->watched, w->producer);
  delete w;
}

void abort_job(qkv_dist_comm* comm, const char* message) { comm_of(comm)->fail_job(message); }

void close_comm(qkv_dist_comm* comm, int clean) { comm_of(comm)->close(clean != 0); }

const qkv_dist_backend table = {
    QKV_DIST_ABI_VERSION,
    sizeof(qkv_dist_backend),
    "nccl",
    open_comm,
    info,
    all_reduce_start,
    work_wait,
    work_free,
    nullptr,  // all_gather: through the bootstrap
    nullptr,  // broadcast
    nullptr,  // barrier
    abort_job,
    close_comm,
};

}  // namespace

}  // namespace qkv::dist::plugin

extern "C" __attribute__((visibility("default"))) const qkv_dist_backend* qkv_dist_plugin_v1(void) {
  return &qkv::dist::plugin::table;
}
