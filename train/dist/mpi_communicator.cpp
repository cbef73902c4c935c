#include "train/dist/mpi_communicator.h"

#include <algorithm>
#include <cstring>

#include "train/dist/plugin_loader.h"

namespace qkv::dist {

namespace {

qkv_dist_open_args mpi_args(const Options& o) {
  qkv_dist_open_args a{};
  a.timeout_seconds = o.timeout_seconds;
  return a;
}

}  // namespace

MpiCommunicator::MpiCommunicator(const Options& options) : plugin_(load_plugin("mpi"), mpi_args(options)) {}

std::unique_ptr<Work> MpiCommunicator::all_reduce_async(Tensor& t, ReduceOp op, const std::string& what) {
  check_reducible(t, "mpi", &kCPU, what);
  return plugin_.all_reduce(t, op, what);
}

std::vector<double> MpiCommunicator::all_reduce(std::vector<double> values, ReduceOp op, const std::string& what) {
  qkv_dist_work* work = nullptr;
  qkv_dist_error e{};
  const qkv_dist_backend* t = plugin_.table();
  plugin_.check(t->all_reduce_start(plugin_.comm(), values.data(), int64_t(values.size()), QKV_DIST_F64, to_abi(op),
                                    what.c_str(), nullptr, &work, &e),
                e);
  const int status = t->work_wait(work, &e);
  t->work_free(work);
  plugin_.check(status, e);
  return values;
}

std::vector<std::string> MpiCommunicator::all_gather(const std::string& mine, const std::string& what) {
  const qkv_dist_backend* t = plugin_.table();
  qkv_dist_error e{};
  const int n = size();
  // Lengths first, then every rank's bytes padded to the longest.
  const int64_t my_length = int64_t(mine.size());
  std::vector<int64_t> lengths(size_t(n), 0);
  plugin_.check(t->all_gather(plugin_.comm(), &my_length, sizeof my_length, lengths.data(), what.c_str(), &e), e);
  const int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  std::string padded = mine;
  padded.resize(size_t(longest));
  std::string all(size_t(longest) * size_t(n), '\0');
  if (longest > 0)
    plugin_.check(t->all_gather(plugin_.comm(), padded.data(), longest, all.data(), what.c_str(), &e), e);
  std::vector<std::string> out(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) out[size_t(r)] = all.substr(size_t(r) * size_t(longest), size_t(lengths[size_t(r)]));
  return out;
}

std::string MpiCommunicator::broadcast(const std::string& bytes, int root, const std::string& what) {
  check<DistError>(root >= 0 && root < size(), "broadcast of ", what, ": root rank ", root, " is not in this job of ",
                   size(), " ranks");
  const qkv_dist_backend* t = plugin_.table();
  qkv_dist_error e{};
  int64_t length = rank() == root ? int64_t(bytes.size()) : 0;
  plugin_.check(t->broadcast(plugin_.comm(), &length, sizeof length, root, what.c_str(), &e), e);
  std::string out = rank() == root ? bytes : std::string(size_t(length), '\0');
  if (length > 0) plugin_.check(t->broadcast(plugin_.comm(), out.data(), length, root, what.c_str(), &e), e);
  return out;
}

void MpiCommunicator::barrier(const std::string& what) {
  qkv_dist_error e{};
  plugin_.check(plugin_.table()->barrier(plugin_.comm(), what.c_str(), &e), e);
}

}  // namespace qkv::dist
