#include "tensor/cuda/emu/block.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <exception>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define QKV_EMU_ASAN 1
#endif

#if !defined(__x86_64__)
#error "the emulated CUDA device switches its fibers with x86-64 code (tensor/cuda/emu/block.cpp)"
#endif

// Saves the callee-saved registers, MXCSR and the x87 control word on the current stack, stores
// the stack pointer in *save and continues on the stack `load` with the registers saved there
// (System V x86-64 ABI). No signal mask and no system call: a switch costs a few nanoseconds,
// where swapcontext makes a sigprocmask call each time.
extern "C" void qkv_emu_switch_stack(void** save, void* load);
// Where a fresh fiber's first switch lands: calls r13(r12), which never returns.
extern "C" void qkv_emu_fiber_start();
asm(R"(
  .text
  .globl qkv_emu_switch_stack
  .type qkv_emu_switch_stack, @function
qkv_emu_switch_stack:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size qkv_emu_switch_stack, .-qkv_emu_switch_stack

  .globl qkv_emu_fiber_start
  .type qkv_emu_fiber_start, @function
qkv_emu_fiber_start:
  movq %r12, %rdi
  callq *%r13
  ud2
  .size qkv_emu_fiber_start, .-qkv_emu_fiber_start
  .section .note.GNU-stack,"",@progbits
  .text
)");

namespace qkv::cuda_emu {
namespace {

constexpr size_t kStackBytes = size_t(128) << 10;  // per thread; device code keeps little on its stack
constexpr int kMaxThreads = 1024;                  // a CUDA block's limit

enum class State { running, done, at_barrier, at_collective };

// Fiber stacks, kept for the next block run on this OS thread.
thread_local std::vector<std::unique_ptr<char[]>> spare_stacks;

struct Thread {
  void* sp = nullptr;  // the suspended fiber's stack pointer
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
  void* scheduler_sp = nullptr;
  std::vector<Thread> threads;
  int current = -1;
  const std::function<void(int)>* body = nullptr;
  std::exception_ptr error;
  const void* scheduler_stack = nullptr;  // for AddressSanitizer's fiber switches
  size_t scheduler_stack_size = 0;
};

thread_local Block* active = nullptr;

// A stack switch, with AddressSanitizer told which stack runs next (a switch it cannot see).
void switch_context(void** from, void* to, const void* to_stack, size_t to_size, bool from_ends = false) {
#ifdef QKV_EMU_ASAN
  void* fake_stack = nullptr;
  __sanitizer_start_switch_fiber(from_ends ? nullptr : &fake_stack, to_stack, to_size);
  qkv_emu_switch_stack(from, to);
  __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
#else
  (void)to_stack, (void)to_size, (void)from_ends;
  qkv_emu_switch_stack(from, to);
#endif
}

void thread_main(int64_t index) {
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
  switch_context(&t.sp, b.scheduler_sp, b.scheduler_stack, b.scheduler_stack_size, /*from_ends=*/true);
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

// Runs warp w's collective when every lane of its mask waits at it; a lane of the mask elsewhere
// is a Divergence. Called when no lane of the warp can run. Returns whether one ran.
bool meet_warp(Block& b, int w) {
  const int n = int(b.threads.size()), w0 = w * kLanes;
  int first = -1;
  for (int i = w0; i < std::min(n, w0 + kLanes) && first < 0; ++i)
    if (b.threads[size_t(i)].state == State::at_collective) first = i;
  if (first < 0) return false;
  const Thread& f = b.threads[size_t(first)];
  std::array<void*, kLanes> slots{};
  std::vector<int> astray;  // stays empty (no allocation) when the warp met
  for (int lane = 0; lane < kLanes; ++lane) {
    if (!(f.mask >> lane & 1u)) continue;
    const int i = w0 + lane;
    if (i >= n) {
      astray.push_back(i);
      continue;
    }
    const Thread& t = b.threads[size_t(i)];
    if (t.state != State::at_collective || std::strcmp(t.op, f.op) != 0 || t.mask != f.mask || t.model != f.model)
      astray.push_back(i);
    else slots[size_t(lane)] = t.slot;
  }
  if (!astray.empty())
    throw Divergence(cat("emulated block: thread ", first, " waits at ", f.op, " with mask 0x", std::hex, f.mask,
                         std::dec, ", but lanes of that mask are elsewhere: ", describe(b, astray)));
  f.model(slots.data(), f.mask, f.model_context);
  for (int lane = 0; lane < kLanes; ++lane)
    if (f.mask >> lane & 1u) b.threads[size_t(w0 + lane)].state = State::running;
  return true;
}

// Opens the barrier once every thread waits at it; a thread that exited meanwhile is a
// Divergence. Returns whether it opened.
bool open_barrier(Block& b) {
  int waiting = 0, exited = 0;
  for (const Thread& t : b.threads) {
    if (t.state == State::at_barrier) ++waiting;
    else if (t.state == State::done) ++exited;
    else return false;  // a warp collective is still pending
  }
  if (waiting == 0) return false;
  if (exited > 0) {
    std::vector<int> at, left;
    for (int i = 0; i < int(b.threads.size()); ++i)
      (b.threads[size_t(i)].state == State::done ? left : at).push_back(i);
    throw Divergence(cat("emulated block: threads ", describe(b, at), " wait at __syncthreads, which threads ",
                         describe(b, left), " left without reaching"));
  }
  for (Thread& t : b.threads) t.state = State::running;
  return true;
}

std::vector<int> order_of(int n, Schedule schedule) {
  std::vector<int> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  if (schedule == Schedule::reverse) std::reverse(order.begin(), order.end());
  return order;
}

// One warp at a time, in the schedule's order of warps: its lanes (in the schedule's order) run
// to their next meeting point, its collectives go ahead as they form, until every lane waits at
// the barrier or has exited. So a warp runs ahead of the others up to the next barrier, as it
// may on a GPU, and a missing barrier lets it overwrite what a later warp still reads.
void schedule_threads(Block& b, Schedule schedule, uint64_t seed) {
  std::mt19937_64 gen(seed);
  const int n = int(b.threads.size()), warps = (n + kLanes - 1) / kLanes;
  std::vector<int> warp_order = order_of(warps, schedule), lane_order = order_of(kLanes, schedule);
  for (;;) {
    if (schedule == Schedule::shuffled) {  // new orders each round
      std::shuffle(warp_order.begin(), warp_order.end(), gen);
      std::shuffle(lane_order.begin(), lane_order.end(), gen);
    }
    for (int w : warp_order) {
      for (bool moved = true; moved;) {
        moved = false;
        for (int lane : lane_order) {
          const int i = w * kLanes + lane;
          if (i >= n || b.threads[size_t(i)].state != State::running) continue;
          Thread& t = b.threads[size_t(i)];
          b.current = i;
          switch_context(&b.scheduler_sp, t.sp, t.stack.get(), kStackBytes);
          if (b.error) std::rethrow_exception(b.error);
          moved = true;
        }
        moved = meet_warp(b, w) || moved;
      }
    }
    if (std::all_of(b.threads.begin(), b.threads.end(), [](const Thread& t) { return t.state == State::done; })) return;
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
  switch_context(&t.sp, b.scheduler_sp, b.scheduler_stack, b.scheduler_stack_size);
}

// A fiber whose first switch starts thread_main(index): its stack holds what
// qkv_emu_switch_stack pops (MXCSR and x87 control word, r15, r14, r13 = thread_main,
// r12 = index, rbx, rbp) and returns into qkv_emu_fiber_start, which calls r13(r12) with the
// stack 16-byte aligned as a call expects.
void make_fiber(Thread& t, int index) {
  if (!spare_stacks.empty()) {
    t.stack = std::move(spare_stacks.back());
    spare_stacks.pop_back();
#ifdef QKV_EMU_ASAN
    // The frames a fiber never returned from (thread_main's, an abandoned thread's) keep their
    // redzones poisoned.
    ASAN_UNPOISON_MEMORY_REGION(t.stack.get(), kStackBytes);
#endif
  } else {
    t.stack.reset(new char[kStackBytes]);
  }
  auto top = reinterpret_cast<uintptr_t>(t.stack.get() + kStackBytes) & ~uintptr_t(15);
  auto* frame = reinterpret_cast<uint64_t*>(top) - 10;  // 80 bytes: top stays 16-aligned after ret
  uint32_t control[2] = {0, 0};
  asm volatile("stmxcsr %0\n\tfnstcw %1" : "=m"(control[0]), "=m"(control[1]));
  frame[0] = uint64_t(control[0]) | uint64_t(control[1] & 0xffff) << 32;
  frame[1] = 0;                                                 // r15
  frame[2] = 0;                                                 // r14
  frame[3] = reinterpret_cast<uint64_t>(&thread_main);          // r13
  frame[4] = uint64_t(index);                                   // r12
  frame[5] = 0;                                                 // rbx
  frame[6] = 0;                                                 // rbp
  frame[7] = reinterpret_cast<uint64_t>(&qkv_emu_fiber_start);  // the return address
  t.sp = frame;
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
  // Threads still suspended are abandoned (the error says why the block stopped); their stacks
  // serve the next block.
  for (Thread& t : b->threads) spare_stacks.push_back(std::move(t.stack));
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
