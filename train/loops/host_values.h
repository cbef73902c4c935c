// Reading training statistics on the host. On a GPU every read waits for the device, so a step
// gathers everything it reports (loss, gradient norm) into one tensor and reads it once; sums
// over many batches (an evaluation's loss and correct count) stay on the device until the end.
#pragma once
#include <vector>

#include "tensor/tensor.h"

namespace qkv::loops {

// The values of several one-element tensors (on one device, any float or integer dtype), in
// float64, with one host read.
std::vector<double> read_values(const std::vector<Tensor>& values);

// A float64 running sum on a device: add() queues the addition, value() reads it (one read).
class DeviceSum {
 public:
  explicit DeviceSum(const Device& device);
  void add(const Tensor& x, double factor = 1);  // adds x * factor (x: one element), in float64
  const Tensor& tensor() const { return sum_; }
  double value() const;

 private:
  Tensor sum_;
};

}  // namespace qkv::loops
