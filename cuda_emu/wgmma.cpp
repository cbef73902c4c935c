#include "cuda_emu/wgmma.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <array>
#include <cmath>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <vector>

#include "cuda_emu/block.h"
#include "cuda_emu/error.h"
#include "cuda_emu/shared_memory.h"
#include "cuda_emu/tensor_copy.h"

namespace qkv::cuda_emu {
namespace {

constexpr int kM = 64, kK = 16, kMaxN = 256, kMaxWarpgroups = 8;

struct Op {
  int n = 0;
  bool scale_d = false, trans_a = false, trans_b = false, bf16 = true, a_in_registers = false;
  uint64_t desc_a = 0, desc_b = 0;
  std::array<float*, kWarpgroupThreads> d{};
  std::array<std::array<uint32_t, 4>, kWarpgroupThreads> a{};  // A's registers when issued
  std::array<const uint32_t*, kWarpgroupThreads> a_at{};       // where they live
};

// D while its products are in flight: the values, and how many issued products still add to it.
struct Shadow {
  std::vector<float> values;
  int refs = 0;
};

struct Warpgroup {
  bool fenced = false;
  std::vector<std::shared_ptr<Op>> uncommitted;
  std::deque<uint64_t> groups;  // tickets of committed groups, oldest first
  std::map<float*, Shadow> shadows;
};

struct State {
  std::array<Warpgroup, kMaxWarpgroups> groups;
  bool check_registered = false;
};

State& state() {
  State& s = block_local<State>();
  if (!s.check_registered) {
    s.check_registered = true;
    on_block_end([&s] {
      for (int g = 0; g < kMaxWarpgroups; ++g)
        require<AsyncError>(s.groups[size_t(g)].uncommitted.empty(), "wgmma: warpgroup ", g,
                            " exited with wgmma.mma_async issued but never committed (wgmma.commit_group)");
    });
  }
  return s;
}

float widen(uint16_t bits, bool bf16) {
  return bf16 ? __bfloat162float(__ushort_as_bfloat16(bits)) : __half2float(__ushort_as_half(bits));
}

void check_descriptor(const MatrixDescriptor& d, const char* which) {
  require<AsyncError>(d.base_offset == 0, "wgmma.mma_async: matrix ", which, "'s descriptor has base offset ",
                      d.base_offset, " (not modelled: only 0 is)");
  if (d.swizzle > 0) {
    const uint32_t rows = (1u << d.swizzle) - 1u;
    require<AsyncError>(((d.start >> 7) & rows) == 0, "wgmma.mma_async: matrix ", which, "'s start address ", d.start,
                        " is not on the first row of its ", 16 << d.swizzle,
                        "-byte swizzle pattern (a base offset would be needed: not modelled)");
  }
}

// Element (mn, k) of an operand from the async proxy's view of shared memory.
float operand(const MatrixDescriptor& d, bool mn_major, int mn, int k, bool bf16) {
  uint16_t bits = 0;
  async_load(swizzle_address(operand_address(d, mn_major, mn, k), d.swizzle), &bits, 2);
  return widen(bits, bf16);
}

// Issued: the accumulators go into their shadows and read NaN until the product completes.
void issue_model(void* const* slots, int warpgroup, const void*) {
  Warpgroup& wg = state().groups[size_t(warpgroup)];
  const auto* first = static_cast<const Op*>(slots[0]);
  require<AsyncError>(wg.fenced, "wgmma.mma_async: warpgroup ", warpgroup,
                      " issued a product with no wgmma.fence since it last waited (or ever): the registers it "
                      "reads and writes may not be ready");
  auto op = std::make_shared<Op>(*first);
  for (int t = 0; t < kWarpgroupThreads; ++t) {
    const auto* o = static_cast<const Op*>(slots[t]);
    require<AsyncError>(o->n == first->n && o->desc_b == first->desc_b && o->desc_a == first->desc_a &&
                            o->a_in_registers == first->a_in_registers && o->scale_d == first->scale_d,
                        "wgmma.mma_async: thread ", 128 * warpgroup + t, " of warpgroup ", warpgroup,
                        " gave other operands than thread ", 128 * warpgroup);
    op->d[size_t(t)] = o->d[0];
    op->a[size_t(t)] = o->a[0];
    op->a_at[size_t(t)] = o->a_at[0];
    Shadow& sh = wg.shadows[o->d[0]];
    if (sh.refs++ == 0) sh.values.assign(o->d[0], o->d[0] + op->n / 2);
    std::fill(o->d[0], o->d[0] + op->n / 2, std::nanf(""));
  }
  if (!op->a_in_registers) check_descriptor(decode_matrix_descriptor(op->desc_a), "A");
  check_descriptor(decode_matrix_descriptor(op->desc_b), "B");
  wg.uncommitted.push_back(std::move(op));
}

// One product into the shadows of its accumulators.
void run(Warpgroup& wg, int warpgroup, const Op& op) {
  for (int t = 0; t < kWarpgroupThreads; ++t)
    require<AsyncError>(!thread_exited(128 * warpgroup + t), "wgmma: thread ", 128 * warpgroup + t,
                        " exited with a wgmma.mma_async in flight (no wgmma.wait_group waited for it)");
  static thread_local float A[kM][kK], B[kK][kMaxN];
  if (op.a_in_registers) {
    for (int t = 0; t < kWarpgroupThreads; ++t) {
      require<AsyncError>(std::memcmp(op.a_at[size_t(t)], op.a[size_t(t)].data(), 16) == 0, "wgmma: thread ",
                          128 * warpgroup + t, " changed its A registers before the product reading them completed");
      const int w = t / 32, g = t % 32 / 4, q = t % 4;
      for (int r = 0; r < 4; ++r)
        for (int h = 0; h < 2; ++h) {
          const uint32_t reg = op.a[size_t(t)][size_t(r)];
          A[16 * w + g + 8 * (r % 2)][2 * q + 8 * (r / 2) + h] =
              widen(uint16_t(h ? reg >> 16 : reg & 0xffffu), op.bf16);
        }
    }
  } else {
    const MatrixDescriptor da = decode_matrix_descriptor(op.desc_a);
    for (int m = 0; m < kM; ++m)
      for (int k = 0; k < kK; ++k) A[m][k] = operand(da, op.trans_a, m, k, op.bf16);
  }
  const MatrixDescriptor db = decode_matrix_descriptor(op.desc_b);
  for (int k = 0; k < kK; ++k)
    for (int n = 0; n < op.n; ++n) B[k][n] = operand(db, op.trans_b, n, k, op.bf16);
  for (int t = 0; t < kWarpgroupThreads; ++t) {
    Shadow& sh = wg.shadows.at(op.d[size_t(t)]);
    const int w = t / 32, g = t % 32 / 4, q = t % 4;
    for (int i = 0; i < op.n / 2; ++i) {
      const int row = 16 * w + g + 8 * ((i / 2) % 2), col = 8 * (i / 4) + 2 * q + i % 2;
      double acc = op.scale_d ? double(sh.values[size_t(i)]) : 0.0;
      for (int k = 0; k < kK; ++k) acc += double(A[row][k]) * double(B[k][col]);
      sh.values[size_t(i)] = float(acc);
    }
  }
  for (int t = 0; t < kWarpgroupThreads; ++t) {
    auto it = wg.shadows.find(op.d[size_t(t)]);
    if (--it->second.refs > 0) continue;
    std::copy(it->second.values.begin(), it->second.values.end(), it->first);
    wg.shadows.erase(it);
  }
}

// A committed group; completing it completes the warpgroup's older groups first (they retire in
// order).
struct Group final : AsyncWork {
  int warpgroup = 0;
  uint64_t ticket = 0;
  std::vector<std::shared_ptr<Op>> ops;
  const char* name() const override { return "a wgmma group"; }
  void complete() override {
    Warpgroup& wg = state().groups[size_t(warpgroup)];
    for (const uint64_t older : wg.groups) {
      if (older == ticket) break;
      complete_now(older);  // a no-op for one that already completed
    }
    for (const auto& op : ops) run(wg, warpgroup, *op);
  }
};

void fence_model(void* const*, int warpgroup, const void*) { state().groups[size_t(warpgroup)].fenced = true; }

void commit_model(void* const*, int warpgroup, const void*) {
  Warpgroup& wg = state().groups[size_t(warpgroup)];
  auto group = std::make_unique<Group>();
  Group* posted = group.get();
  posted->warpgroup = warpgroup;
  posted->ops = std::move(wg.uncommitted);
  wg.uncommitted.clear();
  posted->ticket = post_async(std::move(group));
  wg.groups.push_back(posted->ticket);
}

// The warpgroup meets at wgmma.wait_group; each thread then waits (wait_ready) until no more
// than `keep` of its groups are in flight. The groups complete when the schedule chooses, not at
// the wait: meanwhile other warps run, so an mbarrier arrive placed before the wait lets a
// producer refill a stage the product has yet to read.
void wait_model(void* const* slots, int warpgroup, const void*) {
  const int keep = *static_cast<const int*>(slots[0]);
  require<AsyncError>(keep >= 0 && keep <= 7, "wgmma.wait_group: ", keep, " (expected 0 to 7)");
  state().groups[size_t(warpgroup)].fenced = false;
}

struct WaitFor {
  int warpgroup, keep;
};

bool wait_ready(const void* context) {
  const auto* w = static_cast<const WaitFor*>(context);
  std::deque<uint64_t>& groups = state().groups[size_t(w->warpgroup)].groups;
  while (!groups.empty() && !pending(groups.front())) groups.pop_front();  // they retire in order
  return int(groups.size()) <= w->keep;
}

int warpgroup_of_caller(const char* what) {
  const int g = thread_index() / kWarpgroupThreads;
  require<EmulatorError>(g < kMaxWarpgroups, what, ": warpgroup ", g, " (at most ", kMaxWarpgroups, ")");
  return g;
}

}  // namespace

MatrixDescriptor decode_matrix_descriptor(uint64_t desc) {
  MatrixDescriptor d;
  d.start = uint32_t(desc & 0x3fff) << 4;
  d.lbo = uint32_t(desc >> 16 & 0x3fff) << 4;
  d.sbo = uint32_t(desc >> 32 & 0x3fff) << 4;
  d.base_offset = int(desc >> 49 & 0x7);
  const int mode = int(desc >> 62 & 0x3);  // 0 none, 1 128B, 2 64B, 3 32B
  d.swizzle = mode == 0 ? 0 : 4 - mode;
  return d;
}

uint32_t operand_address(const MatrixDescriptor& d, bool mn_major, int mn, int k) {
  const uint32_t span = d.swizzle == 0 ? 0 : 16u << d.swizzle, units = span / 16;
  const uint32_t m8 = uint32_t(mn % 8), mb = uint32_t(mn / 8), k8 = uint32_t(k % 8), kb = uint32_t(k / 8);
  uint32_t offset;
  if (!mn_major)
    offset = span == 0 ? m8 * 16 + mb * d.sbo + kb * d.lbo + k8 * 2 : m8 * span + mb * d.sbo + kb * 16 + k8 * 2;
  else
    offset = span == 0 ? m8 * 2 + mb * d.sbo + k8 * 16 + kb * d.lbo
                       : m8 * 2 + (mb % units) * 16 + (mb / units) * d.lbo + k8 * span + kb * d.sbo;
  return d.start + offset;
}

void wgmma_fence() { warpgroup_converge("wgmma.fence", nullptr, fence_model); }

void wgmma_commit_group() { warpgroup_converge("wgmma.commit_group", nullptr, commit_model); }

void wgmma_wait_group(int in_flight) {
  int keep = in_flight;
  warpgroup_converge("wgmma.wait_group", &keep, wait_model);
  const WaitFor w{thread_index() / kWarpgroupThreads, keep};
  wait_until("wgmma.wait_group", wait_ready, &w);
}

void wgmma_mma_async(float* d, int n, const uint64_t* desc_a, const uint32_t* a_regs, uint64_t desc_b, bool scale_d,
                     bool trans_a, bool trans_b, bool bf16) {
  warpgroup_of_caller("wgmma.mma_async");
  require<AsyncError>(n >= 8 && n <= kMaxN && n % 8 == 0, "wgmma.mma_async: N = ", n, " (expected 8 to 256, step 8)");
  require<AsyncError>(desc_a != nullptr || !trans_a, "wgmma.mma_async: A from registers cannot be transposed");
  Op op;
  op.n = n;
  op.scale_d = scale_d;
  op.trans_a = trans_a;
  op.trans_b = trans_b;
  op.bf16 = bf16;
  op.a_in_registers = desc_a == nullptr;
  op.desc_a = desc_a ? *desc_a : 0;
  op.desc_b = desc_b;
  op.d[0] = d;
  if (a_regs) {
    std::memcpy(op.a[0].data(), a_regs, 16);
    op.a_at[0] = a_regs;
  }
  warpgroup_converge(bf16 ? "wgmma.mma_async.bf16" : "wgmma.mma_async.f16", &op, issue_model);
}

}  // namespace qkv::cuda_emu
