// The main program's side of plugin_abi.h: a plugin's communicator as an owned handle, its
// started all-reduces as Work, and the one check every back end makes before a tensor becomes a
// raw buffer. No tensor type crosses into the plugin; these are where Tensors stop.
#pragma once
#include <atomic>
#include <memory>
#include <string>

#include "tensor/tensor.h"
#include "train/dist/communicator.h"
#include "train/dist/plugin_abi.h"

namespace qkv::dist {

// A plugin's communicator. Closed when dropped: cleanly (the mpi plugin's MPI_Finalize, which
// waits for every rank) unless an exception is unwinding or a collective of it failed, since
// then the other ranks may never get there.
class PluginComm {
 public:
  // Opens the plugin's communicator; a DistError naming the back end when it cannot start.
  PluginComm(const qkv_dist_backend* table, const qkv_dist_open_args& args);
  PluginComm(const PluginComm&) = delete;
  PluginComm& operator=(const PluginComm&) = delete;
  ~PluginComm();

  const qkv_dist_backend* table() const { return table_; }
  qkv_dist_comm* comm() const { return comm_; }
  const qkv_dist_info& info() const { return info_; }

  // Throws DistError with the plugin's text when `status` is nonzero (and marks this
  // communicator failed).
  void check(int status, const qkv_dist_error& error);
  // Starts the all-reduce of `t` (already checked); the Work keeps `t` alive until it is done.
  std::unique_ptr<Work> all_reduce(Tensor& t, ReduceOp op, const std::string& what);
  [[noreturn]] void abort(const std::string& message);

 private:
  const qkv_dist_backend* table_;
  qkv_dist_comm* comm_ = nullptr;
  qkv_dist_info info_{};
  std::atomic<bool> failed_{false};
};

// DistError unless `t` is contiguous, float32, float64 or int64, and (when `served` is given) on
// that device. The message names the collective, the back end and the tensor's dtype and device.
void check_reducible(const Tensor& t, const std::string& backend, const Device* served, const std::string& what);

qkv_dist_op to_abi(ReduceOp op);

}  // namespace qkv::dist
