#include "cuda_emu/block.h"

#include <algorithm>
#include <array>
#include <atomic>
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
#error "the emulated CUDA device switches its fibers with x86-64 code (cuda_emu/block.cpp)"
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

enum class State { running, done, at_barrier, at_collective, at_group, at_wait };

// Fiber stacks, kept for the next block run on this OS thread.
thread_local std::vector<std::unique_ptr<char[]>> spare_stacks;

struct Thread {
  void* sp = nullptr;  // the suspended fiber's stack pointer
  std::unique_ptr<char[]> stack;
  State state = State::running;
  // At a collective or a wait:
  const char* op = nullptr;
  uint32_t mask = 0;
  void* slot = nullptr;
  WarpModel model = nullptr;
  WarpgroupModel group_model = nullptr;
  const void* context = nullptr;
  WaitCondition ready = nullptr;
};

struct Pending {
  uint64_t ticket;
  std::unique_ptr<AsyncWork> work;
};

struct Local {
  void* p = nullptr;
  void (*destroy)(void*) = nullptr;
};

struct Block {
  void* scheduler_sp = nullptr;
  std::vector<Thread> threads;
  int current = -1;
  const std::function<void(int)>* body = nullptr;
  std::exception_ptr error;
  const void* scheduler_stack = nullptr;  // for AddressSanitizer's fiber switches
  size_t scheduler_stack_size = 0;
  Schedule schedule = Schedule::forward;
  std::mt19937_64 gen;
  std::vector<Pending> pending;  // asynchronous work in the order it was posted
  uint64_t next_ticket = 1;
  std::vector<Local> locals;
  std::vector<std::function<void()>> end_checks;
  ~Block() {
    pending.clear();  // before the state the work may refer to
    for (Local& l : locals)
      if (l.p) l.destroy(l.p);
  }
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
    case State::at_collective:
    case State::at_group: return str("at ", t.op);
    case State::at_wait: return str("waiting at ", t.op);
    case State::running: return "running";
  }
  return "";
}

// "threads 3, 4 (exited), 7 (at __syncthreads)": up to 8 named.
std::string describe(const Block& b, const std::vector<int>& ids) {
  std::string s;
  for (size_t k = 0; k < ids.size() && k < 8; ++k)
    s += str(k ? ", " : "", ids[k], " (", where(b.threads[size_t(ids[k])]), ")");
  if (ids.size() > 8) s += str(" and ", ids.size() - 8, " more");
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
    throw Divergence(str("emulated block: thread ", first, " waits at ", f.op, " with mask 0x", std::hex, f.mask,
                         std::dec, ", but lanes of that mask are elsewhere: ", describe(b, astray)));
  f.model(slots.data(), f.mask, f.context);
  for (int lane = 0; lane < kLanes; ++lane)
    if (f.mask >> lane & 1u) b.threads[size_t(w0 + lane)].state = State::running;
  return true;
}

// Runs each warpgroup's collective once all its 128 threads wait at it. A thread of the group
// that exited, or that waits at another warpgroup collective, is a Divergence; one that is still
// running or waits elsewhere may yet arrive. Returns whether one ran.
bool meet_warpgroups(Block& b) {
  const int n = int(b.threads.size());
  bool met = false;
  for (int g0 = 0; g0 < n; g0 += kWarpgroupThreads) {
    int first = -1;
    for (int i = g0; i < std::min(n, g0 + kWarpgroupThreads) && first < 0; ++i)
      if (b.threads[size_t(i)].state == State::at_group) first = i;
    if (first < 0) continue;
    const Thread& f = b.threads[size_t(first)];
    require<Divergence>(g0 + kWarpgroupThreads <= n, "emulated block: thread ", first, " waits at ", f.op,
                        ", a warpgroup instruction, but the block's ", n, " threads leave warpgroup ",
                        g0 / kWarpgroupThreads, " incomplete");
    std::vector<int> astray, later;
    for (int i = g0; i < g0 + kWarpgroupThreads; ++i) {
      const Thread& t = b.threads[size_t(i)];
      if (t.state == State::at_group && std::strcmp(t.op, f.op) == 0 && t.group_model == f.group_model) continue;
      (t.state == State::done || t.state == State::at_group ? astray : later).push_back(i);
    }
    if (!astray.empty())
      throw Divergence(str("emulated block: thread ", first, " waits at ", f.op, " for its warpgroup (threads ", g0,
                           " to ", g0 + kWarpgroupThreads - 1,
                           "), but threads of it cannot arrive: ", describe(b, astray)));
    if (!later.empty()) continue;
    std::array<void*, kWarpgroupThreads> slots{};
    for (int t = 0; t < kWarpgroupThreads; ++t) slots[size_t(t)] = b.threads[size_t(g0 + t)].slot;
    f.group_model(slots.data(), g0 / kWarpgroupThreads, f.context);
    for (int i = g0; i < g0 + kWarpgroupThreads; ++i) b.threads[size_t(i)].state = State::running;
    met = true;
  }
  return met;
}

// Lets go every waiting thread whose condition now holds. Returns whether one was.
bool wake_waiters(Block& b) {
  bool woke = false;
  for (Thread& t : b.threads)
    if (t.state == State::at_wait && t.ready(t.context)) {
      t.state = State::running;
      woke = true;
    }
  return woke;
}

// Opens the barrier once every thread waits at it; a thread that exited meanwhile is a
// Divergence. Returns whether it opened.
bool open_barrier(Block& b) {
  int waiting = 0, exited = 0;
  for (const Thread& t : b.threads) {
    if (t.state == State::at_barrier) ++waiting;
    else if (t.state == State::done) ++exited;
    else return false;  // a collective or a wait is still pending
  }
  if (waiting == 0) return false;
  if (exited > 0) {
    std::vector<int> at, left;
    for (int i = 0; i < int(b.threads.size()); ++i)
      (b.threads[size_t(i)].state == State::done ? left : at).push_back(i);
    throw Divergence(str("emulated block: threads ", describe(b, at), " wait at __syncthreads, which threads ",
                         describe(b, left), " left without reaching"));
  }
  for (Thread& t : b.threads) t.state = State::running;
  return true;
}

// Completes the pending work at position k (it leaves the list first: complete() may post more).
void complete_at(Block& b, size_t k) {
  std::unique_ptr<AsyncWork> work = std::move(b.pending[k].work);
  b.pending.erase(b.pending.begin() + std::ptrdiff_t(k));
  work->complete();
}

// The schedule's completions at the end of a round: none (forward), all (reverse), each with
// probability one half (shuffled). Returns whether any completed.
bool complete_by_schedule(Block& b) {
  if (b.schedule == Schedule::forward || b.pending.empty()) return false;
  bool any = false;
  for (size_t k = 0; k < b.pending.size();) {
    if (b.schedule == Schedule::reverse || (b.gen() & 1u)) {
      complete_at(b, k);
      any = true;
    } else ++k;
  }
  return any;
}

std::vector<int> order_of(int n, Schedule schedule) {
  std::vector<int> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  if (schedule == Schedule::reverse) std::reverse(order.begin(), order.end());
  return order;
}

// Rounds until every thread has exited. In a round the warps run one at a time, in the
// schedule's order: a warp's lanes (in the schedule's order) run to their next meeting point,
// its collectives go ahead as they form; then the warpgroup collectives that formed, the waits
// whose condition holds and the asynchronous work the schedule completes now. A round in which
// nothing moved opens the barrier, or else completes pending work (the newest; under `shuffled`
// any); a block that can do neither is stuck. So a warp runs ahead of the others up to the next
// barrier, as it may on a GPU, and a missing barrier lets it overwrite what a later warp still
// reads.
void schedule_threads(Block& b) {
  const int n = int(b.threads.size()), warps = (n + kLanes - 1) / kLanes;
  std::vector<int> warp_order = order_of(warps, b.schedule), lane_order = order_of(kLanes, b.schedule);
  for (;;) {
    if (b.schedule == Schedule::shuffled) {  // new orders each round
      std::shuffle(warp_order.begin(), warp_order.end(), b.gen);
      std::shuffle(lane_order.begin(), lane_order.end(), b.gen);
    }
    bool progress = false;
    for (int w : warp_order) {
      for (bool moved = true; moved;) {
        moved = false;
        for (int lane : lane_order) {
          const int i = w * kLanes + lane;
          if (i >= n || b.threads[size_t(i)].state != State::running) continue;
          Thread& t = b.threads[size_t(i)];
          b.current = i;
          switch_context(&b.scheduler_sp, t.sp, t.stack.get(), kStackBytes);
          b.current = -1;
          if (b.error) std::rethrow_exception(b.error);
          moved = true;
        }
        moved = meet_warp(b, w) || moved;
        progress |= moved;
      }
    }
    progress = meet_warpgroups(b) || progress;
    progress = wake_waiters(b) || progress;
    progress = complete_by_schedule(b) || progress;
    if (std::all_of(b.threads.begin(), b.threads.end(), [](const Thread& t) { return t.state == State::done; })) {
      for (const auto& check : b.end_checks) check();
      if (b.pending.empty()) return;
      std::string names;
      for (const Pending& p : b.pending) names += str(names.empty() ? "" : ", ", p.work->name());
      throw AsyncError(str("emulated block: every thread exited with asynchronous work still in flight: ", names));
    }
    if (progress || open_barrier(b)) continue;
    if (!b.pending.empty()) {  // the newest, or under `shuffled` any: async units keep no order among them
      complete_at(b, b.schedule == Schedule::shuffled ? size_t(b.gen() % b.pending.size()) : b.pending.size() - 1);
      continue;
    }
    std::vector<int> stuck;
    for (int i = 0; i < n; ++i)
      if (b.threads[size_t(i)].state != State::done) stuck.push_back(i);
    throw Divergence(str("emulated block: no thread can go on: ", describe(b, stuck)));
  }
}

Block& current_block(const char* what) {
  require<EmulatorError>(active != nullptr, "emulated block: ", what, " called outside run_block");
  return *active;
}

Block& current_thread_block(const char* what) {
  Block& b = current_block(what);
  require<EmulatorError>(b.current >= 0, "emulated block: ", what, " called outside a thread of the block");
  return b;
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
  require<EmulatorError>(active == nullptr, "emulated block: run_block called from inside a block");
  require<EmulatorError>(threads >= 1 && threads <= kMaxThreads, "emulated block: ", threads,
                         " threads per block (expected 1 to ", kMaxThreads, ")");
  auto b = std::make_unique<Block>();
  b->body = &body;
  b->schedule = schedule;
  b->gen.seed(seed);
  b->threads.resize(size_t(threads));
  for (int i = 0; i < threads; ++i) make_fiber(b->threads[size_t(i)], i);
  active = b.get();
  std::exception_ptr failure;
  try {
    schedule_threads(*b);
  } catch (...) { failure = std::current_exception(); }
  // Threads still suspended are abandoned (the error says why the block stopped); their stacks
  // serve the next block. The block's state goes while it is still the active block.
  for (Thread& t : b->threads) spare_stacks.push_back(std::move(t.stack));
  b.reset();
  active = nullptr;
  if (failure) std::rethrow_exception(failure);
}

int thread_index() { return current_thread_block("thread_index").current; }
int block_threads() { return int(current_block("block_threads").threads.size()); }
bool thread_exited(int t) { return current_block("thread_exited").threads.at(size_t(t)).state == State::done; }

void on_block_end(std::function<void()> check) { current_block("on_block_end").end_checks.push_back(std::move(check)); }

void sync_threads() {
  Block& b = current_thread_block("__syncthreads");
  b.threads[size_t(b.current)].state = State::at_barrier;
  suspend(b);
}

void warp_converge(const char* op, uint32_t mask, void* slot, WarpModel model, const void* context) {
  Block& b = current_thread_block(op);
  Thread& t = b.threads[size_t(b.current)];
  require<Divergence>(mask >> (b.current % kLanes) & 1u, "emulated block: thread ", b.current, " calls ", op,
                      " with mask 0x", std::hex, mask, std::dec, ", which leaves out its own lane");
  t.state = State::at_collective;
  t.op = op;
  t.mask = mask;
  t.slot = slot;
  t.model = model;
  t.context = context;
  suspend(b);
}

void warpgroup_converge(const char* op, void* slot, WarpgroupModel model, const void* context) {
  Block& b = current_thread_block(op);
  Thread& t = b.threads[size_t(b.current)];
  t.state = State::at_group;
  t.op = op;
  t.slot = slot;
  t.group_model = model;
  t.context = context;
  suspend(b);
}

void wait_until(const char* what, WaitCondition ready, const void* context) {
  Block& b = current_thread_block(what);
  if (ready(context)) return;
  Thread& t = b.threads[size_t(b.current)];
  t.state = State::at_wait;
  t.op = what;
  t.ready = ready;
  t.context = context;
  suspend(b);
}

uint64_t post_async(std::unique_ptr<AsyncWork> work) {
  Block& b = current_block("an asynchronous instruction");
  const uint64_t ticket = b.next_ticket++;
  b.pending.push_back({ticket, std::move(work)});
  return ticket;
}

void complete_now(uint64_t ticket) {
  Block& b = current_block("completing asynchronous work");
  for (size_t k = 0; k < b.pending.size(); ++k)
    if (b.pending[k].ticket == ticket) {
      complete_at(b, k);
      return;
    }
}

bool pending(uint64_t ticket) {
  const Block& b = current_block("asking after asynchronous work");
  return std::any_of(b.pending.begin(), b.pending.end(), [&](const Pending& p) { return p.ticket == ticket; });
}

Schedule current_schedule() { return current_block("current_schedule").schedule; }

bool coin_flip() { return current_block("coin_flip").gen() & 1u; }

namespace detail {

int next_block_local_id() {
  static std::atomic<int> next{0};
  return next++;
}

void* block_local_slot(int id, void* (*make)(), void (*destroy)(void*)) {
  Block& b = current_block("block-local state");
  if (b.locals.size() <= size_t(id)) b.locals.resize(size_t(id) + 1);
  Local& l = b.locals[size_t(id)];
  if (!l.p) l = {make(), destroy};
  return l.p;
}

}  // namespace detail

}  // namespace qkv::cuda_emu
