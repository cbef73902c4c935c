// A checkpoint's counters are read as the integers they must be: a number that does not fit its
// type is an error naming the file and the key, never a wrapped value or an uncaught
// std::out_of_range.
#include <doctest/doctest.h>

#include "io/safetensors.h"
#include "nn/layers.h"
#include "tests/support/error_checks.h"
#include "tests/support/test_support.h"
#include "train/loops/lm_checkpoint.h"

using namespace qkv;
using namespace qkv::loops;
namespace fs = std::filesystem;

TEST_CASE("lm checkpoints: metadata numbers that do not fit their type are refused by file and key") {
  test::TempDir run;
  nn::Linear model(2, 2);
  LmLoopState state;
  state.step = 5;
  state.gen = {7, 9};
  save_lm_checkpoint(model, {}, state, run.path, 2);
  const std::string file = (run.path / "checkpoints" / "step_00000005.state.safetensors").string();
  REQUIRE(fs::exists(file));
  safetensors::Metadata meta;
  const auto tensors = safetensors::load(file, kCPU, &meta);
  const std::vector<std::pair<std::string, Tensor>> named(tensors.begin(), tensors.end());
  REQUIRE(load_latest_lm_checkpoint(run.path, kCPU)->state.step == 5);

  auto with = [&](const std::string& key, const std::string& value) {
    safetensors::Metadata m = meta;
    m[key] = value;
    safetensors::save(file, named, m);
    return test::error_of<IOError>([&] { load_latest_lm_checkpoint(run.path, kCPU); });
  };
  test::check_contains(with("step", "99999999999999999999"),
                       {"step_00000005.state.safetensors", "metadata 'step'", "0..9223372036854775807"});
  test::check_contains(with("tokens", "9223372036854775808"), {"metadata 'tokens'"});
  test::check_contains(with("data_index", "-1"), {"metadata 'data_index'"});
  test::check_contains(with("generator_offset", "18446744073709551616"), {"metadata 'generator_offset'"});
  test::check_contains(with("loss_scale", "3"), {"metadata 'loss_scale' is 3", "a power of two from 1 to 2^24"});
  test::check_contains(with("loss_scale", "33554432"), {"metadata 'loss_scale'", "0..16777216"});
  // The generator's seed uses all 64 bits.
  safetensors::Metadata m = meta;
  m["generator_seed"] = "18446744073709551615";
  safetensors::save(file, named, m);
  CHECK(load_latest_lm_checkpoint(run.path, kCPU)->state.gen.seed == UINT64_MAX);
  // An fp16 run's loss scale round-trips; a checkpoint from before loss scaling has none.
  m["loss_scale"] = "1024";
  m["loss_scale_good_steps"] = "17";
  safetensors::save(file, named, m);
  CHECK(load_latest_lm_checkpoint(run.path, kCPU)->state.loss_scale == LossScaleState{1024, 17});
  m.erase("loss_scale");
  m.erase("loss_scale_good_steps");
  safetensors::save(file, named, m);
  CHECK(load_latest_lm_checkpoint(run.path, kCPU)->state.loss_scale == LossScaleState{});
}
