// `qkvlab import` of a Hugging Face GPT-2 folder (lab/infer/hf/import.h) on the fixture that
// transformers wrote (tests/fixtures/hf_gpt2_tiny, tests/parity/make_hf_gpt2_fixture.py): the
// imported run's logits are transformers' within 1e-5, its tokenizer gives transformers' ids
// from each of the files it comes in, a sharded copy imports the same, import then export gives
// back the fixture's tensors byte for byte, and each kind of damage is an error naming the file
// and the key or tensor.
#include <doctest/doctest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "io/json_read.h"
#include "io/safetensors.h"
#include "lab/experiment/lm_run.h"
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

const fs::path kFixture = fs::path(QKV_SOURCE_DIR) / "tests" / "fixtures" / "hf_gpt2_tiny";

infer::ImportedRun import_to(const fs::path& source, const fs::path& out, bool strict = false) {
  infer::ImportRequest r;
  r.source = source;
  r.out = out;
  r.strict = strict;
  return infer::import_hf(r);
}

// A copy of the fixture's model files (config.json, model.safetensors) to damage.
fs::path model_copy(const test::TempDir& tmp, const std::string& name) {
  const fs::path dir = tmp.path / name;
  fs::create_directories(dir);
  for (const char* f : {"config.json", "model.safetensors"}) fs::copy_file(kFixture / f, dir / f);
  return dir;
}

std::map<std::string, Tensor> fixture_tensors() { return safetensors::load((kFixture / "model.safetensors").string()); }

void save_tensors(const fs::path& file, const std::map<std::string, Tensor>& t) {
  safetensors::save(file.string(), {t.begin(), t.end()}, {{"format", "pt"}});
}

void edit_config(const fs::path& dir, const std::function<void(json&)>& edit) {
  json j = read_json_file(dir / "config.json", "config");
  edit(j);
  test::write_file(dir / "config.json", j.dump(2));
}

}  // namespace

TEST_CASE("hf import: the imported run's logits are transformers' within 1e-5") {
  test::TempDir tmp("hf-import");
  const infer::ImportedRun run = import_to(kFixture, tmp.path / "run");
  CHECK(run.has_tokenizer);
  CHECK(run.gpt.vocab == 1000);
  CHECK(run.gpt.activation == nn::Activation::gelu_tanh);
  CHECK(fs::is_regular_file(tmp.path / "run" / "import.json"));

  const experiment::LmRunFiles f = experiment::open_lm_run(tmp.path / "run", "generate");
  CHECK(nn::variant_name(f.run.variant) == "QKV");
  CHECK(f.config.model.vocab == 1000);
  const auto model = infer::load_run_model(f, f.config, kCPU);
  const auto ref = safetensors::load((kFixture / "reference.safetensors").string());
  const Tensor logits = model->forward(ref.at("ids"));
  const double diff = test::max_abs_difference(logits, ref.at("logits"));
  MESSAGE("max |qkvlab - transformers| over the logits: ", diff);
  CHECK(diff < 1e-5);
}

TEST_CASE("hf import: the tokenizer gives transformers' ids from vocab.json + merges.txt and from tokenizer.json") {
  const json ref = read_json_file(kFixture / "reference_ids.json", "reference ids");
  const std::string text = ref["text"].get<std::string>();
  const auto expected = ref["ids"].get<std::vector<int32_t>>();
  CHECK(data::Gpt2Tokenizer::load(kFixture).encode(text) == expected);  // vocab.json + merges.txt first

  test::TempDir tmp("hf-tokenizer");
  fs::copy_file(kFixture / "tokenizer.json", tmp.path / "tokenizer.json");
  const data::Gpt2Tokenizer fast = data::Gpt2Tokenizer::load(tmp.path);
  CHECK(fast.encode(text) == expected);
  CHECK(fast.vocab_size() == 1000);
  CHECK(fast.decode(expected) == text);

  // A tokenizer.json that is not GPT-2's is refused naming the key.
  json j = read_json_file(tmp.path / "tokenizer.json", "tokenizer.json");
  j["pre_tokenizer"]["add_prefix_space"] = true;
  test::write_file(tmp.path / "tokenizer.json", j.dump());
  test::check_contains(test::error_of<IOError>([&] { data::Gpt2Tokenizer::load(tmp.path); }),
                       {"tokenizer.json", "pre_tokenizer.add_prefix_space"});
  j = read_json_file(kFixture / "tokenizer.json", "tokenizer.json");
  j["model"]["merges"][3] = "a b c";
  test::write_file(tmp.path / "tokenizer.json", j.dump());
  test::check_contains(test::error_of<IOError>([&] { data::Gpt2Tokenizer::load(tmp.path); }),
                       {"tokenizer.json", "model.merges[3]", "a b c"});
  fs::remove(tmp.path / "tokenizer.json");
  test::check_contains(test::error_of<IOError>([&] { data::Gpt2Tokenizer::load(tmp.path); }),
                       {tmp.path.string(), "vocab.json + merges.txt", "tokenizer.json"});
}

TEST_CASE("hf import: import then export gives the fixture's tensors byte for byte") {
  test::TempDir tmp("hf-roundtrip");
  import_to(kFixture, tmp.path / "run");
  infer::ExportRequest e;
  e.run = tmp.path / "run";
  e.out = tmp.path / "hf";
  const infer::ExportedModel m = infer::export_hf(e);
  CHECK(m.has_tokenizer);
  const auto original = safetensors::read_header((kFixture / "model.safetensors").string());
  const auto written = safetensors::read_header((tmp.path / "hf" / "model.safetensors").string());
  CHECK(written.metadata.at("format") == "pt");
  REQUIRE(written.tensors.size() == original.tensors.size());
  const auto a = fixture_tensors();
  const auto b = safetensors::load((tmp.path / "hf" / "model.safetensors").string());
  for (const auto& [name, t] : a) {
    CAPTURE(name);
    REQUIRE(b.contains(name));
    CHECK(b.at(name).dtype() == t.dtype());
    CHECK(b.at(name).shape() == t.shape());
    CHECK(std::memcmp(b.at(name).raw_data(), t.raw_data(), size_t(t.numel()) * dtype_size(t.dtype())) == 0);
  }
  // The config and tokenizer say what the fixture's do.
  const json in = read_json_file(kFixture / "config.json", "config"),
             out = read_json_file(e.out / "config.json", "config");
  for (const char* key : {"vocab_size", "n_positions", "n_embd", "n_layer", "n_head", "activation_function"})
    CHECK_MESSAGE(in[key] == out[key], key);
  CHECK(test::read_file(e.out / "vocab.json") == test::read_file(kFixture / "vocab.json"));
  CHECK(test::read_file(e.out / "merges.txt") == test::read_file(kFixture / "merges.txt"));
}

TEST_CASE("hf import: a sharded checkpoint imports as the single file does") {
  test::TempDir tmp("hf-sharded");
  const fs::path dir = tmp.path / "sharded";
  fs::create_directories(dir);
  fs::copy_file(kFixture / "config.json", dir / "config.json");
  std::map<std::string, Tensor> first, second;
  json map = json::object();
  for (const auto& [name, t] : fixture_tensors()) {
    const bool one = name.find(".h.0.") != std::string::npos;
    (one ? first : second)[name] = t;
    map[name] = one ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  save_tensors(dir / "model-00001-of-00002.safetensors", first);
  save_tensors(dir / "model-00002-of-00002.safetensors", second);
  test::write_file(dir / "model.safetensors.index.json",
                   json{{"metadata", json::object()}, {"weight_map", map}}.dump());
  import_to(dir, tmp.path / "run");
  import_to(kFixture, tmp.path / "single");
  const auto a = safetensors::load((tmp.path / "run" / "checkpoints" / "step_00000000.safetensors").string());
  const auto b = safetensors::load((tmp.path / "single" / "checkpoints" / "step_00000000.safetensors").string());
  REQUIRE(a.size() == b.size());
  for (const auto& [name, t] : a) CHECK_MESSAGE(test::max_abs_difference(t, b.at(name)) == 0, name);

  // The index names a shard that is not there, or puts a tensor in the wrong shard.
  map["transformer.wte.weight"] = "model-00003-of-00002.safetensors";
  test::write_file(dir / "model.safetensors.index.json", json{{"weight_map", map}}.dump());
  test::check_contains(test::error_of<IOError>([&] { import_to(dir, tmp.path / "bad1"); }),
                       {"model.safetensors.index.json", "model-00003-of-00002.safetensors", "missing"});
  map["transformer.wte.weight"] = "model-00001-of-00002.safetensors";
  test::write_file(dir / "model.safetensors.index.json", json{{"weight_map", map}}.dump());
  test::check_contains(test::error_of<IOError>([&] { import_to(dir, tmp.path / "bad2"); }),
                       {"model.safetensors.index.json", "weight_map.transformer.wte.weight"});
}

// The same tiny GPT-2 as transformers 5 saves it: config.json with dtype, tokenizer.json alone (no
// vocab.json + merges.txt). It imports, gives its logits and generate()'s greedy tokens.
TEST_CASE("hf import: a GPT-2 saved by transformers 5 imports with its logits and greedy tokens") {
  const fs::path fixture = fs::path(QKV_SOURCE_DIR) / "tests" / "fixtures" / "hf_gpt2_tiny_tf5";
  test::TempDir tmp("hf-import-tf5");
  const infer::ImportedRun run = import_to(fixture, tmp.path / "run");
  CHECK(run.warnings.empty());
  CHECK(run.has_tokenizer);
  const experiment::LmRunFiles f = experiment::open_lm_run(tmp.path / "run", "generate");
  const auto model = infer::load_run_model(f, f.config, kCPU);
  const auto ref = safetensors::load((fixture / "reference.safetensors").string());
  CHECK(test::max_abs_difference(model->forward(ref.at("ids")), ref.at("logits")) < 1e-5);
  const json ids = read_json_file(fixture / "reference_ids.json", "reference ids");
  CHECK(data::Gpt2Tokenizer::load(tmp.path / "run" / "tokenizer").encode(ids["text"].get<std::string>()) ==
        ids["ids"].get<std::vector<int32_t>>());
  infer::SamplingOptions greedy;
  greedy.temperature = 0;
  const auto want = ids["greedy"].get<std::vector<int64_t>>();
  CHECK(infer::generate(*model, ids["prompt"].get<std::vector<int64_t>>(), int64_t(want.size()), greedy) == want);
}

// transformers 5 writes `dtype` where 4.x wrote `torch_dtype`; a key the import does not know
// (here one a later release might add) imports with a warning naming it and the assumption.
TEST_CASE("hf import: the dtype key of transformers 5 imports, and an unknown key is a warning naming it") {
  test::TempDir tmp("hf-keys");
  const fs::path dir = model_copy(tmp, "keys");
  edit_config(dir, [](json& j) {
    j.erase("torch_dtype");
    j["dtype"] = "float32";
    j["attn_implementation_hint"] = "sdpa";
  });
  const infer::ImportedRun run = import_to(dir, tmp.path / "out");
  REQUIRE(run.warnings.size() == 1);
  test::check_contains(run.warnings[0], {"config.json", "'attn_implementation_hint'", "\"sdpa\"",
                                         "assumed not to change the logits", "--strict"});
  CHECK(fs::exists(tmp.path / "out" / "import.json"));
}

TEST_CASE("hf import: a damaged folder is an error naming the file and the key or tensor") {
  test::TempDir tmp("hf-damaged");
  int n = 0;
  const auto fails = [&](const fs::path& dir) {
    return test::error_of<IOError>([&] { import_to(dir, tmp.path / ("out" + std::to_string(n++))); });
  };
  SUBCASE("missing tensor") {
    const fs::path dir = model_copy(tmp, "missing");
    auto t = fixture_tensors();
    t.erase("transformer.h.1.mlp.c_fc.bias");
    save_tensors(dir / "model.safetensors", t);
    test::check_contains(fails(dir), {"model.safetensors", "'transformer.h.1.mlp.c_fc.bias'", "missing"});
  }
  SUBCASE("wrong shape") {
    const fs::path dir = model_copy(tmp, "shape");
    auto t = fixture_tensors();
    t["transformer.h.0.attn.c_attn.weight"] = t["transformer.h.0.attn.c_attn.weight"].transpose(0, 1).contiguous();
    save_tensors(dir / "model.safetensors", t);
    test::check_contains(fails(dir), {"model.safetensors", "'transformer.h.0.attn.c_attn.weight'", "[192, 64]",
                                      "expected [64, 192]"});
  }
  SUBCASE("wrong dtype") {
    const fs::path dir = model_copy(tmp, "dtype");
    auto t = fixture_tensors();
    t["transformer.wpe.weight"] = t["transformer.wpe.weight"].to(DType::i64);
    save_tensors(dir / "model.safetensors", t);
    test::check_contains(fails(dir), {"model.safetensors", "'transformer.wpe.weight'", "I64", "floating"});
  }
  SUBCASE("a tensor a GPT-2 does not have") {
    const fs::path dir = model_copy(tmp, "extra");
    auto t = fixture_tensors();
    t["score.weight"] = zeros({2, 64});
    save_tensors(dir / "model.safetensors", t);
    test::check_contains(fails(dir), {"model.safetensors", "'score.weight'", "not part of a GPT-2"});
  }
  SUBCASE("an output layer that is not the embedding") {
    const fs::path dir = model_copy(tmp, "untied");
    auto t = fixture_tensors();
    t["lm_head.weight"] = t["transformer.wte.weight"] * 2.0;
    save_tensors(dir / "model.safetensors", t);
    test::check_contains(fails(dir), {"model.safetensors", "'lm_head.weight'", "differs"});
  }
  SUBCASE("unknown activation") {
    const fs::path dir = model_copy(tmp, "activation");
    edit_config(dir, [](json& j) { j["activation_function"] = "swish"; });
    test::check_contains(fails(dir), {"config.json", "'activation_function'", "swish", "gelu_new"});
  }
  SUBCASE("unknown key: an error under --strict") {
    const fs::path dir = model_copy(tmp, "key");
    edit_config(dir, [](json& j) { j["rotary_dim"] = 16; });
    const std::string error =
        test::error_of<IOError>([&] { import_to(dir, tmp.path / ("out" + std::to_string(n++)), true); });
    test::check_contains(error, {"config.json", "'rotary_dim'", "unknown", "--strict"});
  }
  SUBCASE("unsupported values") {
    const fs::path dir = model_copy(tmp, "values");
    edit_config(dir, [](json& j) { j["layer_norm_epsilon"] = 1e-6; });
    test::check_contains(fails(dir), {"config.json", "'layer_norm_epsilon'"});
    edit_config(dir, [](json& j) {
      j["layer_norm_epsilon"] = 1e-5;
      j["scale_attn_by_inverse_layer_idx"] = true;
    });
    test::check_contains(fails(dir), {"config.json", "'scale_attn_by_inverse_layer_idx'"});
    edit_config(dir, [](json& j) {
      j.erase("scale_attn_by_inverse_layer_idx");
      j["n_head"] = 5;
    });
    test::check_contains(fails(dir), {"config.json", "'n_head'", "n_embd 64"});
    edit_config(dir, [](json& j) {
      j["n_head"] = 4;
      j.erase("n_embd");
    });
    test::check_contains(fails(dir), {"config.json", "'n_embd'", "missing"});
  }
  SUBCASE("no model file") {
    const fs::path dir = model_copy(tmp, "none");
    fs::remove(dir / "model.safetensors");
    test::check_contains(fails(dir), {dir.string(), "model.safetensors"});
    test::write_file(dir / "pytorch_model.bin", "pickle");
    test::check_contains(fails(dir), {"pytorch_model.bin", "safe_serialization"});
  }
  SUBCASE("a damaged tokenizer") {
    const fs::path dir = model_copy(tmp, "tokenizer");
    fs::copy_file(kFixture / "merges.txt", dir / "merges.txt");
    test::write_file(dir / "vocab.json", "{\"a\": 0}");
    test::check_contains(fails(dir), {"vocab.json", "<|endoftext|>"});
  }
}
