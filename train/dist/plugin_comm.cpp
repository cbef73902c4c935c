#include "train/dist/plugin_comm.h"

#include <cstdio>
#include <cstdlib>
#include <exception>

namespace qkv::dist {

namespace {

qkv_dist_dtype to_abi(DType d) {
  switch (d) {
    case DType::f32: return QKV_DIST_F32;
    case DType::f64: return QKV_DIST_F64;
    case DType::i64: return QKV_DIST_I64;
    default: throw DistError(cat("no collective element type for ", dtype_name(d)));  // check_reducible's
  }
}

// The plugin's started all-reduce. Holds the tensor, so its storage outlives the collective
// even when the caller drops its own handle first.
class PluginWork : public Work {
 public:
  PluginWork(PluginComm& comm, qkv_dist_work* work, Tensor keep) : comm_(comm), work_(work), keep_(std::move(keep)) {}
  ~PluginWork() override { comm_.table()->work_free(work_); }  // waits when wait() was not called
  void wait() override {
    qkv_dist_error e{};
    comm_.check(comm_.table()->work_wait(work_, &e), e);
  }

 private:
  PluginComm& comm_;
  qkv_dist_work* work_;
  Tensor keep_;
};

}  // namespace

qkv_dist_op to_abi(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return QKV_DIST_SUM;
    case ReduceOp::max: return QKV_DIST_MAX;
    case ReduceOp::min: return QKV_DIST_MIN;
  }
  throw DistError("invalid ReduceOp value");
}

PluginComm::PluginComm(const qkv_dist_backend* table, const qkv_dist_open_args& args) : table_(table) {
  qkv_dist_error e{};
  comm_ = table_->open(&args, &e);
  qkv::check<DistError>(comm_ != nullptr, "cannot start the ", table_->name, " back end: ", e.text);
  table_->info(comm_, &info_);
}

PluginComm::~PluginComm() {
  const bool clean = std::uncaught_exceptions() == 0 && !failed_.load();
  table_->close(comm_, clean ? 1 : 0);
}

void PluginComm::check(int status, const qkv_dist_error& error) {
  if (status == 0) return;
  failed_ = true;
  throw DistError(error.text);
}

std::unique_ptr<Work> PluginComm::all_reduce(Tensor& t, ReduceOp op, const std::string& what) {
  qkv_dist_work* work = nullptr;
  qkv_dist_error e{};
  check(table_->all_reduce_start(comm_, t.raw_data(), t.numel(), to_abi(t.dtype()), to_abi(op), what.c_str(), nullptr,
                                 &work, &e),
        e);
  return std::make_unique<PluginWork>(*this, work, t);
}

void PluginComm::abort(const std::string& message) {
  table_->abort(comm_, message.c_str());
  std::_Exit(1);  // the plugin does not return; should it, still stop
}

void check_reducible(const Tensor& t, const std::string& backend, const Device* served, const std::string& what) {
  check<DistError>(t.defined(), "all-reduce of ", what, ": the tensor is undefined");
  const DType d = t.dtype();
  check<DistError>(d == DType::f32 || d == DType::f64 || d == DType::i64, "all-reduce of ", what, ": the ", backend,
                   " back end reduces float32, float64 and int64 tensors, got a tensor of ", dtype_name(d), " on ",
                   t.device(), ": convert it with .to() first");
  if (served && t.device() != *served) {
    const std::string want =
        served->is_cpu() ? std::string("CPU tensors") : cat("tensors on ", *served, ", this rank's GPU");
    const std::string fix = served->is_cpu()
                                ? std::string(": move it to the CPU, or use the nccl back end for CUDA tensors")
                                : cat(": move it to ", *served);
    throw DistError(cat("all-reduce of ", what, ": the ", backend, " back end serves ", want, ", got a tensor of ",
                        dtype_name(d), " on ", t.device(), fix));
  }
  check<DistError>(t.is_contiguous(), "all-reduce of ", what, ": needs a contiguous tensor, got a ",
                   shape_str(t.shape()), " tensor of ", dtype_name(d), " with strides ", shape_str(t.strides()),
                   ": reduce a .contiguous() copy and copy the result back");
}

}  // namespace qkv::dist
