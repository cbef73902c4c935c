// Hugging Face Llama checkpoints in and out, against fixtures transformers 5 saved with random
// weights (tests/parity/make_hf_llama_fixture.py): GQA with a head dim of its own, biases,
// llama3 rotary scaling and an untied head (hf_llama_tiny); MHA, linear scaling, a tied head and
// sharded weights (hf_llama_linear); and hf_llama_tiny as transformers 4.46 wrote it (rope_theta
// and rope_scaling where 5.x writes rope_parameters). Logits within 1e-5 of transformers', the
// same greedy tokens as its generate(), its tokenizer's ids (Llama 3's Split regex), and an
// export that gives the checkpoint's tensors back bit for bit.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "io/json_read.h"
#include "io/safetensors.h"
#include "lab/experiment/lm_run.h"
#include "lab/infer/convert.h"
#include "lab/infer/generate.h"
#include "lab/infer/hf/export.h"
#include "lab/infer/hf/import.h"
#include "lab/infer/run_model.h"
#include "tests/support/error_checks.h"
#include "tests/support/tensor_compare.h"
#include "tests/support/test_support.h"
#include "train/data/tokens/bpe.h"

using namespace qkv;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const fs::path kFixtures = fs::path(QKV_SOURCE_DIR) / "tests" / "fixtures";

infer::ImportedRun import_to(const fs::path& source, const fs::path& out) {
  infer::ImportRequest r;
  r.source = source;
  r.out = out;
  return infer::import_hf(r);
}

std::unique_ptr<nn::GPT> model_of(const fs::path& run) {
  const experiment::LmRunFiles f = experiment::open_lm_run(run, "generate");
  return infer::load_run_model(f, f.config, kCPU);
}

}  // namespace

TEST_CASE("hf llama: imported checkpoints give transformers' logits within 1e-5 and its greedy tokens") {
  for (const std::string name : {"hf_llama_tiny", "hf_llama_linear", "hf_llama_tiny_tf4"}) {
    CAPTURE(name);
    const fs::path fixture = kFixtures / name;
    test::TempDir tmp("hf-llama");
    const infer::ImportedRun run = import_to(fixture, tmp.path / "run");
    CHECK(run.architecture == "Llama");
    CHECK(run.warnings.empty());
    CHECK(run.has_tokenizer);
    const auto model = model_of(tmp.path / "run");
    const auto ref = safetensors::load((fixture / "reference.safetensors").string());
    const double diff = test::max_abs_difference(model->forward(ref.at("ids")), ref.at("logits"));
    MESSAGE(name, ": max |qkvlab - transformers| over the logits: ", diff);
    CHECK(diff < 1e-5);

    const json ids = read_json_file(fixture / "reference_ids.json", "reference ids");
    infer::SamplingOptions greedy;
    greedy.temperature = 0;
    const auto prompt = ids["prompt"].get<std::vector<int64_t>>();
    const auto want = ids["greedy"].get<std::vector<int64_t>>();
    CHECK(infer::generate(*model, prompt, int64_t(want.size()), greedy) == want);
  }
}

TEST_CASE("hf llama: the import reads the checkpoint's shape, KV heads and rotary settings") {
  test::TempDir tmp("hf-llama-shape");
  const infer::ImportedRun run = import_to(kFixtures / "hf_llama_tiny", tmp.path / "run");
  const nn::GPTConfig& g = run.gpt;
  CHECK(g.attention.heads == 4);
  CHECK(g.attention.kv_head_count() == 2);
  CHECK(g.attention.head_dim() == 24);
  CHECK(g.attention.bias);
  CHECK(g.mlp_bias);
  CHECK(!g.tied_head);
  REQUIRE(g.attention.rope);
  CHECK(g.attention.rope->scaling == nn::RopeScaling::llama3);
  CHECK(g.attention.rope->original_context == 16);
  const experiment::LmRunFiles f = experiment::open_lm_run(tmp.path / "run", "generate");
  CHECK(nn::variant_name(f.run.variant) == "GQA-2");
  CHECK(f.config.model.kind == "llama");
  CHECK(f.config.model.head_dim == 24);
}

TEST_CASE("hf llama: the tokenizer gives transformers' ids through Llama 3's Split regex") {
  const fs::path fixture = kFixtures / "hf_llama_tiny";
  const json ref = read_json_file(fixture / "reference_ids.json", "reference ids");
  const std::string text = ref["text"].get<std::string>();
  const data::Gpt2Tokenizer tok = data::Gpt2Tokenizer::load(fixture);
  CHECK(tok.encode_ordinary(text) == ref["ids"].get<std::vector<int32_t>>());
  CHECK(tok.decode(tok.encode_ordinary(text)) == text);
  CHECK(tok.token_bytes(tok.eot()) == "<|end_of_text|>");  // tokenizer_config.json's eos_token
  // Special tokens spelled out in text are their own tokens.
  const std::vector<int32_t> two = tok.encode("<|begin_of_text|>To<|end_of_text|>");
  REQUIRE(two.size() >= 3);
  CHECK(two.front() == 0);
  CHECK(two.back() == tok.eot());
}

TEST_CASE("hf llama: import then export gives the checkpoint's tensors bit for bit") {
  for (const std::string name : {"hf_llama_tiny", "hf_llama_linear"}) {
    CAPTURE(name);
    const fs::path fixture = kFixtures / name;
    test::TempDir tmp("hf-llama-roundtrip");
    import_to(fixture, tmp.path / "run");
    infer::ExportRequest e;
    e.format = infer::ExportFormat::hf_llama;
    e.run = tmp.path / "run";
    e.out = tmp.path / "hf";
    CHECK(infer::export_hf(e).has_tokenizer);
    std::map<std::string, Tensor> original;
    for (const auto& entry : fs::directory_iterator(fixture))
      if (entry.path().extension() == ".safetensors" && entry.path().filename() != "reference.safetensors")
        for (auto& [n, t] : safetensors::load(entry.path().string())) original[n] = t;
    const auto written = safetensors::load((e.out / "model.safetensors").string());
    CHECK(written.size() == original.size());
    for (const auto& [n, t] : original) {
      CAPTURE(n);
      REQUIRE(written.contains(n));
      CHECK(written.at(n).shape() == t.shape());
      CHECK(std::memcmp(written.at(n).raw_data(), t.raw_data(), size_t(t.numel()) * dtype_size(t.dtype())) == 0);
    }
    const json in = read_json_file(fixture / "config.json", "config"),
               out = read_json_file(e.out / "config.json", "config");
    for (const char* key :
         {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
          "num_key_value_heads", "head_dim", "tie_word_embeddings", "attention_bias", "mlp_bias", "rope_parameters"})
      CHECK_MESSAGE(in[key] == out[key], key);
    CHECK(test::read_file(e.out / "tokenizer.json") == test::read_file(fixture / "tokenizer.json"));
  }
}

TEST_CASE("hf llama: a GPT-2 run does not export as a Llama, nor a Llama run as GPT-2") {
  test::TempDir tmp("hf-llama-formats");
  import_to(kFixtures / "hf_llama_tiny", tmp.path / "llama");
  infer::ExportRequest e;
  e.run = tmp.path / "llama";
  e.out = tmp.path / "as-gpt2";
  test::check_contains(test::error_of<ValueError>([&] { infer::export_hf(e); }), {"Llama-style", "hf-llama"});
  import_to(kFixtures / "hf_gpt2_tiny", tmp.path / "gpt2");
  e.format = infer::ExportFormat::hf_llama;
  e.run = tmp.path / "gpt2";
  e.out = tmp.path / "as-llama";
  test::check_contains(test::error_of<ValueError>([&] { infer::export_hf(e); }), {"hf-llama", "not a Llama-style"});
}

TEST_CASE("hf llama: a config the import cannot follow is an error naming the file and the key") {
  test::TempDir tmp("hf-llama-bad");
  const fs::path dir = tmp.path / "src";
  fs::create_directories(dir);
  for (const char* f : {"config.json", "model.safetensors"}) fs::copy_file(kFixtures / "hf_llama_tiny" / f, dir / f);
  const auto edit = [&](const std::function<void(json&)>& change) {
    json j = read_json_file(kFixtures / "hf_llama_tiny" / "config.json", "config");
    change(j);
    test::write_file(dir / "config.json", j.dump(2));
    return test::error_of<IOError>([&] { import_to(dir, tmp.path / ("out" + std::to_string(std::rand()))); });
  };
  test::check_contains(edit([](json& j) { j["rope_parameters"]["rope_type"] = "yarn"; }),
                       {"config.json", "rope_parameters.rope_type", "yarn", "llama3"});
  test::check_contains(edit([](json& j) { j["hidden_act"] = "gelu"; }), {"config.json", "'hidden_act'", "silu"});
  test::check_contains(edit([](json& j) { j["rope_parameters"]["partial_rotary_factor"] = 0.5; }),
                       {"config.json", "rope_parameters.partial_rotary_factor", "whole heads"});
  test::check_contains(edit([](json& j) { j["num_key_value_heads"] = 3; }),
                       {"config.json", "'num_key_value_heads'", "does not divide"});
  test::check_contains(edit([](json& j) { j["model_type"] = "mistral"; }), {"config.json", "'model_type'", "mistral"});
  test::check_contains(edit([](json& j) { j["head_dim"] = 16; }),
                       {"model.safetensors", "'model.layers.0.self_attn.q_proj.weight'", "expected [64, 64]"});
}

// K=V conversion of an imported Llama: copy-k and average set A = C = I, which rotary positions
// keep; svd's map of the keys folded into W_q would not survive the rotation and is refused.
TEST_CASE("hf llama: an imported GQA Llama converts to its K=V form by copy-k, and svd is refused") {
  test::TempDir tmp("hf-llama-convert");
  import_to(kFixtures / "hf_llama_tiny", tmp.path / "run");
  const auto model = model_of(tmp.path / "run");
  const infer::Conversion c = infer::convert_to_shared_kv(*model, experiment::ConvertMethod::copy_k, {});
  CHECK(c.model->config().attention.sharing == nn::Sharing::q_kv);
  CHECK(c.model->config().attention.kv_head_count() == 2);
  const auto weight = [](const nn::GPT& m, const std::string& name) {
    for (const auto& [n, t] : m.state_dict())
      if (n == name) return t;
    FAIL("no tensor " << name);
    return Tensor();
  };
  CHECK(test::max_abs_difference(weight(*c.model, "blocks.0.attn.kv.weight"),
                                 weight(*model, "blocks.0.attn.k.weight")) == 0);
  infer::Calibration cal = infer::calibrate(*model, {from_vector(std::vector<int64_t>{1, 5, 9, 200, 7, 3}, {1, 6})});
  test::check_contains(test::error_of<ValueError>(
                           [&] { infer::convert_to_shared_kv(*model, experiment::ConvertMethod::svd, cal); }),
                       {"svd", "rotary", "copy-k"});
}
