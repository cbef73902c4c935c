// The mpi plugin, libqkv_dist_mpi.so: the table of plugin_abi.h over the communication thread of
// mpi_engine.h. Host memory only (CPU tensors, host values); no exception crosses the C table.
#include <climits>
#include <exception>
#include <memory>

#include "train/dist/mpi_engine.h"
#include "train/dist/plugin_abi.h"
#include "train/dist/plugin_support.h"

namespace qkv::dist::plugin {

namespace {

struct MpiWork {
  MpiEngine* engine;
  std::shared_ptr<MpiTask> task;
};

MpiEngine* engine_of(qkv_dist_comm* c) { return reinterpret_cast<MpiEngine*>(c); }
const MpiEngine* engine_of(const qkv_dist_comm* c) { return reinterpret_cast<const MpiEngine*>(c); }
MpiWork* work_of(qkv_dist_work* w) { return reinterpret_cast<MpiWork*>(w); }

MPI_Datatype mpi_type(qkv_dist_dtype t) {
  switch (t) {
    case QKV_DIST_F32: return MPI_FLOAT;
    case QKV_DIST_F64: return MPI_DOUBLE;
    case QKV_DIST_I64: return MPI_INT64_T;
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op mpi_op(qkv_dist_op op) {
  switch (op) {
    case QKV_DIST_SUM: return MPI_SUM;
    case QKV_DIST_MAX: return MPI_MAX;
    case QKV_DIST_MIN: return MPI_MIN;
  }
  return MPI_OP_NULL;
}

std::shared_ptr<MpiTask> task(MpiTask::Kind kind, const char* what) {
  auto t = std::make_shared<MpiTask>();
  t->kind = kind;
  t->what = what ? what : "a collective";
  return t;
}

// Every entry point: a C++ exception (out of memory) becomes the error text.
template <class F> int guarded(qkv_dist_error* error, F&& f) {
  try {
    return f();
  } catch (const std::exception& e) { return fail(error, e.what()); }
}

qkv_dist_comm* open_comm(const qkv_dist_open_args* args, qkv_dist_error* error) {
  try {
    std::string why;
    std::unique_ptr<MpiEngine> e = MpiEngine::start(args->timeout_seconds, why);
    if (!e) {
      fail(error, why);
      return nullptr;
    }
    return reinterpret_cast<qkv_dist_comm*>(e.release());
  } catch (const std::exception& e) {
    fail(error, text("cannot start MPI: ", e.what()));
    return nullptr;
  }
}

void info(const qkv_dist_comm* comm, qkv_dist_info* out) { *out = engine_of(comm)->info(); }

int all_reduce_start(qkv_dist_comm* comm, void* data, int64_t count, qkv_dist_dtype dtype, qkv_dist_op op,
                     const char* what, void* /*stream*/, qkv_dist_work** work, qkv_dist_error* error) {
  return guarded(error, [&] {
    auto t = task(MpiTask::Kind::all_reduce, what);
    t->data = data;
    t->count = count;
    t->type = mpi_type(dtype);
    t->op = mpi_op(op);
    auto w = std::make_unique<MpiWork>(MpiWork{engine_of(comm), t});
    engine_of(comm)->post(t);
    *work = reinterpret_cast<qkv_dist_work*>(w.release());
    return 0;
  });
}

int work_wait(qkv_dist_work* work, qkv_dist_error* error) {
  MpiWork* w = work_of(work);
  w->engine->wait(*w->task);
  return w->task->error.empty() ? 0 : fail(error, w->task->error);
}

void work_free(qkv_dist_work* work) {
  MpiWork* w = work_of(work);
  w->engine->wait(*w->task);  // MPI may still be writing the buffer
  delete w;
}

// A blocking collective: posted to the MPI thread, waited for, its error reported.
int run_blocking(qkv_dist_comm* comm, const std::shared_ptr<MpiTask>& t, qkv_dist_error* error) {
  const std::string e = engine_of(comm)->run(t);
  return e.empty() ? 0 : fail(error, e);
}

int all_gather(qkv_dist_comm* comm, const void* mine, int64_t bytes, void* all, const char* what,
               qkv_dist_error* error) {
  return guarded(error, [&] {
    const int rank = engine_of(comm)->info().rank;
    if (bytes > INT_MAX)
      return fail(error, text("rank ", rank, ": ", what, ": ", bytes, " bytes per rank, more than the 2 GiB one MPI ",
                              "all-gather takes"));
    auto t = task(MpiTask::Kind::all_gather, what);
    t->send = mine;
    t->data = all;
    t->count = bytes;
    return run_blocking(comm, t, error);
  });
}

int broadcast(qkv_dist_comm* comm, void* data, int64_t bytes, int root, const char* what, qkv_dist_error* error) {
  return guarded(error, [&] {
    auto t = task(MpiTask::Kind::broadcast, what);
    t->data = data;
    t->count = bytes;
    t->root = root;
    return run_blocking(comm, t, error);
  });
}

int barrier(qkv_dist_comm* comm, const char* what, qkv_dist_error* error) {
  return guarded(error, [&] { return run_blocking(comm, task(MpiTask::Kind::barrier, what), error); });
}

void abort_job(qkv_dist_comm* comm, const char* message) { engine_of(comm)->abort(message); }

void close_comm(qkv_dist_comm* comm, int clean) {
  MpiEngine* e = engine_of(comm);
  e->close(clean != 0);
  delete e;
}

const qkv_dist_backend table = {
    QKV_DIST_ABI_VERSION,
    sizeof(qkv_dist_backend),
    "mpi",
    open_comm,
    info,
    all_reduce_start,
    work_wait,
    work_free,
    all_gather,
    broadcast,
    barrier,
    abort_job,
    close_comm,
};

}  // namespace

}  // namespace qkv::dist::plugin

extern "C" __attribute__((visibility("default"))) const qkv_dist_backend* qkv_dist_plugin_v1(void) {
  return &qkv::dist::plugin::table;
}
