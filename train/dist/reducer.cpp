#include "train/dist/reducer.h"

#include "io/fault_hook.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "autograd/grad_mode.h"

namespace qkv::dist {

GradReducer::GradReducer(Communicator& comm, std::vector<Tensor> params, double bucket_mb)
    : comm_(comm), params_(std::move(params)), bucket_of_(params_.size()) {
  check<ValueError>(bucket_mb > 0, "data-parallel gradients: train.bucket_mb must be positive, got ", bucket_mb);
  const int64_t cap = std::max<int64_t>(1, int64_t(bucket_mb * 1024 * 1024 / 4));  // f32 elements
  for (size_t k = params_.size(); k-- > 0;) {
    const Tensor& p = params_[k];
    check<DTypeError>(p.dtype() == DType::f32, "data-parallel gradients: parameter ", k, " is ", dtype_name(p.dtype()),
                      ", expected float32 (master weights)");
    if (buckets_.empty() || buckets_.back().offsets.back() >= cap ||
        p.device() != params_[buckets_.back().params.front()].device())
      buckets_.push_back({});
    Bucket& b = buckets_.back();
    const int64_t start = b.offsets.empty() ? 0 : b.offsets.back();
    if (b.offsets.empty()) b.offsets.push_back(0);
    b.params.push_back(k);
    b.offsets.push_back(start + p.numel());
    bucket_of_[k] = buckets_.size() - 1;
  }
  for (Bucket& b : buckets_)
    b.flat = zeros({b.offsets.back()}, TensorOptions(DType::f32, params_[b.params.front()].device()));
  hooks_.reserve(params_.size());
  for (size_t k = 0; k < params_.size(); ++k)
    hooks_.push_back(autograd::add_post_accumulate_grad_hook(params_[k], [this, k] { on_grad_ready(k); }));
}

void GradReducer::arm(int64_t step) {
  armed_ = true;
  step_ = step;
  ++steps_;
  next_launch_ = 0;
  for (Bucket& b : buckets_) {
    b.pending = int64_t(b.params.size());
    b.work.reset();
  }
}

void GradReducer::on_grad_ready(size_t param) {
  if (!armed_) return;  // a micro-batch before the last, or a check pass
  Bucket& b = buckets_[bucket_of_[param]];
  if (--b.pending == 0) launch_ready();
}

// Starts every bucket whose gradients are all done, in bucket order.
void GradReducer::launch_ready() {
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].pending == 0) {
    launch(next_launch_);
    ++next_launch_;
    ++overlapped_;
  }
}

void GradReducer::launch(size_t index) {
  NoGradGuard no_grad;
  Bucket& b = buckets_[index];
  for (size_t j = 0; j < b.params.size(); ++j) {
    Tensor slot = b.flat.slice(0, b.offsets[j], b.offsets[j + 1]);
    const Tensor g = params_[b.params[j]].grad();
    if (g.defined()) slot.copy_(g.reshape({-1}));
    else slot.copy_(zeros({1}, TensorOptions(DType::f32, slot.device())));  // broadcast: no gradient here
  }
  fault_point("all-reduce", step_ + 1);  // testing hook (io/fault_hook.h): a rank killed as it starts one
  b.work = comm_.all_reduce_async(b.flat, ReduceOp::sum,
                                  cat("gradient bucket ", index + 1, " of ", buckets_.size(), " at step ", step_ + 1));
}

void GradReducer::finish() {
  check<ValueError>(armed_, "data-parallel gradients: finish() without arm()");
  armed_ = false;
  NoGradGuard no_grad;
  // Buckets the backward did not complete (parameters without a gradient here): zeros, in order.
  for (; next_launch_ < buckets_.size(); ++next_launch_) launch(next_launch_);
  const auto start = std::chrono::steady_clock::now();
  for (Bucket& b : buckets_) b.work->wait();
  exposed_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (Bucket& b : buckets_)
    for (size_t j = 0; j < b.params.size(); ++j) {
      Tensor& p = params_[b.params[j]];
      const Tensor sum = b.flat.slice(0, b.offsets[j], b.offsets[j + 1]).reshape(p.shape());
      if (p.grad().defined()) {
        Tensor g = p.grad();
        g.copy_(sum);
      } else {
        p.set_grad(sum.clone());
      }
    }
}

std::string GradReducer::summary(double train_seconds) const {
  char line[256];
  std::snprintf(line, sizeof line,
                "data-parallel (%s, world size %d): gradient buckets: %lld, %.1f a step started during the backward; "
                "all-reduce time not hidden by the backward %.3f s (%.1f%% of %.1f s)",
                comm_.backend().c_str(), comm_.size(), static_cast<long long>(buckets_.size()),
                steps_ > 0 ? double(overlapped_) / double(steps_) : 0.0, exposed_seconds_,
                train_seconds > 0 ? 100 * exposed_seconds_ / train_seconds : 0.0, train_seconds);
  return line;
}

}  // namespace qkv::dist
