// The index arithmetic of the CUDA kernels, run on the host (it is host/device code): the strided
// indexer against a naive row-major walk over random shapes and views, grid-stride launches
// covering every element exactly once, and the optimizers' multi-tensor layout giving every
// element of every tensor to exactly one block, across launches. A GPU run then only has to
// confirm the arithmetic inside the blocks.
#include <doctest/doctest.h>

#include <algorithm>
#include <random>

#include "kernels/cuda/multi_tensor.h"
#include "tensor/cuda/indexer.cuh"

using namespace qkv;

namespace {

// The element offset of flat index i (row-major over `shape`) for one operand's strides.
int64_t naive_offset(const Shape& shape, const Strides& strides, int64_t i) {
  int64_t off = 0;
  for (size_t d = shape.size(); d-- > 0;) {
    off += (i % shape[d]) * strides[d];
    i /= shape[d];
  }
  return off;
}

}  // namespace

TEST_CASE("cuda index math: the strided indexer matches a naive walk over random views") {
  std::mt19937_64 rng(17);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  int merged = 0;
  for (int trial = 0; trial < 500; ++trial) {
    Shape shape(size_t(pick(0, 5)));
    for (auto& s : shape) s = pick(1, 5);
    // Operand 0 contiguous (an output), 1 permuted or sliced, 2 broadcast (stride 0 somewhere).
    std::array<Strides, 3> st;
    for (auto& s : st) s.assign(shape.size(), 0);
    int64_t run = 1;
    for (size_t d = shape.size(); d-- > 0;) {
      st[0][d] = run;
      st[1][d] = run * pick(1, 3);
      st[2][d] = pick(0, 1) ? run : 0;
      run *= shape[d];
    }
    if (shape.size() >= 2 && pick(0, 1)) std::swap(st[1][0], st[1][1]);
    const auto L = make_strided_loop<3>(shape, st);
    const cuda::Indexer<3> ix = cuda::make_indexer(L);
    merged += int(L.shape.size()) < int(shape.size());
    for (int64_t i = 0; i < numel(shape); ++i) {
      int64_t off[3];
      ix.offsets(i, off);
      for (size_t k = 0; k < 3; ++k) {
        CAPTURE(trial);
        CAPTURE(i);
        CAPTURE(k);
        REQUIRE(off[k] == naive_offset(shape, st[k], i));
      }
    }
  }
  CHECK(merged > 50);  // the merged-dims path was taken often
}

TEST_CASE("cuda index math: a grid-stride launch of blocks_for(n) covers every index exactly once") {
  for (int threads : {32, 128, 256}) {
    for (int64_t n : {int64_t(1), int64_t(31), int64_t(256), int64_t(1000), int64_t(65537), int64_t(300001)}) {
      const int64_t grid = int64_t(cuda::blocks_for(n, threads)) * threads;
      REQUIRE(grid >= 1);
      std::vector<int> seen(size_t(n), 0);
      for (int64_t t = 0; t < grid; ++t)
        for (int64_t i = t; i < n; i += grid) ++seen[size_t(i)];
      CHECK(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
    }
    // Beyond the grid cap the loop strides: still at least one block, and a bounded grid.
    const int64_t huge = int64_t(1) << 36;
    CHECK(cuda::blocks_for(huge, threads) == 65535u * 32u);
  }
}

TEST_CASE("cuda index math: the multi-tensor layout gives every element to exactly one block") {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 50; ++trial) {
    const int tensors = int(std::uniform_int_distribution<int>(1, 130)(rng));
    std::vector<int64_t> numels;
    std::vector<std::array<float*, 2>> ptrs;
    std::vector<std::vector<float>> data;
    for (int t = 0; t < tensors; ++t) {
      const int kind = int(rng() % 4);
      numels.push_back(kind == 0   ? 0
                       : kind == 1 ? int64_t(rng() % 50)
                                   : int64_t(rng() % (3 * kernels::cuda::kChunk + 7)));
      data.emplace_back(size_t(numels.back()), 0.0f);
      ptrs.push_back({data.back().data(), data.back().data()});
    }
    int64_t expected_chunks = 0;
    for (int64_t n : numels) expected_chunks += (n + kernels::cuda::kChunk - 1) / kernels::cuda::kChunk;
    int64_t next_slot = 7, launches = 0;
    const int64_t chunks = kernels::cuda::for_each_list<float, 2>(
        ptrs, numels, 7, [&](const kernels::cuda::TensorList<float, 2>& l, int64_t blocks, int64_t slot) {
          ++launches;
          CHECK(slot == next_slot);  // slots run on across launches without gaps
          CHECK(l.count <= kernels::cuda::kMaxTensors);
          next_slot += blocks;
          for (int64_t b = 0; b < blocks; ++b) {
            int64_t begin = 0, end = 0;
            const int s = kernels::cuda::locate(l, b, begin, end);
            REQUIRE(s < l.count);
            REQUIRE(0 <= begin);
            REQUIRE(begin < end);
            REQUIRE(end <= l.numel[s]);
            for (int64_t i = begin; i < end; ++i) l.ptr[0][s][i] += 1.0f;
          }
        });
    CHECK(chunks == expected_chunks);
    const int64_t nonempty = std::count_if(numels.begin(), numels.end(), [](int64_t n) { return n > 0; });
    CHECK(launches == (nonempty + kernels::cuda::kMaxTensors - 1) / kernels::cuda::kMaxTensors);
    for (const auto& d : data) CHECK(std::all_of(d.begin(), d.end(), [](float c) { return c == 1.0f; }));
  }
}
