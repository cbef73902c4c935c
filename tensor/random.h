// The seeded random stream behind every random op (init, dropout, shuffles): a Philox key and a
// block counter. Each draw of n elements takes ceil(n/4) blocks and advances the counter, so
// saving (seed, offset) and restoring it later reproduces the exact continuation.
#pragma once
#include <cstdint>

namespace qkv {

struct GeneratorState {
  uint64_t seed = 0;
  uint64_t offset = 0;  // next unused Philox block
  friend bool operator==(const GeneratorState&, const GeneratorState&) = default;
};

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : state_{seed, 0} {}
  // Reserves the blocks for n elements and returns the block offset the draw starts at.
  uint64_t reserve(int64_t n) {
    uint64_t start = state_.offset;
    state_.offset += (uint64_t(n) + 3) / 4;
    return start;
  }
  uint64_t seed() const { return state_.seed; }
  GeneratorState state() const { return state_; }
  void set_state(GeneratorState s) { state_ = s; }
  void manual_seed(uint64_t seed) { state_ = {seed, 0}; }

 private:
  GeneratorState state_;
};

// The process-wide generator used when an op is not given one.
Generator& default_generator();
void manual_seed(uint64_t seed);

}  // namespace qkv
