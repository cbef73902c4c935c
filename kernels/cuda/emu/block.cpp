#include "kernels/cuda/emu/block.h"

#include <ucontext.h>

#include <algorithm>
#include <exception>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define QKV_EMU_ASAN 1
#endif

namespace qkv::cuda_emu {
namespace {

constexpr size_t kStackBytes = size_t(128) << 10;  // per thread; device code keeps little on its stack
constexpr int kMaxThreads = 1024;                  // a CUDA block's limit

enum class State { running, done, at_barrier, at_collective };

struct Thread {
  ucontext_t context{};
  std::unique_ptr<char[]> stack;
  State state = State::running;
  // At a warp collective:
  const char* op = nullptr;
  uint32_t mask = 0;
  void* slot = nullptr;
  WarpModel model = nullptr;
  const void* model_context = nullptr;
};

struct Block {
  ucontext_t scheduler{};
  std::vector<Thread> threads;
  int current = -1;
  const std::function<void(int)>* body = nullptr;
  std::exception_ptr error;
  const void* scheduler_stack = nullptr;  // for AddressSanitizer's fiber switches
  size_t scheduler_stack_size = 0;
};

thread_local Block* active = nullptr;

// swapcontext, with AddressSanitizer told which stack runs next (a switch it cannot see).
void switch_context(ucontext_t* from, ucontext_t* to, const void* to_stack, size_t to_size, bool from_ends = false) {
#ifdef QKV_EMU_ASAN
  void* fake_stack = nullptr;
  __sanitizer_start_switch_fiber(from_ends ? nullptr : &fake_stack, to_stack, to_size);
  swapcontext(from, to);
  __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
#else
  (void)to_stack, (void)to_size, (void)from_ends;
  swapcontext(from, to);
#endif
}

void thread_main(int index) {
  Block& b = *active;
#ifdef QKV_EMU_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &b.scheduler_stack, &b.scheduler_stack_size);
#endif
  try {
    (*b.body)(index);
  } catch (...) {
    if (!b.error) b.error = std::current_exception();
  }
  Thread& t = b.threads[size_t(index)];
  t.state = State::done;
  switch_context(&t.context, &b.scheduler, b.scheduler_stack, b.scheduler_stack_size, /*from_ends=*/true);
}

// Where thread i stopped, in words.
std::string where(const Thread& t) {
  switch (t.state) {
    case State::done: return "exited";
    case State::at_barrier: return "at __syncthreads";
    case State::at_collective: return cat("at ", t.op);
    case State::running: return "running";
  }
  return "";
}

// "threads 3, 4 (exited), 7 (at __syncthreads)": up to 8 named.
std::string describe(const Block& b, const std::vector<int>& ids) {
  std::string s;
  for (size_t k = 0; k < ids.size() && k < 8; ++k)
    s += cat(k ? ", " : "", ids[k], " (", where(b.threads[size_t(ids[k])]), ")");
  if (ids.size() > 8) s += cat(" and ", ids.size() - 8, " more");
  return s;
}

// Runs the warp collectives whose masks have all met; a mask with a lane elsewhere is a
// Divergence. Returns whether any ran.
bool meet_warps(Block& b) {
  bool ran = false;
  const int n = int(b.threads.size());
  for (int w0 = 0; w0 < n; w0 += kLanes) {
    int first = -1;
    for (int i = w0; i < std::min(n, w0 + kLanes) && first < 0; ++i)
      if (b.threads[size_t(i)].state == State::at_collective) first = i;
    if (first < 0) continue;
    const Thread& f = b.threads[size_t(first)];
    std::vector<void*> slots(kLanes, nullptr);
    std::vector<int> astray;
    for (int lane = 0; lane < kLanes; ++lane) {
      if (!(f.mask >> lane & 1u)) continue;
      const int i = w0 + lane;
      if (i >= n) {
        astray.push_back(i);
        continue;
      }
      const Thread& t = b.threads[size_t(i)];
      if (t.state != State::at_collective || std::string(t.op) != f.op || t.mask != f.mask || t.model != f.model)
        astray.push_back(i);
      else slots[size_t(lane)] = t.slot;
    }
    if (!astray.empty())
      throw Divergence(cat("emulated block: thread ", first, " waits at ", f.op, " with mask 0x", std::hex, f.mask,
                           std::dec, ", but lanes of that mask are elsewhere: ", describe(b, astray)));
    f.model(slots.data(), f.mask, f.model_context);
    for (int lane = 0; lane < kLanes; ++lane)
      if (f.mask >> lane & 1u) b.threads[size_t(w0 + lane)].state = State::running;
    ran = true;
  }
  return ran;
}

// Opens the barrier once every thread waits at it; a thread that exited meanwhile is a
// Divergence. Returns whether it opened.
bool open_barrier(Block& b) {
  std::vector<int> waiting, exited, elsewhere;
  for (int i = 0; i < int(b.threads.size()); ++i) {
    const State s = b.threads[size_t(i)].state;
    if (s == State::at_barrier) waiting.push_back(i);
    else if (s == State::done) exited.push_back(i);
    else elsewhere.push_back(i);
  }
  if (waiting.empty()) return false;
  if (!elsewhere.empty()) return false;  // a warp collective is still pending
  if (!exited.empty())
    throw Divergence(cat("emulated block: threads ", describe(b, waiting), " wait at __syncthreads, which threads ",
                         describe(b, exited), " left without reaching"));
  for (int i : waiting) b.threads[size_t(i)].state = State::running;
  return true;
}

std::vector<int> order_of(int n, Schedule schedule, std::mt19937_64& gen) {
  std::vector<int> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  if (schedule == Schedule::reverse) std::reverse(order.begin(), order.end());
  if (schedule == Schedule::shuffled) std::shuffle(order.begin(), order.end(), gen);
  return order;
}

void schedule_threads(Block& b, Schedule schedule, uint64_t seed) {
  std::mt19937_64 gen(seed);
  const int n = int(b.threads.size());
  for (;;) {
    for (int i : order_of(n, schedule, gen)) {  // every runnable thread, to its next meeting point
      Thread& t = b.threads[size_t(i)];
      if (t.state != State::running) continue;
      b.current = i;
      switch_context(&b.scheduler, &t.context, t.stack.get(), kStackBytes);
      if (b.error) std::rethrow_exception(b.error);
    }
    if (std::all_of(b.threads.begin(), b.threads.end(), [](const Thread& t) { return t.state == State::done; })) return;
    if (meet_warps(b)) continue;
    if (open_barrier(b)) continue;
    std::vector<int> stuck;
    for (int i = 0; i < n; ++i)
      if (b.threads[size_t(i)].state != State::done) stuck.push_back(i);
    throw Divergence(cat("emulated block: no thread can go on: ", describe(b, stuck)));
  }
}

Block& current_block(const char* what) {
  check<Error>(active != nullptr && active->current >= 0, "emulated block: ", what, " called outside run_block");
  return *active;
}

// Suspends the calling thread until the scheduler lets it go on.
void suspend(Block& b) {
  Thread& t = b.threads[size_t(b.current)];
  switch_context(&t.context, &b.scheduler, b.scheduler_stack, b.scheduler_stack_size);
}

// A fiber that starts in thread_main(index). Its own function: getcontext returns twice, and
// a loop variable beside it could be clobbered.
[[gnu::noinline]] void make_fiber(Thread& t, int index) {
  t.stack.reset(new char[kStackBytes]);
  getcontext(&t.context);
  t.context.uc_stack.ss_sp = t.stack.get();
  t.context.uc_stack.ss_size = kStackBytes;
  t.context.uc_link = nullptr;
  makecontext(&t.context, reinterpret_cast<void (*)()>(thread_main), 1, index);
}

}  // namespace

void run_block(int threads, const std::function<void(int thread)>& body, Schedule schedule, uint64_t seed) {
  check<Error>(active == nullptr, "emulated block: run_block called from inside a block");
  check<ValueError>(threads >= 1 && threads <= kMaxThreads, "emulated block: ", threads,
                    " threads per block (expected 1 to ", kMaxThreads, ")");
  auto b = std::make_unique<Block>();
  b->body = &body;
  b->threads.resize(size_t(threads));
  for (int i = 0; i < threads; ++i) make_fiber(b->threads[size_t(i)], i);
  active = b.get();
  std::exception_ptr failure;
  try {
    schedule_threads(*b, schedule, seed);
  } catch (...) { failure = std::current_exception(); }
  active = nullptr;
  // Threads still suspended are dropped with their stacks (the error says why the block stopped).
  if (failure) std::rethrow_exception(failure);
}

int thread_index() { return current_block("thread_index").current; }

void sync_threads() {
  Block& b = current_block("__syncthreads");
  b.threads[size_t(b.current)].state = State::at_barrier;
  suspend(b);
}

void warp_converge(const char* op, uint32_t mask, void* slot, WarpModel model, const void* context) {
  Block& b = current_block(op);
  Thread& t = b.threads[size_t(b.current)];
  check<Divergence>(mask >> (b.current % kLanes) & 1u, "emulated block: thread ", b.current, " calls ", op,
                    " with mask 0x", std::hex, mask, std::dec, ", which leaves out its own lane");
  t.state = State::at_collective;
  t.op = op;
  t.mask = mask;
  t.slot = slot;
  t.model = model;
  t.model_context = context;
  suspend(b);
}

}  // namespace qkv::cuda_emu
