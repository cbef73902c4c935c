// `qkvlab export --format hf-gpt2` of every variant (lab/infer/hf/export.h): the exported folder,
// read back as a plain GPT-2 (QKV, every head its own K and V), computes the variant's logits:
// shared projections written out as their copies, GQA/MQA heads repeated, a low-rank V residual
// folded into V. transformers itself reads these folders in the `parity` test
// (tests/parity/check_hf_export.py). What GPT-2 cannot express is refused, naming the variant.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "io/json_read.h"
#include "lab/experiment/lm_run.h"
#include "lab/infer/hf/export.h"
#include "lab/infer/hf/import.h"
#include "lab/infer/run_model.h"
#include "tests/support/error_checks.h"
#include "tests/support/lm_run_folder.h"
#include "tests/support/tensor_compare.h"
#include "tests/support/test_support.h"

using namespace qkv;
namespace fs = std::filesystem;

namespace {

Tensor fixed_ids(int64_t vocab) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 2 * 16; ++i) ids.push_back((i * 37 + 11) % vocab);
  return from_vector(ids, {2, 16});
}

// Exports the run at `dir`/run and imports the export: the plain GPT-2 it stands for.
std::unique_ptr<nn::GPT> exported_and_read_back(const fs::path& dir) {
  infer::ExportRequest e;
  e.run = dir / "run";
  e.out = dir / "hf";
  infer::export_hf(e);
  infer::ImportRequest i;
  i.source = dir / "hf";
  i.out = dir / "back";
  infer::import_hf(i);
  const experiment::LmRunFiles f = experiment::open_lm_run(dir / "back", "test");
  return infer::load_run_model(f, f.config, kCPU);
}

}  // namespace

TEST_CASE("hf export: every variant's export computes its logits") {
  for (const char* variant :
       {"QKV", "Q=K-V", "Q-K=V", "Q=K=V", "Q=V-K", "GQA-2", "MQA", "Q-GQA-2", "Q-MQA", "Q-K=V+LR4", "Q-MQA+LR2"}) {
    test::TempDir tmp("hf-export");
    const auto model = test::write_lm_run(tmp.path / "run", variant);
    const auto back = exported_and_read_back(tmp.path);
    CHECK_MESSAGE(nn::variant_name({back->config().attention.sharing, back->config().attention.kv_heads, false}) ==
                      "QKV",
                  variant);
    const Tensor ids = fixed_ids(97);
    const double diff = test::max_abs_difference(model->forward(ids), back->forward(ids));
    CHECK_MESSAGE(diff < 1e-5, variant, ": max |variant - exported GPT-2| over the logits: ", diff);
  }
}

TEST_CASE("hf export: the MLP's activation and width are written as GPT-2's keys") {
  for (const auto& [activation, hf] :
       {std::pair{"gelu", "gelu"}, std::pair{"gelu_tanh", "gelu_new"}, std::pair{"relu", "relu"}}) {
    test::TempDir tmp("hf-export-act");
    test::LmRunShape shape;
    shape.activation = activation;
    shape.ffn_mult = 3;
    const auto model = test::write_lm_run(tmp.path / "run", "Q-K=V", 2, shape);
    const auto back = exported_and_read_back(tmp.path);
    const nlohmann::json config = read_json_file(tmp.path / "hf" / "config.json", "config");
    CHECK_MESSAGE(config["activation_function"] == hf, activation);
    CHECK(config["n_inner"] == 96);
    CHECK(config["vocab_size"] == 97);
    CHECK(config["n_positions"] == 16);
    CHECK(test::max_abs_difference(model->forward(fixed_ids(97)), back->forward(fixed_ids(97))) < 1e-5);
  }
}

TEST_CASE("hf export: what GPT-2 cannot express, and an occupied --out, are refused") {
  test::TempDir tmp("hf-export-refused");
  test::write_lm_run(tmp.path / "run", "QKV+linear");
  infer::ExportRequest e;
  e.run = tmp.path / "run";
  e.out = tmp.path / "hf";
  test::check_contains(test::error_of<ValueError>([&] { infer::export_hf(e); }), {"export", "GPT-2"});
  CHECK(!fs::exists(e.out / "config.json"));

  test::write_lm_run(tmp.path / "run2", "QKV");
  e.run = tmp.path / "run2";
  fs::create_directories(e.out);
  test::write_file(e.out / "keep.txt", "x");
  test::check_contains(test::error_of<IOError>([&] { infer::export_hf(e); }), {"export --out", "not an empty"});
  CHECK(test::read_file(e.out / "keep.txt") == "x");
}
