#include "train/data/synthetic.h"

#include <algorithm>

#include "autograd/ops.h"

namespace qkv::data {

const char* synthetic_task_name(SyntheticTask t) {
  switch (t) {
    case SyntheticTask::reverse: return "reverse";
    case SyntheticTask::sort: return "sort";
    case SyntheticTask::sub: return "sub";
    case SyntheticTask::swap: return "swap";
    case SyntheticTask::copy: return "copy";
  }
  return "?";
}

std::vector<int64_t> synthetic_target(SyntheticTask task, const std::vector<int64_t>& x, int64_t vocab) {
  std::vector<int64_t> y = x;
  switch (task) {
    case SyntheticTask::reverse: std::reverse(y.begin(), y.end()); break;
    case SyntheticTask::sort: std::sort(y.begin(), y.end()); break;
    case SyntheticTask::sub:
      for (int64_t& v : y) v = vocab - 1 - v;
      break;
    case SyntheticTask::swap: std::rotate(y.begin(), y.begin() + ptrdiff_t(y.size() / 2), y.end()); break;
    case SyntheticTask::copy: break;
  }
  return y;
}

SequenceData make_synthetic(SyntheticTask task, int64_t count, int64_t length, int64_t vocab, Generator& gen) {
  check<ValueError>(count >= 0 && length >= 1 && vocab >= 2, "synthetic data: invalid count ", count, ", length ",
                    length, " or vocab ", vocab);
  check<ValueError>(task != SyntheticTask::swap || length % 2 == 0, "synthetic task swap needs an even length, got ",
                    length);
  const std::vector<double> u = rand({count * length}, DType::f64, &gen).to_vector<double>();
  std::vector<int64_t> xs(u.size()), ys(u.size());
  for (int64_t i = 0; i < count; ++i) {
    std::vector<int64_t> x(static_cast<size_t>(length));
    for (int64_t j = 0; j < length; ++j)
      x[size_t(j)] = std::min<int64_t>(vocab - 1, int64_t(u[size_t(i * length + j)] * double(vocab)));
    const std::vector<int64_t> y = synthetic_target(task, x, vocab);
    std::copy(x.begin(), x.end(), xs.begin() + i * length);
    std::copy(y.begin(), y.end(), ys.begin() + i * length);
  }
  return {from_vector(xs, {count, length}), from_vector(ys, {count, length})};
}

SyntheticSplits make_synthetic_splits(SyntheticTask task, int64_t length, int64_t vocab, int64_t train_size,
                                      int64_t val_size, int64_t test_size, uint64_t seed) {
  Generator gen(seed);
  SyntheticSplits s;
  s.train = make_synthetic(task, train_size, length, vocab, gen);
  s.val = make_synthetic(task, val_size, length, vocab, gen);
  s.test = make_synthetic(task, test_size, length, vocab, gen);
  return s;
}

}  // namespace qkv::data
