#include <doctest/doctest.h>

#include "nn/models/encoder.h"
#include "train/data/synthetic.h"
#include "train/loops/epoch_loop.h"
#include "train/optim/adam.h"
#include "train/optim/schedule.h"

using namespace qkv;

namespace {
nn::EncoderConfig small(nn::Sharing s, int64_t pos2d = 0) {
  nn::EncoderConfig c;
  c.attention.d_model = 32;
  c.attention.heads = 4;
  c.attention.sharing = s;
  c.attention.pos2d = pos2d;
  c.layers = 2;
  c.ffn_hidden = 64;
  c.dropout = 0.0;
  return c;
}
}  // namespace

TEST_CASE("synthetic tasks produce the paper's targets") {
  using data::SyntheticTask;
  const std::vector<int64_t> x{4, 3, 9, 8, 1, 7};
  CHECK(data::synthetic_target(SyntheticTask::swap, x, 10) == std::vector<int64_t>{8, 1, 7, 4, 3, 9});
  CHECK(data::synthetic_target(SyntheticTask::reverse, x, 10) == std::vector<int64_t>{7, 1, 8, 9, 3, 4});
  CHECK(data::synthetic_target(SyntheticTask::sort, x, 10) == std::vector<int64_t>{1, 3, 4, 7, 8, 9});
  CHECK(data::synthetic_target(SyntheticTask::sub, x, 10) == std::vector<int64_t>{5, 6, 0, 1, 8, 2});
  CHECK(data::synthetic_target(SyntheticTask::copy, x, 10) == x);
  auto splits = data::make_synthetic_splits(SyntheticTask::sort, 8, 10, 100, 10, 20, 3);
  CHECK(splits.train.inputs.shape() == Shape{100, 8});
  CHECK(amax(splits.train.inputs).item<int64_t>() == 9);
  CHECK(-amax(-splits.train.inputs).item<int64_t>() == 0);
  auto again = data::make_synthetic_splits(SyntheticTask::sort, 8, 10, 100, 10, 20, 3);
  CHECK(splits.test.targets.to_vector<int64_t>() == again.test.targets.to_vector<int64_t>());
  CHECK(splits.train.inputs.to_vector<int64_t>() != splits.test.inputs.slice(0, 0, 100).to_vector<int64_t>());
  CHECK_THROWS_WITH_AS(data::make_synthetic(SyntheticTask::swap, 4, 7, 10, *std::make_unique<Generator>(0)),
                       doctest::Contains("even length"), ValueError);
}

TEST_CASE("the encoder maps [B, T] tokens to [B, T, classes] logits for every variant") {
  Tensor ids = cast(uniform({3, 8}, 0, 10, DType::f64), DType::i64);
  for (auto [s, m] :
       {std::pair{nn::Sharing::qkv, 0}, {nn::Sharing::qk_v, 10}, {nn::Sharing::q_kv, 0}, {nn::Sharing::all, 10}}) {
    for (bool pre : {false, true}) {
      nn::EncoderConfig c = small(s, m);
      c.pre_norm = pre;
      nn::Encoder model(c);
      CHECK(model.forward(ids).shape() == Shape{3, 8, 10});
      CHECK((model.final_norm != nullptr) == pre);
    }
  }
  nn::EncoderConfig c = small(nn::Sharing::qkv);
  c.mlp_head = false;
  nn::Encoder linear_head(c);
  CHECK(linear_head.head.fc == nullptr);
}

// Label `long` (tests/CMakeLists.txt): left out of the sanitizer run.
TEST_CASE("a small encoder learns the reverse task with the trainer" * doctest::test_suite("long")) {
  auto data = data::make_synthetic_splits(data::SyntheticTask::reverse, 8, 10, 4096, 256, 256, 1);
  Generator gen(0);
  nn::Encoder model(small(nn::Sharing::qkv), &gen);
  optim::AdamOptions ao;
  ao.lr = 3e-3;
  optim::Adam opt(model.named_parameters(), ao);
  loops::TrainOptions o;
  o.epochs = 6;
  o.batch_size = 64;
  o.clip = 5;
  o.log_every = 1000;
  const int64_t steps = o.epochs * 4096 / 64;
  optim::CosineWarmup schedule(ao.lr, steps / 20, steps);
  auto forward = [&](const Tensor& ids) { return model.forward(ids); };
  loops::TrainResult r = loops::fit(model, forward, opt, schedule, {data.train.inputs, data.train.targets},
                                    {data.val.inputs, data.val.targets}, {data.test.inputs, data.test.targets}, o);
  CHECK(r.steps == steps);
  CHECK(r.epochs.size() == 6);
  CHECK(r.epochs.back().train_loss < r.epochs.front().train_loss);
  CHECK(r.best_val_accuracy > 0.9);
  CHECK(r.test_accuracy > 0.9);
}
