// Private memory pools (tensor/memory_pool.h), on the CPU allocator: what a CUDA graph relies on
// is that a pool's blocks come back to it, at the same addresses, and to nothing else.
#include <doctest/doctest.h>

#include "autograd/autograd.h"
#include "tensor/memory_pool.h"

using namespace qkv;

TEST_CASE("memory pool: its blocks are reused inside it and never handed out outside it") {
  const size_t shared_before = memory_stats(kCPU).current;
  MemoryPool pool(kCPU);
  void* inside = nullptr;
  {
    PoolScope scope(pool);
    Tensor t = empty({1000}, DType::f32);
    inside = t.raw_data();
    CHECK(pool.stats().current == 4000);
  }  // the tensor is freed into the pool
  CHECK(pool.stats().current == 0);
  CHECK(pool.stats().reserved == 4096);
  {
    Tensor u = empty({1000}, DType::f32);  // outside the scope: the shared cache
    CHECK(u.raw_data() != inside);
  }
  {
    PoolScope scope(pool);
    const size_t shared_allocations = memory_stats(kCPU).allocations;
    Tensor v = empty({1000}, DType::f32);
    CHECK(v.raw_data() == inside);  // the same address again: what a graph replay writes to
    CHECK(memory_stats(kCPU).allocations == shared_allocations);  // the device's counters, not the pool's
    {
      MemoryPool other(kCPU);  // scopes nest; a pool made inside one draws from the shared cache
      PoolScope inner(other);
      Tensor w = empty({1000}, DType::f32);
      CHECK(w.raw_data() != inside);
      CHECK(other.stats().current == 4000);
      CHECK(pool.stats().current == 4000);
    }
    Tensor x = empty({10}, DType::f32);  // the outer scope again
    CHECK(pool.stats().current == 4040);
  }
  // The pool's blocks count as in use on the device while it holds them.
  CHECK(memory_stats(kCPU).current >= shared_before + 4096);
}

TEST_CASE("memory pool: a tensor that outlives its pool goes back to the shared cache") {
  const size_t shared_before = memory_stats(kCPU).current;
  Tensor kept;
  {
    MemoryPool pool(kCPU);
    PoolScope scope(pool);
    kept = full({64}, 1.5, DType::f32);
    Tensor dropped = empty({300}, DType::f64);
  }  // the pool is gone with a block still live
  CHECK(kept.to_vector<float>()[63] == 1.5f);
  CHECK(memory_stats(kCPU).current == shared_before + 512);  // kept's block, rounded
  kept = Tensor();  // freed through the retired pool into the shared cache (ASan: no use after free)
  CHECK(memory_stats(kCPU).current == shared_before);
}
