#include "cuda_emu/launch.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "cuda_emu/block.h"
#include "cuda_emu/device_memory.h"
#include "cuda_emu/error.h"
#include "cuda_emu/shared_memory.h"

namespace qkv::cuda_emu {
namespace {

constexpr size_t kDefaultSharedBytes = size_t(48) << 10;  // without the attribute
constexpr size_t kMaxSharedBytes = size_t(227) << 10;     // sm_90's opt-in limit per block

// The block the calling OS thread runs.
struct BlockContext {
  const LaunchSite* site = nullptr;
  uint3 index{};
  unsigned char* shared = nullptr;
  uint64_t block_serial = 0;  // which block of this OS thread's life: fresh static shared memory
  bool order_dependent = false;
};
thread_local BlockContext context;
thread_local uint64_t blocks_run = 0;
// Static __shared__ arrays this OS thread has seen, and the block that last filled each.
thread_local std::map<void*, uint64_t> static_shared;

const LaunchSite& running_site(const char* what) {
  require<EmulatorError>(context.site != nullptr, "emulated device: ", what, " read outside a kernel");
  return *context.site;
}

std::string describe(const LaunchSite& s) {
  return str("the launch of ", s.name, " at ", s.file, ":", s.line, " (grid ", s.grid.x, "x", s.grid.y, "x", s.grid.z,
             ", block ", s.block.x, "x", s.block.y, "x", s.block.z, ", ", s.shared_bytes,
             " bytes of dynamic shared memory)");
}

const char* schedule_name(Schedule s) {
  switch (s) {
    case Schedule::forward: return "first to last";
    case Schedule::reverse: return "last to first";
    case Schedule::shuffled: return "shuffled";
  }
  return "";
}

// The runtime's refusal of a launch configuration, or cudaSuccess.
cudaError_t configuration_error(const LaunchSite& s) {
  const uint64_t threads = uint64_t(s.block.x) * s.block.y * s.block.z;
  if (threads == 0 || threads > 1024 || s.block.z > 64) return cudaErrorInvalidConfiguration;
  if (s.grid.x == 0 || s.grid.y == 0 || s.grid.z == 0 || s.grid.x > 0x7fffffffu || s.grid.y > 65535 || s.grid.z > 65535)
    return cudaErrorInvalidConfiguration;
  if (s.shared_bytes > kMaxSharedBytes) return cudaErrorInvalidValue;
  if (s.shared_bytes > kDefaultSharedBytes &&
      (s.kernel == nullptr || size_t(max_dynamic_shared(s.kernel)) < s.shared_bytes))
    return cudaErrorInvalidValue;
  return cudaSuccess;
}

// ---- coverage (QKV_EMU_COVERAGE) ----------------------------------------------------------------

struct Coverage {
  std::mutex mu;
  // (file, kernel as written, instance) -> regimes seen: bit 0 one warp, 1 several warps, 2 one
  // block, 3 several blocks
  std::map<std::tuple<std::string, std::string, std::string>, unsigned> seen;
};

Coverage* coverage() {
  static Coverage* c = []() -> Coverage* {
    const char* dir = std::getenv("QKV_EMU_COVERAGE");
    if (!dir || !*dir) return nullptr;
    static std::string folder = dir;
    std::atexit([] {
      Coverage& cov = *coverage();
      const std::string path = folder + "/launches." + std::to_string(getpid()) + ".txt";
      std::FILE* f = std::fopen(path.c_str(), "w");
      if (!f) return;
      for (const auto& [key, regimes] : cov.seen)
        std::fprintf(f, "%s\t%s\t%u\t%s\n", std::get<0>(key).c_str(), std::get<1>(key).c_str(), regimes,
                     std::get<2>(key).c_str());
      std::fclose(f);
    });
    return new Coverage();
  }();
  return c;
}

void record_coverage(const LaunchSite& s) {
  Coverage* c = coverage();
  if (!c) return;
  const uint64_t threads = uint64_t(s.block.x) * s.block.y * s.block.z;
  const uint64_t blocks = uint64_t(s.grid.x) * s.grid.y * s.grid.z;
  const unsigned regimes = (threads <= 32 ? 1u : 2u) | (blocks == 1 ? 4u : 8u);
  std::lock_guard<std::mutex> lock(c->mu);
  c->seen[{s.file, s.name, s.instance ? s.instance : ""}] |= regimes;
}

// ---- running ------------------------------------------------------------------------------------

thread_local uint64_t launch_counter = 0;  // seeds the shuffled schedules

// The grid's blocks in the schedule's order.
std::vector<uint3> block_order(const LaunchSite& site, Schedule schedule, uint64_t seed) {
  std::vector<uint3> order;
  order.reserve(size_t(site.grid.x) * site.grid.y * site.grid.z);
  for (unsigned z = 0; z < site.grid.z; ++z)
    for (unsigned y = 0; y < site.grid.y; ++y)
      for (unsigned x = 0; x < site.grid.x; ++x) order.push_back(uint3{x, y, z});
  if (schedule == Schedule::reverse) std::reverse(order.begin(), order.end());
  if (schedule == Schedule::shuffled) std::shuffle(order.begin(), order.end(), std::mt19937_64(seed));
  return order;
}

// Every block of the grid, in the schedule's order, each under the schedule.
void run_blocks(const LaunchSite& site, const std::function<void()>& thread, Schedule schedule) {
  const int threads = int(site.block.x * site.block.y * site.block.z);
  const std::function<void(int)> body = [&](int) { thread(); };
  const uint64_t seed = ++launch_counter * 0x9e3779b97f4a7c15ull;
  for (const uint3 b : block_order(site, schedule, seed)) {
    // Dynamic shared memory: exactly the launch's size, fresh per block, every byte 0xff.
    const std::unique_ptr<unsigned char[]> shared(new unsigned char[site.shared_bytes ? site.shared_bytes : 1]);
    std::memset(shared.get(), 0xff, site.shared_bytes);
    const SharedWindow window(shared.get(), site.shared_bytes);
    context.index = b;
    context.shared = shared.get();
    context.block_serial = ++blocks_run;
    try {
      run_block(threads, body, schedule, seed + b.x + (uint64_t(b.y) << 24) + (uint64_t(b.z) << 44));
    } catch (const EmulatorError& e) {
      throw KernelFault(
          str(describe(site), ", block (", b.x, ", ", b.y, ", ", b.z, "), ", schedule_name(schedule), ": ", e.what()));
    }
  }
}

// A launch whose configuration the runtime accepted (run_grid checked it).
void execute(const LaunchSite& site, const std::function<void()>& thread) {
  require<EmulatorError>(context.site == nullptr, "emulated device: a kernel launched from inside a kernel");
  record_coverage(site);
  const DeviceAccess access;
  context = BlockContext{&site, {}, nullptr, 0, false};
  struct Reset {
    ~Reset() { context = BlockContext{}; }
  } reset;
  const int orders = schedules();
  if (orders == 1) {
    run_blocks(site, thread, Schedule::forward);
    return;
  }
  const MemorySnapshot before = snapshot_memory();
  run_blocks(site, thread, Schedule::forward);
  if (context.order_dependent) return;
  const MemorySnapshot after = snapshot_memory();
  const Schedule others[] = {Schedule::reverse, Schedule::shuffled};
  for (int k = 0; k + 1 < orders; ++k) {
    restore_memory(before);
    run_blocks(site, thread, others[k]);
    const std::string diff = first_difference(after);
    if (!diff.empty()) {
      restore_memory(after);
      throw KernelFault(str(describe(site), ": its result depends on the order of its threads or blocks (",
                            schedule_name(others[k]), " differs from first to last at ", diff,
                            "): a thread reads what another writes with no barrier between them, or what an "
                            "asynchronous copy or product writes without waiting for it"));
    }
  }
}

}  // namespace

uint3 thread_idx() {
  const dim3 b = running_site("threadIdx").block;
  const unsigned linear = unsigned(thread_index());
  return uint3{linear % b.x, linear / b.x % b.y, linear / (b.x * b.y)};
}
uint3 block_idx() {
  running_site("blockIdx");
  return context.index;
}
dim3 block_dim() { return running_site("blockDim").block; }
dim3 grid_dim() { return running_site("gridDim").grid; }
unsigned char* dynamic_shared() {
  running_site("dynamic shared memory");
  return context.shared;
}

void fresh_static_shared(void* p, size_t bytes) {
  running_site("static shared memory");
  uint64_t& filled = static_shared[p];
  if (filled == context.block_serial) return;
  filled = context.block_serial;
  std::memset(p, 0xff, bytes);
}

void note_order_dependent() { context.order_dependent = true; }

int schedules() {
  static const int n = [] {
    const char* v = std::getenv("QKV_EMU_SCHEDULES");
    const int k = v && *v ? std::atoi(v) : 3;
    require<EmulatorError>(k >= 1 && k <= 3, "QKV_EMU_SCHEDULES: expected 1, 2 or 3 thread orders per launch, got '",
                           v ? v : "", "'");
    return k;
  }();
  return n;
}

void run_grid(const LaunchSite& site, std::function<void()> thread) {
  const cudaError_t refused = configuration_error(site);
  if (refused != cudaSuccess) set_launch_error(refused);
  else if (std::vector<std::function<void()>>* graph = capture_of(site.stream))
    graph->push_back([site, thread = std::move(thread)] { execute(site, thread); });
  else execute(site, thread);
}

}  // namespace qkv::cuda_emu
