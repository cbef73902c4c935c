// Multiply-accumulates counted from op calls (autograd/op_macs.h) and the model reports built on
// them (lab/report/model_reports.h, lm_reports.h): each counted op against its definition, the
// GPT's closed form equal to its count for every kind of variant, and the encoder, ViT and set
// transformer reports of the shipped files, the (+) variants' extra terms included.
#include <doctest/doctest.h>

#include "autograd/grad_mode.h"
#include "autograd/op_macs.h"
#include "autograd/ops.h"
#include "lab/report/lm_reports.h"
#include "lab/report/model_reports.h"
#include "tests/support/error_checks.h"
#include "tests/support/test_support.h"

using namespace qkv;

namespace {
const std::string kSource = QKV_SOURCE_DIR;
}  // namespace

TEST_CASE("op macs: matrix products by their definition, the rest free, nothing launched") {
  NoGradGuard no_grad;
  const Tensor a = zeros({2, 3, 5}), b = zeros({5, 7}), w = zeros({7, 5}), x = zeros({4, 5});
  const autograd::MacCount c = autograd::count_macs([&] {
    matmul(a, b);                           // 2 x 3 x 7 x 5
    matmul(x, w, false, true);              // 4 x 7 x 5, b transposed
    matmul(w, zeros({7, 4}), true, false);  // a transposed: [5, 7] x [7, 4], 5 x 4 x 7
    linear(x, w, Tensor());                 // 4 rows x 7 x 5
    attention(zeros({1, 2, 6, 4}), zeros({1, 1, 9, 4}), zeros({1, 1, 9, 4}), Tensor(), false, 0.0);  // 12 x 9 x 8
    relu(a);
  });
  CHECK(c.by_op.at("matmul") == 2 * 3 * 7 * 5 + 4 * 7 * 5 + 5 * 4 * 7);
  CHECK(c.by_op.at("linear") == 4 * 7 * 5);
  CHECK(c.by_op.at("attention") == 2 * 6 * 9 * (4 + 4));
  CHECK(c.by_op.count("relu") == 0);
  CHECK(c.total() == 210 + 140 + 140 + 140 + 864);
}

TEST_CASE("op macs: a GPT's closed form equals the count of its forward's op calls, for every kind of variant") {
  nn::GPTConfig c;
  c.vocab = 96;
  c.context = 64;
  c.layers = 2;
  c.dropout = 0;
  c.attention.d_model = 32;
  c.attention.heads = 4;
  for (auto [sharing, kv, rank] : std::vector<std::tuple<nn::Sharing, int64_t, int64_t>>{{nn::Sharing::qkv, 0, 0},
                                                                                         {nn::Sharing::q_kv, 0, 0},
                                                                                         {nn::Sharing::qk_v, 0, 0},
                                                                                         {nn::Sharing::all, 0, 0},
                                                                                         {nn::Sharing::qkv, 2, 0},
                                                                                         {nn::Sharing::q_kv, 1, 0},
                                                                                         {nn::Sharing::q_kv, 0, 3}}) {
    CAPTURE(int(sharing));
    CAPTURE(kv);
    CAPTURE(rank);
    c.attention.sharing = sharing;
    c.attention.kv_heads = kv;
    c.attention.v_rank = rank;
    CHECK(report::counted_gpt_macs(c, 48) == nn::gpt_macs(c, 48).total());
  }
}

TEST_CASE("model reports: the encoder, ViT and set transformer of the shipped files, (+) terms included") {
  for (const char* file :
       {"/experiments/synthetic/copy.yaml", "/experiments/vision/mnist.yaml", "/experiments/vision/anomaly.yaml"}) {
    CAPTURE(file);
    const auto e = experiment::load_experiment(kSource + file, "smoke");
    const std::vector<report::FamilyModel> models = report::family_models(e);
    REQUIRE(models.size() == 6);
    CHECK(models[0].variant == "QKV");
    CHECK(models[2].variant == "(Q=K-V)+");
    // Parameters as the built model counts them; the (+) variant adds its score weights.
    std::vector<int64_t> params;
    for (const auto& m : models) params.push_back(m.build().module->num_parameters());
    CHECK(params[0] > params[1]);
    CHECK(params[2] > params[1]);
    test::check_contains(report::family_params_report(models), {"| QKV | ", "| (Q=K-V)+ | "});
    // MACs: sharing removes projection work; the (+) scores add T^2 m per layer.
    const int64_t qkv = report::example_macs(models[0]).total(), shared = report::example_macs(models[1]).total(),
                  plus = report::example_macs(models[2]).total();
    CHECK(qkv > shared);
    CHECK(plus > shared);
    test::check_contains(report::family_macs_report(models), {"counted from its op calls", "| (Q=K=V)+ | "});
  }
  // The encoder exactly: length 16, d 64, 2 layers, m 10.
  const auto copy =
      report::family_models(experiment::load_experiment(kSource + "/experiments/synthetic/copy.yaml", "smoke"));
  CHECK(report::example_macs(copy[2]).total() - report::example_macs(copy[1]).total() == 2 * 16 * 16 * 10);
  CHECK(report::example_macs(copy[0]).total() - report::example_macs(copy[1]).total() == 2 * 16 * 64 * 64);
  CHECK_THROWS_AS(report::family_models(experiment::load_experiment(kSource + "/experiments/lm/shakespeare.yaml")),
                  ValueError);
}
