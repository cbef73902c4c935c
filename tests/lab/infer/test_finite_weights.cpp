// Inference refuses weights with a NaN or inf (`qkvlab generate` checks the checkpoint it loads):
// the error names the checkpoint file and the tensor, and finite weights pass.
#include <doctest/doctest.h>

#include <cmath>

#include "io/safetensors.h"
#include "lab/infer/generate.h"
#include "tests/support/error_checks.h"
#include "tests/support/test_support.h"

using namespace qkv;

namespace {
nn::GPTConfig tiny() {
  nn::GPTConfig c;
  c.vocab = 32;
  c.context = 8;
  c.layers = 1;
  c.attention.d_model = 8;
  c.attention.heads = 2;
  return c;
}
}  // namespace

TEST_CASE("generate: a checkpoint with a NaN or inf weight is refused, naming the file and the tensor") {
  test::TempDir dir;
  Generator gen(0);
  nn::GPT trained(tiny(), &gen);
  const std::string good = (dir.path / "good.safetensors").string();
  trained.save(good);
  nn::GPT model(tiny(), &gen);
  model.load(good);
  CHECK_NOTHROW(infer::check_finite_weights(model, good));

  // A checkpoint written with two non-finite values in one tensor, as a diverged run leaves it.
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& [name, t] : trained.state_dict()) {
    Tensor copy = t.clone();
    if (name == "blocks.0.fc.weight") {
      copy.data<float>()[3] = NAN;
      copy.data<float>()[4] = -INFINITY;
    }
    tensors.emplace_back(name, copy);
  }
  const std::string bad = (dir.path / "step_00000040.safetensors").string();
  safetensors::save(bad, tensors);
  model.load(bad);
  test::check_contains(test::error_of<IOError>([&] { infer::check_finite_weights(model, bad); }),
                       {bad, "tensor 'blocks.0.fc.weight' has 2 of", "NaN or inf"});
}
