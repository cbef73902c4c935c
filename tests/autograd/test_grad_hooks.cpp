// Post-accumulate gradient hooks (autograd/grad_hooks.h): they run once per backward that
// reaches their leaf, after .grad holds the sum, and stop when their handle goes.
#include <doctest/doctest.h>

#include "autograd/grad_hooks.h"
#include "autograd/ops.h"

using namespace qkv;

TEST_CASE("grad hooks: run after accumulation, once per backward, until the handle goes") {
  Tensor w = from_vector(std::vector<float>{1, 2, 3}, {3}).set_requires_grad();
  std::vector<float> seen;
  int calls = 0;
  {
    auto handle = autograd::add_post_accumulate_grad_hook(w, [&] {
      ++calls;
      seen = w.grad().to_vector<float>();
    });
    // w used twice in one graph: the engine sums first, the hook sees the total once.
    sum(w * w + w).backward();
    CHECK(calls == 1);
    CHECK(seen == std::vector<float>{3, 5, 7});
    sum(w).backward();  // accumulates into .grad
    CHECK(calls == 2);
    CHECK(seen == std::vector<float>{4, 6, 8});
  }
  sum(w).backward();
  CHECK(calls == 2);
  const Tensor x = from_vector(std::vector<float>{1}, {1});
  CHECK_THROWS_AS((void)autograd::add_post_accumulate_grad_hook(x, [] {}), AutogradError);
}
