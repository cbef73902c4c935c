#include "train/dist/stop_signal.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "train/dist/plugin_support.h"

namespace qkv::dist::plugin {

namespace {

// Slots 0..kSlots-1 take the collectives in turn; slot kSlots holds the 'training' line. A slot
// is rewritten kSlots-1 collectives after it stopped being current, long after a handler that
// read it has finished its write.
constexpr int kSlots = 8;
constexpr size_t kLineBytes = 1024;
char lines[kSlots + 1][kLineBytes];
size_t lengths[kSlots + 1];
std::atomic<int> current{kSlots};
static_assert(std::atomic<int>::is_always_lock_free, "the handler reads `current`");
int next_slot = 0;
std::string prefix;

void prepare(int slot, const std::string& where) {
  const std::string tail = ": another rank has ended; the launcher's message names it\n";
  std::string line = prefix;
  line += "stopped by the launcher while in ";
  line += where.substr(0, kLineBytes - 1 - line.size() - tail.size());
  line += tail;
  std::memcpy(lines[slot], line.data(), line.size());
  lengths[slot] = line.size();
}

extern "C" void on_stop_signal(int) {
  const int slot = current.load(std::memory_order_acquire);
  ssize_t written = ::write(STDERR_FILENO, lines[slot], lengths[slot]);
  (void)written;
  ::_exit(1);
}

}  // namespace

void install_stop_handler(int rank) {
  prefix = rank_prefix(rank);
  prepare(kSlots, "training");
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigfillset(&sa.sa_mask);  // nothing else runs on top of it
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
}

void set_current_collective(const std::string& what) {
  if (what.empty()) {
    current.store(kSlots, std::memory_order_release);
    return;
  }
  int slot = next_slot;
  if (slot == current.load(std::memory_order_relaxed)) slot = (slot + 1) % kSlots;
  prepare(slot, what);
  current.store(slot, std::memory_order_release);
  next_slot = (slot + 1) % kSlots;
}

}  // namespace qkv::dist::plugin
