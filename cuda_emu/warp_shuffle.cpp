#include "cuda_emu/warp_shuffle.h"

#include "cuda_emu/block.h"
#include "cuda_emu/error.h"

namespace qkv::cuda_emu {
namespace {

struct ShuffleSlot {
  ShuffleKind kind;
  uint64_t in, out;
  int arg, width;
};

const char* shuffle_name(ShuffleKind k) {
  switch (k) {
    case ShuffleKind::index: return "__shfl_sync";
    case ShuffleKind::up: return "__shfl_up_sync";
    case ShuffleKind::down: return "__shfl_down_sync";
    case ShuffleKind::xor_: return "__shfl_xor_sync";
  }
  return "";
}

// The lane `lane` reads, by the Programming Guide's rules.
int source_lane(const ShuffleSlot& s, int lane) {
  const int base = lane / s.width * s.width, in_segment = lane % s.width;
  switch (s.kind) {
    case ShuffleKind::index: return base + ((s.arg % s.width) + s.width) % s.width;
    case ShuffleKind::up: return in_segment >= s.arg ? lane - s.arg : lane;
    case ShuffleKind::down: return in_segment + s.arg < s.width ? lane + s.arg : lane;
    case ShuffleKind::xor_: {
      const int src = lane ^ s.arg;
      return src >= base + s.width || src >= kLanes ? lane : src;
    }
  }
  return lane;
}

void shuffle_model(void* const* slots, uint32_t mask, const void*) {
  auto* s = reinterpret_cast<ShuffleSlot* const*>(slots);
  for (int lane = 0; lane < kLanes; ++lane) {
    if (!s[lane]) continue;
    const int src = source_lane(*s[lane], lane);
    if (!(mask >> src & 1u))
      throw Divergence(str(shuffle_name(s[lane]->kind), ": lane ", lane, " reads lane ", src,
                           ", which is not in mask 0x", std::hex, mask));
    s[lane]->out = s[src]->in;
  }
}

struct BallotSlot {
  bool predicate;
  uint32_t out;
};

void ballot_model(void* const* slots, uint32_t, const void*) {
  auto* s = reinterpret_cast<BallotSlot* const*>(slots);
  uint32_t bits = 0;
  for (int lane = 0; lane < kLanes; ++lane)
    if (s[lane] && s[lane]->predicate) bits |= 1u << lane;
  for (int lane = 0; lane < kLanes; ++lane)
    if (s[lane]) s[lane]->out = bits;
}

}  // namespace

uint64_t shuffle_bits(ShuffleKind kind, uint32_t mask, uint64_t bits, int arg, int width) {
  require<EmulatorError>(width >= 1 && width <= kLanes && (width & (width - 1)) == 0, shuffle_name(kind), ": width ",
                         width, " (expected a power of 2 up to 32)");
  ShuffleSlot slot{kind, bits, 0, arg, width};
  warp_converge(shuffle_name(kind), mask, &slot, shuffle_model);
  return slot.out;
}

uint32_t ballot(uint32_t mask, bool predicate) {
  BallotSlot slot{predicate, 0};
  warp_converge("vote (__ballot_sync, __all_sync, __any_sync)", mask, &slot, ballot_model);
  return slot.out;
}

}  // namespace qkv::cuda_emu
