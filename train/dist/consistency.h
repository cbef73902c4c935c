// What every rank of a data-parallel job must agree on before it trains: the resolved config
// and the initial weights. Each rank hashes its own; the hashes are gathered and compared, and a
// rank that differs is named (a different file, a stale build, another seed) instead of the
// job training a model that is no single model.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tensor/random.h"
#include "tensor/tensor.h"
#include "train/dist/communicator.h"

namespace qkv::dist {

// FNV-1a over the bytes.
uint64_t digest(const std::string& bytes);
// Over names, shapes, dtypes and values (read to the host) of the tensors, in order.
uint64_t digest(const std::vector<std::pair<std::string, Tensor>>& tensors);

// DistError naming `what` and the ranks whose digest differs from rank 0's, on every rank.
void check_identical(Communicator& comm, uint64_t mine, const std::string& what);

// The generator state a rank's dropout draws from: rank 0 keeps `s` (so world size 1 is
// unchanged), the others get their own stream at the same position, so ranks differ where they
// must and a run repeats exactly.
GeneratorState for_rank(GeneratorState s, int rank);

}  // namespace qkv::dist
