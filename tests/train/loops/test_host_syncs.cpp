// The epoch trainer reads values on the host once per optimizer step (the loss and the gradient
// norm together): on a GPU each read waits for the device. Evaluations sum on the device and
// read once. Counted on the CPU, where the same loop code runs.
#include <doctest/doctest.h>

#include "nn/models/encoder.h"
#include "train/data/synthetic.h"
#include "train/loops/epoch_loop.h"
#include "train/optim/adam.h"
#include "train/optim/schedule.h"

using namespace qkv;

TEST_CASE("epoch training: one host synchronisation per optimizer step") {
  auto data = data::make_synthetic_splits(data::SyntheticTask::reverse, 8, 10, 512, 128, 128, 1);
  Generator gen(0);
  nn::EncoderConfig c;
  nn::Encoder model(c, &gen);
  optim::AdamOptions ao;
  optim::Adam opt(model.named_parameters(), ao);
  loops::TrainOptions o;
  o.epochs = 2;
  o.batch_size = 64;
  o.clip = 1;
  o.log_every = 1000;
  optim::CosineWarmup schedule(ao.lr, 1, 16);
  auto forward = [&](const Tensor& ids) { return model.forward(ids); };
  const uint64_t before = host_sync_count();
  loops::TrainResult r = loops::fit(model, forward, opt, schedule, {data.train.inputs, data.train.targets},
                                    {data.val.inputs, data.val.targets}, {data.test.inputs, data.test.targets}, o);
  const uint64_t syncs = host_sync_count() - before;
  REQUIRE(r.steps == 16);
  CHECK(syncs == uint64_t(r.steps) + uint64_t(o.epochs) + 1);  // + a validation per epoch + the test
}
