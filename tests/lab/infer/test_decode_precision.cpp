// bench decode's options and report: --precision bf16 runs the weights in bfloat16 on a GPU (on
// the CPU they stay float32, and it says so), --cache-dtype lists the cache storages compared (one
// parser, one default), the peak RSS is measured, and the Q-K=V-vs-QKV ratios stand beside the
// paper's ranges from experiments/paper/decode.yaml.
#include <doctest/doctest.h>

#include "lab/infer/decode_bench.h"
#include "lab/report/decode_report.h"
#include "tests/support/error_checks.h"
#include "tests/support/test_support.h"

using namespace qkv;

TEST_CASE("lm decode bench: --precision bf16 means bf16 weights on a GPU and fp32 on the CPU, said in its note") {
  CHECK(infer::parse_decode_precision("fp32") == infer::DecodePrecision::fp32);
  CHECK_THROWS_WITH_AS(infer::parse_decode_precision("fp8"), doctest::Contains("--precision 'fp8'"), ValueError);
  const infer::DecodeDtypes bf16 = infer::decode_dtypes(infer::DecodePrecision::bf16);
  CHECK(bf16.weights == DType::f32);
  test::check_contains(bf16.note, {"bf16 requested", "float32", "--cache-dtype"});
  CHECK(infer::decode_dtypes(infer::DecodePrecision::fp32).weights == DType::f32);
  // On a GPU bf16 means bf16 weights (the device is not touched: no GPU is needed here).
  const infer::DecodeDtypes gpu = infer::decode_dtypes(infer::DecodePrecision::bf16, Device("cuda:0"));
  CHECK(gpu.weights == DType::bf16);
  test::check_contains(gpu.note, {"weights and activations in bfloat16"});
}

TEST_CASE("lm decode bench: --cache-dtype is one comma-separated list, its default every storage") {
  CHECK(infer::parse_cache_dtypes(infer::kDefaultCacheDTypes, "x") ==
        std::vector<DType>{DType::f32, DType::bf16, DType::i8});
  CHECK(infer::parse_cache_dtypes("int8,bfloat16", "x") == std::vector<DType>{DType::i8, DType::bf16});
  for (const char* bad : {"fp8", "int32", "bf16,", ""})
    test::check_contains(test::error_of<ValueError>([&] { infer::parse_cache_dtypes(bad, "cache --cache-dtype"); }),
                         {"cache --cache-dtype: '", "f32, bf16, f16 and int8"});
  test::check_contains(test::error_of<ValueError>([] { infer::parse_cache_dtypes("bf16,bf16", "o"); }),
                       {"'bf16' is listed twice"});
}

TEST_CASE("lm decode bench: a bf16 cache is stored and counted in bf16, the RSS peak measured") {
  nn::GPTConfig c;
  c.vocab = 61;
  c.context = 16;
  c.layers = 1;
  c.dropout = 0.0;
  c.attention.d_model = 16;
  c.attention.heads = 2;
  const auto r = infer::bench_decode(c, 1, 16, 4, 3, DType::bf16);
  CHECK(r.cache_dtype == DType::bf16);
  CHECK(r.weight_dtype == DType::f32);
  CHECK(r.cache_bytes == nn::KVCache::bytes_per_token(c.attention, c.layers, DType::bf16) * 16);
  REQUIRE(r.peak_rss_bytes.has_value());  // Linux: /proc/self/status
  CHECK(*r.peak_rss_bytes >= r.cache_bytes);
  CHECK(*infer::peak_rss_bytes() >= *r.peak_rss_bytes);  // a high-water mark only rises
}

TEST_CASE("lm decode report: Q-K=V vs QKV ratios beside the paper's measured ranges") {
  const report::PaperDecode paper =
      report::load_paper_decode(std::string(QKV_SOURCE_DIR) + "/experiments/paper/decode.yaml");
  CHECK(paper.variant == "Q-K=V");
  CHECK(paper.peak_memory_change.first == doctest::Approx(-0.069));
  CHECK(paper.tokens_per_s_change.second == doctest::Approx(0.053));
  const std::vector<report::DecodeRow> rows = {{"QKV", 5.0, 100.0, 4000, 10000, 200000, false},
                                               {"Q-K=V", 4.0, 110.0, 2000, 9000, 190000, false}};
  const std::string row = report::decode_row(rows[1]);
  test::check_contains(row, {"| Q-K=V | 4.0 | 110.0 | 2,000 | 9,000 | 190,000 |"});
  const std::string cmp = report::decode_comparison(rows, &paper);
  test::check_contains(cmp, {"Q-K=V vs QKV", "1.2B on an A100, bf16",
                             "| peak memory (allocator) | -10.0% | -6.9% to -6.5% |", "| peak RSS | -5.0% | – |",
                             "| decode tokens/s | +10.0% | +4.4% to +5.3% |", "| KV cache bytes | -50.0% | – |"});
  // A sweep without the pair: said, not guessed.
  test::check_contains(report::decode_comparison({rows[0]}, nullptr), {"no Q-K=V vs QKV ratios"});
  test::TempDir dir;
  const std::string bad = dir.write("d.yaml", "peak_memory_change: [0.1]\ndecode_tokens_per_s_change: [0, 1]\n");
  test::check_contains(test::error_of<IOError>([&] { report::load_paper_decode(bad); }),
                       {"d.yaml", "peak_memory_change", "[low, high]"});
}
