#include "train/dist/consistency.h"

#include <cstring>

#include "train/data/shuffle.h"

namespace qkv::dist {
namespace {
constexpr uint64_t kFnvOffset = 1469598103934665603ull, kFnvPrime = 1099511628211ull;

void mix(uint64_t& h, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * kFnvPrime;
}
}  // namespace

uint64_t digest(const std::string& bytes) {
  uint64_t h = kFnvOffset;
  mix(h, bytes.data(), bytes.size());
  return h;
}

uint64_t digest(const std::vector<std::pair<std::string, Tensor>>& tensors) {
  uint64_t h = kFnvOffset;
  for (const auto& [name, t] : tensors) {
    mix(h, name.data(), name.size() + 1);
    for (int64_t d : t.shape()) mix(h, &d, sizeof d);
    const DType dt = t.dtype();
    mix(h, &dt, sizeof dt);
    const Tensor host = t.to(kCPU).contiguous();
    mix(h, host.raw_data(), host.nbytes());
  }
  return h;
}

void check_identical(Communicator& comm, uint64_t mine, const std::string& what) {
  if (comm.size() == 1) return;
  std::string bytes(sizeof mine, '\0');
  std::memcpy(bytes.data(), &mine, sizeof mine);
  const std::vector<std::string> all = comm.all_gather(bytes, cat("the ", what, " digests"));
  std::string differ;
  for (size_t r = 1; r < all.size(); ++r)
    if (all[r] != all[0]) differ += cat(differ.empty() ? "" : ", ", r);
  check<DistError>(differ.empty(), "data-parallel run: the ", what, " of rank(s) ", differ,
                   " differ from rank 0's: every rank must run the same build on the same files "
                   "(same config, overrides and seed)");
}

GeneratorState for_rank(GeneratorState s, int rank) {
  if (rank == 0) return s;
  // A splitmix64 step of (seed, rank): far from every other rank's and run's seed.
  return {data::mix64(s.seed + 0x9e3779b97f4a7c15ull * uint64_t(rank + 1)), s.offset};
}

}  // namespace qkv::dist
