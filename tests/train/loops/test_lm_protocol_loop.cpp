// The language-model loop under the official code's protocol: weight decay on every parameter
// (biases and LayerNorm too) or on matrices only, validation that reads the same batches from
// the split's start at every evaluation, and bf16 autocast against fp32.
#include <doctest/doctest.h>

#include <cmath>

#include "autograd/grad_mode.h"
#include "tests/support/error_checks.h"
#include "tests/support/lm_optimizer.h"
#include "tests/support/test_support.h"
#include "tests/support/token_data.h"
#include "train/data/tokens/token_dataset.h"
#include "train/loops/lm_loop.h"

using namespace qkv;
using namespace qkv::loops;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kVocab = 64;

nn::GPTConfig tiny_gpt(double dropout) {
  nn::GPTConfig c;
  c.vocab = kVocab;
  c.context = 8;
  c.layers = 1;
  c.dropout = dropout;
  c.attention.d_model = 16;
  c.attention.heads = 2;
  return c;
}

// Documents of 3 to 11 tokens after their end-of-text (kVocab - 1), in a train and a val split.
fs::path document_dataset(const fs::path& dir) {
  std::vector<int32_t> train, val;
  for (int32_t d = 0; d < 12; ++d) {
    std::vector<int32_t>& split = d < 6 ? train : val;
    split.push_back(kVocab - 1);
    for (int32_t t = 0; t < 3 + (d * 5) % 9; ++t) split.push_back((d * 7 + t * 3) % 48);
  }
  test::write_dataset(dir, {{"train", {train}}, {"val", {val}}}, kVocab, kVocab - 1);
  return dir;
}

data::TokenBatchOptions official(int64_t batch, bool shuffle) {
  data::TokenBatchOptions o;
  o.batch = batch;
  o.context = 8;
  o.sampling = data::LmSampling::official;
  o.shuffle = shuffle;
  return o;
}

// One training step of a fresh model (no dropout, constant lr); returns its parameters.
optim::NamedTensors one_step(const fs::path& tokens, const fs::path& dir, optim::DecayRule decay, double lr,
                             double wd) {
  Generator gen(3);
  nn::GPT model(tiny_gpt(0.0), &gen);
  data::TokenBatches train(tokens, "train", official(2, true)), val(tokens, "val", official(2, false));
  optim::ConstantLR schedule(lr);
  LmTrainOptions o;
  o.steps = 1;
  o.eval_every = 1;
  o.eval_batches = 1;
  o.log_every = 1;
  o.dir = dir;
  train_lm(model, gen, *test::lm_adamw(model, wd, decay), train, val, schedule, o);
  return model.named_parameters();
}

}  // namespace

TEST_CASE("optim: the decay rule all puts every parameter in the decayed group") {
  Generator gen(1);
  nn::GPT model(tiny_gpt(0.0), &gen);
  const optim::NamedTensors params = model.named_parameters();
  const auto all = optim::weight_decay_groups(params, 0.1, optim::DecayRule::all);
  REQUIRE(all.size() == 1);
  CHECK(all[0].params.size() == params.size());
  CHECK(all[0].weight_decay == 0.1);
  const auto matrices = optim::weight_decay_groups(params, 0.1, optim::DecayRule::matrices);
  REQUIRE(matrices.size() == 2);
  CHECK(matrices[1].weight_decay == 0.0);
  for (const auto& [name, p] : matrices[1].params) CHECK_MESSAGE(p.dim() < 2, name);
  CHECK(std::string(optim::decay_rule_name(optim::DecayRule::all)) == "all");
}

TEST_CASE("lm training: decay all also decays biases and LayerNorm, decay matrices leaves them alone") {
  test::TempDir root("lm-decay");
  const fs::path tokens = document_dataset(root.path / "tokens");
  const double lr = 1e-2, wd = 0.5;
  const auto with_all = one_step(tokens, root.path / "all", optim::DecayRule::all, lr, wd);
  const auto with_matrices = one_step(tokens, root.path / "matrices", optim::DecayRule::matrices, lr, wd);
  const auto without = one_step(tokens, root.path / "none", optim::DecayRule::all, lr, 0.0);
  REQUIRE(with_all.size() == with_matrices.size());
  int vectors = 0;
  for (size_t i = 0; i < with_all.size(); ++i) {
    const auto& [name, a] = with_all[i];
    INFO(name);
    const std::vector<float> va = a.to_vector<float>(), vm = with_matrices[i].second.to_vector<float>(),
                             v0 = without[i].second.to_vector<float>();
    if (a.dim() >= 2) {
      CHECK(va == vm);  // matrices decay under both rules
      continue;
    }
    ++vectors;
    CHECK(vm == v0);  // matrices: no decay on biases and LayerNorm
    // AdamW decays before its update: p (1 - lr wd) - u, where p is the value before the step
    // (LayerNorm weights start at 1, biases at 0).
    const bool ln_weight = name.find("ln") != std::string::npos && name.ends_with(".weight");
    for (size_t k = 0; k < va.size(); ++k) CHECK(va[k] == doctest::Approx(v0[k] - (ln_weight ? lr * wd : 0.0)));
  }
  CHECK(vectors > 0);
}

TEST_CASE("lm evaluation reads the validation split from its start, the same batches every time") {
  test::TempDir root("lm-eval-order");
  const fs::path tokens = document_dataset(root.path / "tokens");
  Generator gen(5);
  nn::GPT model(tiny_gpt(0.1), &gen);
  data::TokenBatches val(tokens, "val", official(2, false));
  Tensor x, y;
  val.next(x, y);  // wherever the cursor is, evaluation starts over
  const double first = evaluate_lm(model, val, 2);
  const double again = evaluate_lm(model, val, 2);
  CHECK(first == again);
  data::TokenBatches fresh(tokens, "val", official(2, false));
  double sum = 0;
  {
    NoGradGuard no_grad;
    for (int b = 0; b < 2; ++b) {
      fresh.next(x, y);
      sum += model.loss(x, y).item<double>();
    }
  }
  CHECK(first == doctest::Approx(sum / 2).epsilon(1e-6));
  CHECK(std::isfinite(first));
}

// The bar for mixed precision: a bf16 (or fp16, loss-scaled) loss curve within 1-2% of fp32's
// on the same data.
TEST_CASE("lm training: bf16 and fp16 autocast runs' loss curves stay within 2% of the fp32 run's") {
  test::TempDir root("lm-bf16");
  const fs::path tokens = document_dataset(root.path / "tokens");
  auto curve = [&](Precision precision, const char* name) {
    Generator gen(3);
    nn::GPTConfig c = tiny_gpt(0.0);
    c.layers = 2;
    c.attention.d_model = 32;
    nn::GPT model(c, &gen);
    data::TokenBatches train(tokens, "train", official(4, true)), val(tokens, "val", official(4, false));
    optim::ConstantLR schedule(3e-3);
    LmTrainOptions o;
    o.steps = 40;
    o.eval_every = 5;
    o.eval_batches = 2;
    o.log_every = 10;
    o.precision = precision;
    o.dir = root.path / name;
    const LmTrainResult r = train_lm(model, gen, *test::lm_adamw(model), train, val, schedule, o);
    for (const auto& [param, t] : model.named_parameters()) CHECK_MESSAGE(t.dtype() == DType::f32, param);
    CHECK(r.loss_scale.scale == (precision == Precision::f16 ? kInitialLossScale : 0));  // no overflow here
    return r.evals;
  };
  const std::vector<EvalRecord> fp32 = curve(Precision::fp32, "fp32");
  REQUIRE(fp32.size() == 8);
  CHECK(fp32.back().val_loss < fp32.front().val_loss - 0.3);  // it learned something
  for (Precision low : {Precision::bf16, Precision::f16}) {
    const std::vector<EvalRecord> lowp = curve(low, precision_name(low));
    REQUIRE(lowp.size() == fp32.size());
    bool differs = false;
    for (size_t i = 0; i < fp32.size(); ++i) {
      INFO(std::string(precision_name(low)), " at step ", fp32[i].step, ": fp32 ", fp32[i].val_loss, ", ",
           lowp[i].val_loss);
      CHECK(std::abs(lowp[i].val_loss - fp32[i].val_loss) <= 0.02 * fp32[i].val_loss);
      differs |= lowp[i].val_loss != fp32[i].val_loss;
    }
    CHECK(differs);  // 16-bit rounding did happen
  }

  const PrecisionChoice choice = choose_precision(Precision::bf16, kCPU);
  CHECK(choice.used == Precision::bf16);
  test::check_contains(precision_note(choice, kCPU), {"bf16 autocast", "float32 weights", "bf16 storage"});
  CHECK(precision_note(choose_precision(Precision::fp32, kCPU), kCPU).empty());
  test::check_contains(precision_note(choose_precision(Precision::f16, kCPU), kCPU),
                       {"fp16 autocast", "dynamic loss scale", "fp16 storage"});
}
