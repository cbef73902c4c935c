#include "tensor/random.h"

namespace qkv {

Generator& default_generator() {
  static Generator g(0);
  return g;
}
void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

}  // namespace qkv
