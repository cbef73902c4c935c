#include "tensor/cuda/emu/launch.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "tensor/cuda/emu/block.h"
#include "tensor/cuda/emu/device_memory.h"
#include "tensor/cuda/emu/warp_matrix.h"
#include "tensor/error.h"

namespace qkv::cuda_emu {
namespace {

constexpr size_t kDefaultSharedBytes = size_t(48) << 10;  // without the attribute
constexpr size_t kMaxSharedBytes = size_t(227) << 10;     // sm_90's opt-in limit per block

// The block the calling OS thread runs.
struct BlockContext {
  const LaunchSite* site = nullptr;
  uint3 index{};
  unsigned char* shared = nullptr;
  bool order_dependent = false;
};
thread_local BlockContext context;

const LaunchSite& running_site(const char* what) {
  check<Error>(context.site != nullptr, "emulated device: ", what, " read outside a kernel");
  return *context.site;
}

std::string describe(const LaunchSite& s) {
  return cat("the launch of ", s.name, " at ", s.file, ":", s.line, " (grid ", s.grid.x, "x", s.grid.y, "x", s.grid.z,
             ", block ", s.block.x, "x", s.block.y, "x", s.block.z, ", ", s.shared_bytes,
             " bytes of dynamic shared memory)");
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

thread_local uint64_t launch_counter = 0;  // seeds the shuffled schedule

// Every block of the grid, in order, under one schedule of its threads.
void run_blocks(const LaunchSite& site, const std::function<void()>& thread, Schedule schedule) {
  const int threads = int(site.block.x * site.block.y * site.block.z);
  const std::function<void(int)> body = [&](int) { thread(); };
  ++launch_counter;
  for (unsigned z = 0; z < site.grid.z; ++z)
    for (unsigned y = 0; y < site.grid.y; ++y)
      for (unsigned x = 0; x < site.grid.x; ++x) {
        // Dynamic shared memory: exactly the launch's size, fresh per block, every byte 0xff.
        const std::unique_ptr<unsigned char[]> shared(new unsigned char[site.shared_bytes ? site.shared_bytes : 1]);
        std::memset(shared.get(), 0xff, site.shared_bytes);
        const SharedMemory registered(shared.get(), site.shared_bytes);
        context.index = uint3{x, y, z};
        context.shared = shared.get();
        try {
          run_block(threads, body, schedule, launch_counter * 0x9e3779b97f4a7c15ull + x + (uint64_t(y) << 32));
        } catch (const Error& e) {
          throw DeviceError(cat(describe(site), ", block (", x, ", ", y, ", ", z, "): ", e.what()));
        }
      }
}

// A launch whose configuration the runtime accepted (run_grid checked it).
void execute(const LaunchSite& site, const std::function<void()>& thread) {
  check<Error>(context.site == nullptr, "emulated device: a kernel launched from inside a kernel");
  context = BlockContext{&site, {}, nullptr, false};
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
      throw DeviceError(cat(describe(site), ": its result depends on the order of its threads (",
                            k == 0 ? "last to first" : "shuffled", " differs from first to last at ", diff,
                            "): a thread reads what another writes with no barrier between them"));
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
void note_order_dependent() { context.order_dependent = true; }

int schedules() {
  static const int n = [] {
    const char* v = std::getenv("QKV_EMU_SCHEDULES");
    const int k = v && *v ? std::atoi(v) : 3;
    check<ValueError>(k >= 1 && k <= 3, "QKV_EMU_SCHEDULES: expected 1, 2 or 3 thread orders per launch, got '",
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
