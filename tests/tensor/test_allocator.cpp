#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <vector>

#include "autograd/autograd.h"
#include "tensor/allocator.h"

using namespace qkv;

TEST_CASE("the CPU allocator counts current and peak bytes") {
  empty_cache(kCPU);
  const MemoryStats before = memory_stats(kCPU);
  reset_peak_memory(kCPU);
  {
    Tensor a = empty({1000}, DType::f32);  // 4000 bytes
    Tensor b = empty({250}, DType::f64);   // 2000 bytes
    CHECK(memory_stats(kCPU).current == before.current + 6000);
    {
      Tensor c = empty({100}, DType::bf16);
      CHECK(memory_stats(kCPU).current == before.current + 6200);
    }
    CHECK(memory_stats(kCPU).current == before.current + 6000);
    CHECK(memory_stats(kCPU).peak == before.current + 6200);
  }
  CHECK(memory_stats(kCPU).current == before.current);
  reset_peak_memory(kCPU);
  CHECK(memory_stats(kCPU).peak == before.current);
}

TEST_CASE("CPU buffers are 64-byte aligned and freed blocks are reused") {
  for (int64_t n : {1, 3, 17, 1000, 65537}) {
    Tensor t = empty({n}, DType::u8);
    CHECK(reinterpret_cast<uintptr_t>(t.raw_data()) % 64 == 0);
  }
  empty_cache(kCPU);
  void* first;
  {
    Tensor t = empty({4096}, DType::f32);
    first = t.raw_data();
  }
  const size_t reserved = memory_stats(kCPU).reserved;
  Tensor again = empty({4096}, DType::f32);
  CHECK(again.raw_data() == first);
  CHECK(memory_stats(kCPU).reserved == reserved);
}

TEST_CASE("size classes waste at most a quarter of a block") {
  CachingAllocator& a = static_cast<CachingAllocator&>(allocator_for(kCPU));
  for (size_t n :
       {size_t(1), size_t(64), size_t(65), size_t(1000), size_t(1) << 20, (size_t(1) << 20) + 1, size_t(123456789)}) {
    const size_t b = a.block_size(n);
    CHECK(b >= n);
    CHECK(b % 64 == 0);
    CHECK(double(b) <= std::max(256.0, 1.25 * double(n) + 64));
  }
}

TEST_CASE("impossible allocations raise errors instead of crashing") {
  CHECK_THROWS_WITH_AS(empty({int64_t(1) << 40}, DType::f32), doctest::Contains("out of memory on cpu"), OutOfMemory);
  CHECK_THROWS_WITH_AS(empty({int64_t(1) << 40, int64_t(1) << 40}), doctest::Contains("too large"), ShapeError);
  CHECK_THROWS_WITH_AS(empty({2, -1}), doctest::Contains("negative dimension"), ShapeError);
}

namespace {
// A raw allocator that records every request, for the exact-size mode's test.
std::vector<size_t> raw_requests;
int raw_frees = 0;
void* recording_alloc(size_t bytes, int) {
  raw_requests.push_back(bytes);
  return std::malloc(bytes);
}
void recording_free(void* p, int) {
  ++raw_frees;
  std::free(p);
}
}  // namespace

// QKV_CUDA_EXACT_ALLOC's mode (the CUDA allocator is the same class): the system sees each
// request's exact size and gets each block back when it is freed, so a memory checker sees an
// overrun past a tensor's end and a use after free.
TEST_CASE("an exact-size caching allocator neither rounds nor caches") {
  raw_requests.clear();
  raw_frees = 0;
  CachingAllocator exact(kCPU, RawMemory{recording_alloc, recording_free}, 512, /*exact=*/true);
  void* a = exact.allocate(1000);
  void* b = exact.allocate(3);
  CHECK(raw_requests == std::vector<size_t>{1000, 3});
  CHECK(exact.stats().reserved == 1003);
  exact.deallocate(a, 1000);
  CHECK(raw_frees == 1);
  void* c = exact.allocate(1000);  // a fresh block, not the one just freed from a cache
  CHECK(raw_requests.size() == 3);
  exact.deallocate(b, 3);
  exact.deallocate(c, 1000);
  CHECK(raw_frees == 3);
  CHECK(exact.stats().reserved == 0);
  CHECK(exact.stats().current == 0);

  raw_requests.clear();
  CachingAllocator caching(kCPU, RawMemory{recording_alloc, recording_free}, 512);
  void* d = caching.allocate(1000);
  caching.deallocate(d, 1000);
  CHECK(caching.allocate(1000) == d);  // the default mode reuses the cached block
  CHECK(raw_requests == std::vector<size_t>{1024});
  caching.deallocate(d, 1000);
}
