// The C interface between qkvlab and its communication plugins (libqkv_dist_mpi.so,
// libqkv_dist_nccl.so). Nothing of qkvlab crosses it: raw buffers, element counts, an element
// type, a reduce op, C strings and an opaque stream. The plugins link no qkvlab library (their
// copies of its singletons, allocators above all, would be a second, disagreeing set); the
// wrappers in plugin_communicator.cpp turn Tensors into these buffers.
//
// A plugin exports one symbol, QKV_DIST_PLUGIN_SYMBOL, returning its table. Calls that can fail
// return 0 on success, or nonzero with the reason in `error->text` ("rank 1: <what>: ...").
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define QKV_DIST_ABI_VERSION 1
#define QKV_DIST_PLUGIN_SYMBOL "qkv_dist_plugin_v1"

typedef enum qkv_dist_dtype { QKV_DIST_F32 = 0, QKV_DIST_F64 = 1, QKV_DIST_I64 = 2 } qkv_dist_dtype;
typedef enum qkv_dist_op { QKV_DIST_SUM = 0, QKV_DIST_MAX = 1, QKV_DIST_MIN = 2 } qkv_dist_op;

typedef struct qkv_dist_comm qkv_dist_comm;  // a plugin's communicator
typedef struct qkv_dist_work qkv_dist_work;  // one started all-reduce

typedef struct qkv_dist_error {
  char text[1024];
} qkv_dist_error;

typedef struct qkv_dist_info {
  int rank, size, local_rank, local_size;
} qkv_dist_info;

struct qkv_dist_backend;

typedef struct qkv_dist_open_args {
  double timeout_seconds;  // the watchdog: longest wait for one collective
  // nccl only: the job as its bootstrap sees it, the CUDA device of this rank, and the bootstrap
  // itself (the mpi plugin) for the unique id and for stopping the job. No bootstrap: size 1.
  qkv_dist_info job;
  int device;
  const struct qkv_dist_backend* bootstrap;
  qkv_dist_comm* bootstrap_comm;
} qkv_dist_open_args;

typedef struct qkv_dist_backend {
  int abi_version;     // QKV_DIST_ABI_VERSION
  size_t struct_size;  // sizeof(qkv_dist_backend) of the plugin's build
  const char* name;    // "mpi", "nccl"

  qkv_dist_comm* (*open)(const qkv_dist_open_args* args, qkv_dist_error* error);  // NULL on failure
  void (*info)(const qkv_dist_comm* comm, qkv_dist_info* out);

  // In place over `count` elements at `data`. mpi: host memory. nccl: device memory of the
  // communicator's device, ordered after the work queued on `stream` (NULL: the device's legacy
  // default stream, which every qkvlab kernel uses). `what` is copied.
  int (*all_reduce_start)(qkv_dist_comm* comm, void* data, int64_t count, qkv_dist_dtype dtype, qkv_dist_op op,
                          const char* what, void* stream, qkv_dist_work** work, qkv_dist_error* error);
  // mpi: returns when the result is in the buffer. nccl: returns once `stream` is ordered after
  // the all-reduce, without blocking the host. May be called again (no-op).
  int (*work_wait)(qkv_dist_work* work, qkv_dist_error* error);
  void (*work_free)(qkv_dist_work* work);  // waits first when work_wait was not called

  // Host bytes; NULL in the nccl plugin (its host traffic goes through its bootstrap).
  // all_gather: `bytes` from every rank (the same count on all) into `all`, rank r's at r * bytes.
  int (*all_gather)(qkv_dist_comm* comm, const void* mine, int64_t bytes, void* all, const char* what,
                    qkv_dist_error* error);
  int (*broadcast)(qkv_dist_comm* comm, void* data, int64_t bytes, int root, const char* what, qkv_dist_error* error);
  int (*barrier)(qkv_dist_comm* comm, const char* what, qkv_dist_error* error);

  // Prints "qkvlab: rank R: <message>" (nothing when message is NULL) and stops every rank of the
  // job with exit status 1. Does not return. Callable from any thread.
  void (*abort)(qkv_dist_comm* comm, const char* message);
  // clean: all went well, so leave the job in order (MPI_Finalize). Not clean (an error is
  // unwinding): release only what this process holds, the launcher ends the others.
  void (*close)(qkv_dist_comm* comm, int clean);
} qkv_dist_backend;

typedef const qkv_dist_backend* (*qkv_dist_plugin_fn)(void);

#ifdef __cplusplus
}
#endif
