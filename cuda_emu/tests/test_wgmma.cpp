// The wgmma model against the PTX ISA's text (cuda_emu/wgmma.h): shared-memory tiles laid out by
// hand as the ISA draws its layouts (K-major and MN-major; no swizzle, 64B and 128B swizzles,
// with the LBO and SBO strides between core matrices and atoms), products over K = 64 in four
// k-steps that advance the descriptors as kernels do, A from shared memory or from registers, D
// read through the ISA's accumulator layout and compared with the products in double; then the
// misuses the model names.
#include <doctest/doctest.h>

#include <cuda_bf16.h>

#include <cmath>
#include <random>
#include <vector>

#include "cuda_emu/error.h"

namespace {

namespace emu = qkv::cuda_emu;
using emu::KernelFault;

constexpr int kM = 64, kK = 64;

enum Swizzle { none = 0, b64 = 2, b128 = 3 };  // as the bulk copy numbers them

uint64_t descriptor(uint32_t address, uint32_t lbo, uint32_t sbo, Swizzle s) {
  const uint64_t mode = s == none ? 0 : s == b128 ? 1 : 2;  // the descriptor's encoding: 1 128B, 2 64B
  return uint64_t((address & 0x3ffff) >> 4) | uint64_t(lbo >> 4) << 16 | uint64_t(sbo >> 4) << 32 | mode << 62;
}

// Byte position of element (mn, k) of a tile laid out as the ISA draws it: rows of the strided
// dimension, each `row` bytes, 8-row groups `group` bytes apart; 16-byte chunks of a row swapped
// by the swizzle (chunk c of row r lands at c ^ (r % 8) for 128B, c ^ (r / 2 % 4) for 64-byte
// rows under 64B); without a swizzle, K-major rows are core matrices of 8 rows x 16 bytes, the
// next 8 columns `lbo` bytes on.
struct Layout {
  bool mn_major;
  Swizzle swizzle;
  uint32_t lbo, sbo;  // the descriptor's strides
  int span() const { return swizzle == none ? 16 : 16 << swizzle; }
};

// Where element (mn, k) of an operand lives (bytes from the tile's 1024-aligned start).
uint32_t place(const Layout& l, int mn, int k) {
  if (!l.mn_major) {
    if (l.swizzle == none)
      return uint32_t(mn / 8) * l.sbo + uint32_t(k / 8) * l.lbo + uint32_t(mn % 8) * 16 + uint32_t(k % 8) * 2;
    // 64 (or 32) elements of K per row, K beyond that in the next column of atoms (lbo apart).
    const int per_row = l.span() / 2;
    const uint32_t row_byte = uint32_t(mn % 8) * uint32_t(l.span());
    const uint32_t chunk = uint32_t(k % per_row / 8), atom = uint32_t(mn / 8) * l.sbo + uint32_t(k / per_row) * l.lbo;
    const uint32_t phase = l.swizzle == b128 ? uint32_t(mn % 8) : uint32_t(mn % 8 / 2 % 4);
    return atom + row_byte + ((chunk ^ phase) * 16) + uint32_t(k % 8) * 2;
  }
  // MN-major, swizzled: rows of K, each holding span / 2 elements of MN.
  const int per_row = l.span() / 2;
  const uint32_t row_byte = uint32_t(k % 8) * uint32_t(l.span());
  const uint32_t chunk = uint32_t(mn % per_row / 8), atom = uint32_t(k / 8) * l.sbo + uint32_t(mn / per_row) * l.lbo;
  const uint32_t phase = l.swizzle == b128 ? uint32_t(k % 8) : uint32_t(k % 8 / 2 % 4);
  return atom + row_byte + ((chunk ^ phase) * 16) + uint32_t(mn % 8) * 2;
}

struct Args {
  const uint16_t* a_image;  // kTileBytes each
  const uint16_t* b_image;
  Layout a, b;
  uint32_t a_at[4], b_at[4];  // where each k-step of 16 starts (bytes into the tile)
  bool a_in_registers;
  const uint32_t* a_registers;  // [k-step][thread][4]
  float* out;                   // [thread][n / 2]
};

constexpr int kTileBytes = 16384;

template <int N> __global__ void product(Args p) {
  CUDA_EMU_DYNAMIC_SHARED(unsigned char, smem);
  unsigned char* a = smem + (1024 - __cvta_generic_to_shared(smem) % 1024) % 1024;
  unsigned char* b = a + kTileBytes;
  const int t = int(threadIdx.x);
  for (int i = t; i < kTileBytes / 2; i += 128) {
    reinterpret_cast<uint16_t*>(a)[i] = p.a_image[i];
    reinterpret_cast<uint16_t*>(b)[i] = p.b_image[i];
  }
  emu::publish_generic_writes();  // fence.proxy.async: the stores become the async proxy's
  __syncthreads();
  float d[N / 2];
  for (float& x : d) x = 0.f;
  emu::wgmma_fence();
  for (int ks = 0; ks < kK / 16; ++ks) {
    const uint64_t db = descriptor(__cvta_generic_to_shared(b) + p.b_at[ks], p.b.lbo, p.b.sbo, p.b.swizzle);
    if (p.a_in_registers) {
      emu::wgmma_mma_async(d, N, nullptr, p.a_registers + (ks * 128 + t) * 4, db, ks > 0, false, p.b.mn_major, true);
    } else {
      const uint64_t da = descriptor(__cvta_generic_to_shared(a) + p.a_at[ks], p.a.lbo, p.a.sbo, p.a.swizzle);
      emu::wgmma_mma_async(d, N, &da, nullptr, db, ks > 0, p.a.mn_major, p.b.mn_major, true);
    }
  }
  emu::wgmma_commit_group();
  emu::wgmma_wait_group(0);
  for (int i = 0; i < N / 2; ++i) p.out[t * (N / 2) + i] = d[i];
}

template <class T> T* upload(const std::vector<T>& host) {
  void* p = nullptr;
  REQUIRE(cudaMalloc(&p, host.size() * sizeof(T)) == cudaSuccess);
  REQUIRE(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
  return static_cast<T*>(p);
}

uint16_t bits(float x) { return __bfloat16_as_ushort(__float2bfloat16_rn(x)); }
float value(uint16_t b) { return __bfloat162float(__ushort_as_bfloat16(b)); }

// D = A (64 x 64) B (64 x N) through four k-steps, A and B in the given layouts; returns the
// largest difference from the product in double, D read through the ISA's accumulator layout.
// Where k-step ks starts: `within` bytes on per step inside a row of the swizzle pattern, for
// `per_row` steps, then the next column of atoms `across` bytes on.
struct Steps {
  uint32_t within, across;
  int per_row;
  uint32_t at(int ks) const { return uint32_t(ks % per_row) * within + uint32_t(ks / per_row) * across; }
};

template <int N> double run_product(Layout la, Layout lb, Steps sa, Steps sb, bool a_in_registers) {
  std::mt19937 gen(uint32_t(N + la.swizzle * 7 + lb.swizzle * 13 + lb.mn_major));
  std::normal_distribution<float> normal;
  std::vector<uint16_t> A(kM * kK), B(size_t(kK) * N), a_image(kTileBytes / 2, 0xffff), b_image(kTileBytes / 2, 0xffff);
  for (auto& x : A) x = bits(normal(gen));
  for (auto& x : B) x = bits(normal(gen));
  for (int m = 0; m < kM; ++m)
    for (int k = 0; k < kK; ++k) a_image[place(la, m, k) / 2] = A[size_t(m * kK + k)];
  for (int k = 0; k < kK; ++k)
    for (int n = 0; n < N; ++n) b_image[place(lb, n, k) / 2] = B[size_t(k * N + n)];
  // A as registers, per the ISA's A fragment: register r of thread t = 32 w + 4 g + q holds row
  // 16 w + g + 8 (r % 2), columns 2 q + 8 (r / 2) and + 1 of the k-step, the lower in the low half.
  std::vector<uint32_t> regs(size_t(kK / 16) * 128 * 4);
  for (int ks = 0; ks < kK / 16; ++ks)
    for (int t = 0; t < 128; ++t)
      for (int r = 0; r < 4; ++r) {
        const int row = 16 * (t / 32) + t % 32 / 4 + 8 * (r % 2), col = 16 * ks + 2 * (t % 4) + 8 * (r / 2);
        regs[size_t((ks * 128 + t) * 4 + r)] = A[size_t(row * kK + col)] | uint32_t(A[size_t(row * kK + col + 1)])
                                                                               << 16;
      }
  Args p{upload(a_image), upload(b_image), la, lb, {}, {}, a_in_registers, upload(regs), nullptr};
  for (int ks = 0; ks < 4; ++ks) {
    p.a_at[ks] = sa.at(ks);
    p.b_at[ks] = sb.at(ks);
  }
  REQUIRE(cudaMalloc(reinterpret_cast<void**>(&p.out), 128 * N / 2 * sizeof(float)) == cudaSuccess);
  const size_t smem = 1024 + 2 * kTileBytes;
  REQUIRE(cudaFuncSetAttribute(product<N>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)) == cudaSuccess);
  CUDA_EMU_LAUNCH(1, 128, smem, nullptr, product<N>)(p);
  std::vector<float> d(128 * N / 2);
  REQUIRE(cudaMemcpy(d.data(), p.out, d.size() * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
  double worst = 0;
  for (int t = 0; t < 128; ++t)
    for (int i = 0; i < N / 2; ++i) {  // the ISA's D layout
      const int row = 16 * (t / 32) + t % 32 / 4 + 8 * (i / 2 % 2), col = 8 * (i / 4) + 2 * (t % 4) + i % 2;
      double want = 0;
      for (int k = 0; k < kK; ++k) want += double(value(A[size_t(row * kK + k)])) * value(B[size_t(k * N + col)]);
      worst = std::max(worst, std::abs(double(d[size_t(t * (N / 2) + i)]) - want));
    }
  cudaFree(const_cast<uint16_t*>(p.a_image));
  cudaFree(const_cast<uint16_t*>(p.b_image));
  cudaFree(const_cast<uint32_t*>(p.a_registers));
  cudaFree(p.out);
  return worst;
}

// ---- misuse ----------------------------------------------------------------------------------

enum class Misuse { no_fence, read_before_wait, exit_in_flight, never_committed, registers_changed, stores_unfenced };

__global__ void misuse(Misuse what, float* out) {
  CUDA_EMU_DYNAMIC_SHARED(unsigned char, smem);
  unsigned char* tile = smem + (1024 - __cvta_generic_to_shared(smem) % 1024) % 1024;
  for (int i = int(threadIdx.x); i < 4096; i += 128) tile[i] = 0;
  if (what != Misuse::stores_unfenced) emu::publish_generic_writes();  // fence.proxy.async
  __syncthreads();
  const uint64_t desc = descriptor(__cvta_generic_to_shared(tile), 128, 256, none);
  float d[32] = {};
  uint32_t a[4] = {0, 0, 0, 0};
  if (what != Misuse::no_fence) emu::wgmma_fence();
  emu::wgmma_mma_async(d, 64, nullptr, a, desc, false, false, false, true);
  if (what == Misuse::never_committed) return;
  if (what == Misuse::registers_changed) a[1] = 7;
  emu::wgmma_commit_group();
  if (what == Misuse::exit_in_flight) return;
  if (what == Misuse::read_before_wait) out[threadIdx.x] = d[0];
  emu::wgmma_wait_group(0);
  if (what != Misuse::read_before_wait) out[threadIdx.x] = d[0];
}

// A consumer warpgroup (threads 0-127) multiplies A = ones (registers) by a B tile of zeros in
// shared memory, then releases the tile on an mbarrier; warp 4, the producer, waits for the
// release and refills the tile with ones. Released after wgmma.wait_group, the product is 0;
// released before it (`early`), the refill may land before the product reads its operand.
__global__ void release_tile(bool early, float* out) {
  CUDA_EMU_DYNAMIC_SHARED(unsigned char, smem);
  unsigned char* tile = smem + (1024 - __cvta_generic_to_shared(smem) % 1024) % 1024;
  auto* released = reinterpret_cast<uint64_t*>(tile + 4096);
  const int t = int(threadIdx.x);
  for (int i = t; i < 4096; i += 160) tile[i] = 0;
  if (t == 0) {
    emu::mbarrier_init(released, 128);
    emu::fence_mbarrier_init();
  }
  emu::publish_generic_writes();
  __syncthreads();
  if (t >= 128) {  // the producer
    emu::mbarrier_try_wait_parity(released, 0);
    const uint16_t one = bits(1.f);
    for (int i = t - 128; i < 2048; i += 32) reinterpret_cast<uint16_t*>(tile)[i] = one;
    emu::publish_generic_writes();
    return;
  }
  const uint64_t desc = descriptor(__cvta_generic_to_shared(tile), 128, 256, none);
  float d[32] = {};
  const uint32_t ones = uint32_t(bits(1.f)) * 0x10001u, a[4] = {ones, ones, ones, ones};
  emu::wgmma_fence();
  emu::wgmma_mma_async(d, 64, nullptr, a, desc, false, false, false, true);
  emu::wgmma_commit_group();
  if (early) emu::mbarrier_arrive(released);
  emu::wgmma_wait_group(0);
  if (!early) emu::mbarrier_arrive(released);
  out[t] = d[0];
}

}  // namespace

// Products of 64 bf16 terms, exact and summed in double, rounded once per k-step: well below 1e-4.
constexpr double kTolerance = 1e-4;
const Layout k128{false, b128, 0, 1024};  // K-major, 8 rows of 128 bytes per 1024-byte atom
const Steps k128_steps{32, 0, 4};         // K = 64 fills a row: 32 bytes per k-step

TEST_CASE("emulated wgmma: K-major A and B under the 128B swizzle, k-steps advancing 32 bytes within a row") {
  CHECK(run_product<64>(k128, k128, k128_steps, k128_steps, false) < kTolerance);
  CHECK(run_product<128>(k128, k128, k128_steps, k128_steps, false) < kTolerance);
}

TEST_CASE("emulated wgmma: MN-major B under the 128B swizzle, the second 64 columns LBO bytes on") {
  // B is 64 (K) x N: rows of K 128 bytes, 8-row atoms 1024 apart (SBO); columns 64 .. 127 8192
  // bytes on (LBO); a k-step is 16 rows, two atoms.
  const Layout mn128{true, b128, 8192, 1024};
  const Steps mn_steps{2048, 0, 4};
  CHECK(run_product<64>(k128, mn128, k128_steps, mn_steps, false) < kTolerance);
  CHECK(run_product<128>(k128, mn128, k128_steps, mn_steps, false) < kTolerance);
}

TEST_CASE("emulated wgmma: no swizzle (core matrices LBO and SBO apart) and the 64B swizzle") {
  // 8 x 16-byte core matrices: the two 8-column chunks of a k-step 128 bytes apart (LBO), 8-row
  // groups 1024 apart (SBO); a k-step is two chunks on.
  const Layout plain{false, none, 128, 1024};
  CHECK(run_product<64>(plain, plain, {0, 256, 1}, {0, 256, 1}, false) < kTolerance);
  // 64B: 32 elements of K per 64-byte row, atoms of 8 rows 512 bytes apart; K 32 .. 63 in the next
  // column of atoms, 4096 bytes on.
  const Layout k64{false, b64, 4096, 512};
  const Steps k64_steps{32, 4096, 2};
  CHECK(run_product<64>(k64, k64, k64_steps, k64_steps, false) < kTolerance);
}

TEST_CASE("emulated wgmma: A from registers in the ISA's fragment layout") {
  CHECK(run_product<64>(k128, k128, k128_steps, k128_steps, true) < kTolerance);
  const Layout mn128{true, b128, 8192, 1024};
  CHECK(run_product<128>(k128, mn128, k128_steps, {2048, 0, 4}, true) < kTolerance);
}

TEST_CASE(
    "emulated wgmma: a product with no fence, read before its wait, never waited for, or reading unfenced stores") {
  float* out = nullptr;
  REQUIRE(cudaMalloc(reinterpret_cast<void**>(&out), 128 * sizeof(float)) == cudaSuccess);
  auto launch = [&](Misuse m) { CUDA_EMU_LAUNCH(1, 128, 8192, nullptr, misuse)(m, out); };
  CHECK_THROWS_WITH_AS(launch(Misuse::no_fence), doctest::Contains("with no wgmma.fence"), KernelFault);
  CHECK_THROWS_WITH_AS(launch(Misuse::exit_in_flight), doctest::Contains("asynchronous work still in flight"),
                       KernelFault);
  CHECK_THROWS_WITH_AS(launch(Misuse::never_committed), doctest::Contains("issued but never committed"), KernelFault);
  CHECK_THROWS_WITH_AS(launch(Misuse::registers_changed), doctest::Contains("changed its A registers"), KernelFault);
  // Zeros stored with no fence.proxy.async: the product reads what the async proxy saw, the
  // shared memory's first bytes (NaN).
  launch(Misuse::stores_unfenced);
  std::vector<float> unfenced(128);
  REQUIRE(cudaMemcpy(unfenced.data(), out, unfenced.size() * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
  for (float x : unfenced) CHECK(std::isnan(x));
  // The accumulators read NaN until the product completes, which one schedule puts before the
  // read and another after it.
  if (emu::schedules() > 1) {
    CHECK_THROWS_WITH_AS(launch(Misuse::read_before_wait), doctest::Contains("without waiting for it"), KernelFault);
  } else {
    launch(Misuse::read_before_wait);
    std::vector<float> got(128);
    REQUIRE(cudaMemcpy(got.data(), out, got.size() * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
    for (float x : got) CHECK(std::isnan(x));
  }
  cudaFree(out);
}

TEST_CASE("emulated wgmma: a tile released before wgmma.wait_group is refilled under the product's feet") {
  float* out = nullptr;
  REQUIRE(cudaMalloc(reinterpret_cast<void**>(&out), 128 * sizeof(float)) == cudaSuccess);
  auto launch = [&](bool early) { CUDA_EMU_LAUNCH(1, 160, 8192, nullptr, release_tile)(early, out); };
  auto results = [&] {
    std::vector<float> got(128);
    REQUIRE(cudaMemcpy(got.data(), out, got.size() * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
    return got;
  };
  launch(false);
  for (float x : results()) CHECK(x == 0.f);
  // The product completes while the warpgroup waits, after the producer ran: first to last reads
  // the refill (16 = a row of ones times a column of ones); last to first completes it earlier.
  if (emu::schedules() > 1) {
    CHECK_THROWS_WITH_AS(launch(true), doctest::Contains("without waiting for it"), KernelFault);
  } else {
    launch(true);
    for (float x : results()) CHECK(x == 16.f);
  }
  cudaFree(out);
}
