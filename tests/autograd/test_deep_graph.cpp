// A graph as long as a very deep model's is destroyed without recursion (it would overflow the
// stack one node destructor inside another).
#include <doctest/doctest.h>

#include "autograd/autograd.h"

using namespace qkv;

TEST_CASE("autograd: a 300,000-op graph is released without recursion, with and without backward") {
  for (const bool backward : {false, true}) {
    CAPTURE(backward);
    Tensor w = ones({1});
    w.set_requires_grad(true);
    Tensor x = w;
    for (int i = 0; i < 300000; ++i) x = x * 1.0;
    CHECK(x.grad_fn() != nullptr);
    if (backward) {
      sum(x).backward();
      CHECK(w.grad().item<float>() == doctest::Approx(1.0));
    }
    x = Tensor();  // the whole chain goes here
    CHECK(!x.defined());
  }
}
