#include "kernels/cuda/emu/warp.h"

#include <ucontext.h>

#include <array>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define QKV_EMU_ASAN 1
#endif

namespace qkv::cuda_emu {
namespace {

constexpr size_t kStackBytes = size_t(256) << 10;  // per lane; device code keeps little on its stack

struct Lane {
  ucontext_t context{};
  std::unique_ptr<char[]> stack;
  bool done = false;
  const char* waiting = nullptr;  // the collective this lane waits at
  void* slot = nullptr;
  WarpModel model = nullptr;
  const void* model_context = nullptr;
};

struct Warp {
  ucontext_t scheduler{};
  std::array<Lane, kLanes> lanes;
  int current = -1;
  const std::function<void(int)>* body = nullptr;
  std::exception_ptr error;
  // The scheduler's stack, as AddressSanitizer is told when a lane switches back to it.
  const void* scheduler_stack = nullptr;
  size_t scheduler_stack_size = 0;
};

thread_local Warp* active = nullptr;

// swapcontext with AddressSanitizer told which stack runs next (a fiber switch it cannot see).
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

// A lane's fiber: its body, then back to the scheduler for good.
void lane_main(int lane) {
  Warp& w = *active;
#ifdef QKV_EMU_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &w.scheduler_stack, &w.scheduler_stack_size);
#endif
  try {
    (*w.body)(lane);
  } catch (...) {
    if (!w.error) w.error = std::current_exception();
  }
  Lane& l = w.lanes[size_t(lane)];
  l.done = true;
  switch_context(&l.context, &w.scheduler, w.scheduler_stack, w.scheduler_stack_size, /*from_ends=*/true);
}

std::string lanes_where(const Warp& w, bool done) {
  std::string s;
  for (int i = 0; i < kLanes; ++i) {
    const Lane& l = w.lanes[size_t(i)];
    if (l.done != done) continue;
    if (!s.empty()) s += ", ";
    s += std::to_string(i);
    if (!done) s += cat(" (at ", l.waiting, ")");
  }
  return s;
}

// Every lane waits at a collective or is done: runs the collective, or reports the divergence.
void meet(Warp& w) {
  int done = 0;
  for (const Lane& l : w.lanes) done += l.done;
  if (done > 0)
    throw WarpDivergence(cat("emulated warp: lanes ", lanes_where(w, false), " wait at a warp collective that lanes ",
                             lanes_where(w, true), " exited without reaching"));
  const Lane& first = w.lanes[0];
  for (int i = 1; i < kLanes; ++i) {
    const Lane& l = w.lanes[size_t(i)];
    if (std::string(l.waiting) != first.waiting || l.model != first.model)
      throw WarpDivergence(cat("emulated warp: lane 0 waits at ", first.waiting, " but lane ", i, " at ", l.waiting));
  }
  std::array<void*, kLanes> slots{};
  for (int i = 0; i < kLanes; ++i) slots[size_t(i)] = w.lanes[size_t(i)].slot;
  first.model(slots.data(), first.model_context);
  for (Lane& l : w.lanes) l.waiting = nullptr;
}

}  // namespace

void run_warp(const std::function<void(int lane)>& body) {
  check<Error>(active == nullptr, "emulated warp: run_warp called from inside a warp");
  auto w = std::make_unique<Warp>();
  w->body = &body;
  for (int i = 0; i < kLanes; ++i) {
    Lane& l = w->lanes[size_t(i)];
    l.stack.reset(new char[kStackBytes]);
    getcontext(&l.context);
    l.context.uc_stack.ss_sp = l.stack.get();
    l.context.uc_stack.ss_size = kStackBytes;
    l.context.uc_link = nullptr;
    makecontext(&l.context, reinterpret_cast<void (*)()>(lane_main), 1, i);
  }
  active = w.get();
  std::exception_ptr failure;
  try {
    for (;;) {
      bool any_running = false;
      for (int i = 0; i < kLanes && !w->error; ++i) {
        Lane& l = w->lanes[size_t(i)];
        if (l.done) continue;
        any_running = true;
        w->current = i;
        switch_context(&w->scheduler, &l.context, l.stack.get(), kStackBytes);
      }
      if (w->error) std::rethrow_exception(w->error);
      if (!any_running) break;
      bool all_done = true;
      for (const Lane& l : w->lanes) all_done &= l.done;
      if (all_done) break;
      meet(*w);
    }
  } catch (...) { failure = std::current_exception(); }
  active = nullptr;
  // Lanes still suspended are dropped with their stacks: only trivially destructible state of
  // an abandoned lane is lost, and the error says why the warp stopped.
  if (failure) std::rethrow_exception(failure);
}

int lane_id() {
  check<Error>(active != nullptr && active->current >= 0, "emulated warp: lane_id outside run_warp");
  return active->current;
}

void converge(const char* op, void* slot, WarpModel model, const void* context) {
  check<Error>(active != nullptr && active->current >= 0, "emulated warp: ", op, " called outside run_warp");
  Warp& w = *active;
  Lane& l = w.lanes[size_t(w.current)];
  l.waiting = op;
  l.slot = slot;
  l.model = model;
  l.model_context = context;
  switch_context(&l.context, &w.scheduler, w.scheduler_stack, w.scheduler_stack_size);
}

}  // namespace qkv::cuda_emu
