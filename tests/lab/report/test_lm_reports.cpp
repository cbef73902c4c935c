// The language-model reports against the paper's numbers, read through the shipped experiment
// files as `qkvlab params / flops / cache` read them, and token sampling.
#include <doctest/doctest.h>

#include "lab/experiment/experiment.h"
#include "lab/infer/generate.h"
#include "lab/report/lm_reports.h"

using namespace qkv;
using namespace qkv::report;
using namespace qkv::infer;

namespace {
const std::string kSource = QKV_SOURCE_DIR;

std::vector<report::LmVariantModel> models(const std::string& file, const std::vector<std::string>& overrides = {}) {
  return report::lm_variant_models(experiment::load_experiment(kSource + "/experiments/lm/" + file, "", overrides));
}

const report::CacheRow& row(const std::vector<report::CacheRow>& rows, const std::string& v) {
  for (const auto& r : rows)
    if (r.variant == v) return r;
  FAIL("no row " << v);
  return rows.front();
}
}  // namespace

TEST_CASE("lm reports: gpt-300m parameter counts per variant equal the paper's") {
  const auto ms = models("gpt-300m.yaml");
  REQUIRE(ms.size() == 8);
  std::map<std::string, int64_t> params;
  for (const auto& m : ms) params[m.variant] = nn::gpt_parameter_count(m.config);
  CHECK(params["QKV"] == 305534976);
  CHECK(params["Q-K=V"] == 284542976);
  CHECK(params["Q=K-V"] == 284542976);
  CHECK(params["Q=K=V"] == 263550976);
  const std::string text = report::params_report(ms);
  CHECK(text.find("305,534,976") != std::string::npos);
  CHECK(text.find("263,550,976") != std::string::npos);
}

TEST_CASE("lm reports: the MAC table of gpt-300m at 2048 tokens") {
  const std::string text = report::flops_report(models("gpt-300m.yaml"), 2048);
  for (const char* g : {"792.69", "749.74", "706.79"}) {
    CAPTURE(g);
    CHECK(text.find(g) != std::string::npos);
  }
}

TEST_CASE("lm reports: KV-cache bytes per token at bf16 for 300M, and 1.2B at 32,768 tokens") {
  report::CacheOptions o;
  o.context = 2048;
  o.dtypes = {DType::bf16};
  o.measure = false;
  const auto rows = report::cache_rows(models("gpt-300m.yaml"), o);
  CHECK(row(rows, "QKV").bytes_per_token == 81920);
  CHECK(row(rows, "Q-K=V").bytes_per_token == 40960);
  CHECK(row(rows, "GQA-4").bytes_per_token == 20480);
  CHECK(row(rows, "MQA").bytes_per_token == 5120);
  CHECK(row(rows, "Q-GQA-4").bytes_per_token == 10240);
  CHECK(row(rows, "Q-MQA").bytes_per_token == 2560);
  CHECK(row(rows, "Q-MQA").reduction == doctest::Approx(0.96875));
  o.context = 32768;
  const auto big = report::cache_rows(models("gpt-1.2b.yaml"), o);
  CHECK(row(big, "QKV").computed_bytes == 5905580032);
  CHECK(row(big, "Q-MQA").computed_bytes == 92274688);
  // The headline of the int8 rows: Q-MQA int8 (64 + 4 bytes a row, 22 layers) against QKV bf16.
  o.dtypes = {DType::bf16, DType::i8};
  const auto both = report::cache_rows(models("gpt-1.2b.yaml"), o);
  REQUIRE(both.size() == 2 * big.size());
  CHECK(both[0].variant == "QKV");
  CHECK(both[1].dtype == DType::i8);
  CHECK(both.back().variant == "Q-MQA");
  CHECK(both.back().bytes_per_token == 68 * 22);
  CHECK(both.back().reduction == doctest::Approx(1 - 1496.0 / 180224));
  const std::string text = report::cache_report(both, o);
  CHECK(text.find("smallest: Q-MQA i8, 120.5x less than QKV bf16") != std::string::npos);
}

TEST_CASE("lm reports: the cache measured from the allocator after a real prefill equals the closed form") {
  report::CacheOptions o;
  o.context = 48;
  o.batch = 2;
  o.prefill = 8;
  for (DType dt : {DType::f32, DType::bf16, DType::i8}) {
    o.dtypes = {dt};
    const auto rows = report::cache_rows(models("shakespeare.yaml", {"model.d_model=32", "model.layers=2",
                                                                     "model.vocab=128", "model.context=32"}),
                                         o);
    REQUIRE(rows.size() == 8);
    for (const auto& r : rows) {
      CAPTURE(r.variant);
      REQUIRE(r.measured_bytes.has_value());
      CHECK(*r.measured_bytes == r.computed_bytes);
    }
    CHECK(row(rows, "Q-K=V").computed_bytes * 2 == row(rows, "QKV").computed_bytes);
  }
}

TEST_CASE("lm reports: a non-language-model experiment is refused by name") {
  CHECK_THROWS_WITH_AS(report::lm_variant_models(
                           experiment::load_experiment(kSource + "/experiments/synthetic/copy.yaml")),
                       doctest::Contains("expected lm"), ValueError);
}

TEST_CASE("sampling: greedy, top-k 1, the vocabulary limit and seeded draws") {
  Tensor logits = from_vector(std::vector<float>{0.1f, 2.0f, -1.0f, 1.5f, 9.0f}, {5});
  Generator g(0);
  SamplingOptions greedy;
  greedy.temperature = 0;
  CHECK(sample_token(logits, greedy, g) == 4);
  greedy.vocab_limit = 4;  // id 4 is padding beyond the tokenizer's vocabulary
  CHECK(sample_token(logits, greedy, g) == 1);
  SamplingOptions top1;
  top1.top_k = 1;
  top1.vocab_limit = 4;
  for (int i = 0; i < 10; ++i) CHECK(sample_token(logits, top1, g) == 1);
  SamplingOptions s;
  s.top_k = 2;
  s.vocab_limit = 4;
  Generator a(7), b(7);
  int ones = 0;
  for (int i = 0; i < 200; ++i) {
    const int64_t x = sample_token(logits, s, a);
    CHECK(x == sample_token(logits, s, b));
    CHECK((x == 1 || x == 3));
    ones += x == 1;
  }
  CHECK(ones > 100);  // p(1) = 1 / (1 + e^-0.5) = 0.62
  CHECK(ones < 150);
  SamplingOptions bad;
  bad.temperature = -1;
  CHECK_THROWS_AS(sample_token(logits, bad, g), ValueError);
}
