// Data-parallel gradients: every rank's parameter gradients summed over the ranks in buckets of
// about `bucket_mb`, each all-reduce started as soon as the backward pass has finished that
// bucket's gradients, so communication overlaps the rest of the backward (PyTorch DDP's
// reducer). Buckets hold parameters in reverse registration order (roughly the order backward
// produces them) and start in bucket order on every rank, since collectives must be issued in the
// same order everywhere.
//
// The reducer sums; averaging is the loss's business: each rank scales its loss by its share of
// the global batch (its targets / all ranks' targets), so the summed gradient is exactly the
// gradient of the global batch's mean loss, also when shares differ (a short last batch).
//
// Use per optimizer step, after the backward passes of the micro-batches before the last:
//   reducer.arm(step);          before the last micro-batch's backward
//   loss.backward();            buckets start as their gradients are done
//   reducer.finish();           starts the rest, waits, and writes the sums into .grad
// A parameter that got no gradient on this rank contributes zeros and gets the sum (as DDP).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "autograd/grad_hooks.h"
#include "train/dist/communicator.h"

namespace qkv::dist {

class GradReducer {
 public:
  GradReducer(Communicator& comm, std::vector<Tensor> params, double bucket_mb = 25);
  GradReducer(const GradReducer&) = delete;
  GradReducer& operator=(const GradReducer&) = delete;

  void arm(int64_t step);
  void finish();

  int64_t buckets() const { return int64_t(buckets_.size()); }
  // Seconds finish() spent waiting for all-reduces: the communication the backward did not hide.
  double exposed_seconds() const { return exposed_seconds_; }
  // Buckets that started before finish(), i.e. during the backward pass.
  int64_t overlapped_buckets() const { return overlapped_; }
  // One line for the run's log: ranks, buckets, overlap and the exposed all-reduce time against
  // `train_seconds` (what bench/data_parallel.py reads).
  std::string summary(double train_seconds) const;

 private:
  struct Bucket {
    std::vector<size_t> params;  // indices into params_
    std::vector<int64_t> offsets;
    Tensor flat;  // the bucket's gradients, contiguous, f32 on the parameters' device
    int64_t pending = 0;
    std::unique_ptr<Work> work;
  };
  void on_grad_ready(size_t param);
  void launch_ready();
  void launch(size_t bucket);

  Communicator& comm_;
  std::vector<Tensor> params_;
  std::vector<size_t> bucket_of_;
  std::vector<Bucket> buckets_;
  std::vector<autograd::GradHookHandle> hooks_;
  bool armed_ = false;
  int64_t step_ = 0, steps_ = 0;
  size_t next_launch_ = 0;
  double exposed_seconds_ = 0;
  int64_t overlapped_ = 0;
};

}  // namespace qkv::dist
