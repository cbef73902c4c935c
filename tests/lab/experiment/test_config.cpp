// Tests of the experiment configuration layer (lab/experiment/) on synthetic files: the shipped
// experiment files at every scale, strict parsing and its messages (file, line, key, value,
// expected form), variants in sweeps, overrides and their precedence, sweep expansion and run
// ids, the YAML round trip, and run folders. The other families: test_families.cpp.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>

#include "lab/experiment/experiment.h"
#include "lab/experiment/overrides.h"
#include "lab/experiment/run_dir.h"
#include "tests/support/error_checks.h"
#include "tests/support/test_support.h"

using namespace qkv;
using namespace qkv::experiment;
namespace fs = std::filesystem;

namespace {

using test::TempDir;

const std::string kSynthetic = std::string(QKV_SOURCE_DIR) + "/experiments/synthetic/";
const std::vector<std::string> kTasks = {"reverse", "sort", "sub", "swap", "copy"};
const std::vector<std::string> kSixVariants = {"QKV", "Q=K-V", "(Q=K-V)+", "Q-K=V", "Q=K=V", "(Q=K=V)+"};

using test::check_contains;

// The message of the ConfigError that `f` throws; fails the test when it throws nothing.
std::string error_of(const std::function<void()>& f) { return test::error_of<ConfigError>(f); }

const SyntheticConfig& synthetic(const Config& c) { return c.as<SyntheticConfig>(); }

// A small valid experiment; tests append lines to it (the next line is line 7).
const std::string kMinimal =
    "name: tiny\n"       // line 1
    "task:\n"            // line 2
    "  name: reverse\n"  // line 3
    "model:\n"           // line 4
    "  d_model: 32\n"    // line 5
    "  heads: 4\n";      // line 6

}  // namespace

// ---- the shipped experiment files ----------------------------------------------------------

TEST_CASE("config: every shipped synthetic experiment loads at each of its scales") {
  for (const std::string& task : kTasks) {
    const std::string path = kSynthetic + task + ".yaml";
    INFO("file: ", path);
    CHECK(scale_names(path) == std::vector<std::string>{"paper", "paper-lr", "smoke"});

    const Experiment base = load_experiment(path);
    CHECK(base.config.name() == task);
    CHECK(base.config.kind() == TaskKind::synthetic);
    CHECK(enum_name(synthetic(base.config).task.name) == task);
    CHECK(base.runs.size() == 6);

    const Experiment paper = load_experiment(path, "paper");
    CHECK(paper.runs.size() == 3 * 2 * 2 * 3 * 6 * 3);                              // d_model, layers, heads, length
    CHECK(load_experiment(path, "paper-lr").runs.size() == 2 * paper.runs.size());  // and lr
    const SyntheticConfig& c = synthetic(paper.config);
    CHECK(c.task.train_size == 50000);
    CHECK(c.task.val_size == 1000);
    CHECK(c.task.test_size == 10000);
    CHECK(c.optim.name == OptimName::adam);
    CHECK(c.optim.lr == 1e-3);
    CHECK(c.optim.clip == 5.0);
    CHECK(c.schedule.name == ScheduleName::cosine);
    CHECK(c.schedule.warmup > 0);
    CHECK(c.train.epochs == 2);
    CHECK(c.train.batch_size == 128);
    CHECK(c.model.norm == Norm::post);
    CHECK(c.model.activation == Activation::relu);
    CHECK(c.model.ffn_mult == 2.0);
    CHECK(c.model.dropout == 0.1);
    CHECK(c.model.head == HeadKind::mlp);
    CHECK(c.sweep.seeds == std::vector<int>{0, 1, 2});
    std::vector<std::string> variants;
    for (const nn::Variant& v : c.sweep.variants) variants.push_back(nn::variant_name(v));
    CHECK(variants == kSixVariants);
    std::set<int> d_models, lengths;
    for (const Run& r : paper.runs) {
      d_models.insert(synthetic(r.config).model.d_model);
      lengths.insert(synthetic(r.config).task.length);
    }
    CHECK(d_models == std::set<int>{32, 64, 256});
    CHECK(lengths == std::set<int>{16, 64, 128});

    const Experiment smoke = load_experiment(path, "smoke");
    REQUIRE(smoke.runs.size() == 12);  // six variants x seeds 0, 1 (seeds vary fastest)
    for (size_t i = 0; i < 12; ++i) {
      const Run& r = smoke.runs[i];
      CHECK(r.id == "d_model=64,heads=4,layers=2,length=16/" + kSixVariants[i / 2] + "/seed" + std::to_string(i % 2));
      const SyntheticConfig& rc = synthetic(r.config);
      CHECK(rc.task.train_size == 20000);
      CHECK(rc.task.val_size == 500);
      CHECK(rc.task.test_size == 2000);
      CHECK(rc.train.epochs == 2);
      CHECK(rc.model.d_model == 64);
      CHECK(rc.model.layers == 2);
      CHECK(rc.model.heads == 4);
      CHECK(rc.task.length == 16);
    }
  }
}

TEST_CASE("config: a sweep runs in a fixed order with stable ids") {
  const Experiment ex = load_experiment(kSynthetic + "swap.yaml", "paper-lr");
  REQUIRE(ex.runs.size() == 1296);
  // Keys sorted (model.d_model, model.heads, model.layers, optim.lr, task.length), the last one
  // fastest; then variants, then seeds.
  CHECK(ex.runs[0].id == "d_model=32,heads=2,layers=2,lr=1.0e-3,length=16/QKV/seed0");
  CHECK(ex.runs[1].id == "d_model=32,heads=2,layers=2,lr=1.0e-3,length=16/QKV/seed1");
  CHECK(ex.runs[3].id == "d_model=32,heads=2,layers=2,lr=1.0e-3,length=16/Q=K-V/seed0");
  CHECK(ex.runs[18].id == "d_model=32,heads=2,layers=2,lr=1.0e-3,length=64/QKV/seed0");
  CHECK(ex.runs[54].id == "d_model=32,heads=2,layers=2,lr=1.0e-4,length=16/QKV/seed0");
  CHECK(ex.runs[108].id == "d_model=32,heads=2,layers=4,lr=1.0e-3,length=16/QKV/seed0");
  CHECK(ex.runs.back().id == "d_model=256,heads=4,layers=4,lr=1.0e-4,length=128/(Q=K=V)+/seed2");
  std::set<std::string> ids;
  for (const Run& r : ex.runs) ids.insert(r.id);
  CHECK(ids.size() == 1296);

  const Run& last = ex.runs.back();
  const SyntheticConfig& lc = synthetic(last.config);
  CHECK(lc.model.d_model == 256);
  CHECK(lc.model.heads == 4);
  CHECK(lc.model.layers == 4);
  CHECK(lc.task.length == 128);
  CHECK(last.variant == nn::Variant{nn::Sharing::all, 0, true});
  CHECK(last.seed == 2);
  // A run's config holds its own variant and seed, so it expands to that run alone.
  CHECK(lc.sweep.variants == std::vector<nn::Variant>{last.variant});
  CHECK(lc.sweep.seeds == std::vector<int>{2});
  CHECK(ex.runs[3].variant == nn::Variant{nn::Sharing::qk_v, 0, false});
  CHECK(ex.runs[9].variant.sharing == nn::Sharing::q_kv);  // 4th variant
}

TEST_CASE("config: the suite lists the five tasks relative to itself") {
  const Suite suite = load_suite(kSynthetic + "suite.yaml");
  REQUIRE(suite.experiments.size() == 5);
  for (size_t i = 0; i < 5; ++i) {
    CHECK(fs::path(suite.experiments[i]).filename() == kTasks[i] + ".yaml");
    CHECK(fs::exists(suite.experiments[i]));
  }

  TempDir dir;
  dir.write("a.yaml", kMinimal);
  check_contains(error_of([&] { load_suite(dir.write("s1.yaml", "suite: [a.yaml, missing.yaml]\n")); }),
                 {"s1.yaml:1:", "missing.yaml", "no such file"});
  check_contains(error_of([&] { load_suite(dir.write("s2.yaml", "suit: [a.yaml]\n")); }),
                 {"s2.yaml:1:1", "unknown key 'suit'", "did you mean 'suite'"});
  check_contains(error_of([&] { load_suite(dir.write("s3.yaml", "suite: [a.yaml, a.yaml]\n")); }),
                 {"s3.yaml", "listed twice"});
}

// ---- strict parsing and its messages -----------------------------------------------------

TEST_CASE("config: missing keys take their defaults") {
  TempDir dir;
  const Experiment ex = load_experiment(dir.write("min.yaml", kMinimal));
  CHECK(ex.config.kind() == TaskKind::synthetic);  // task.kind left out
  const SyntheticConfig& c = synthetic(ex.config);
  CHECK(c.name == "tiny");
  CHECK(c.task.length == 16);
  CHECK(c.task.vocab == 10);
  CHECK(c.task.train_size == 50000);
  CHECK(c.model.d_model == 32);
  CHECK(c.model.layers == 2);
  CHECK(c.model.pos2d_channels == 10);
  CHECK(c.optim.beta2 == 0.999);
  CHECK(c.optim.eps == 1e-8);
  CHECK(c.optim.momentum == 0.9);
  CHECK(c.schedule.warmup == 0.05);
  CHECK(c.schedule.gamma == 0.1);
  CHECK(c.schedule.milestones.empty());
  CHECK(c.train.device == "cpu");
  CHECK(c.train.eval_batch_size == 512);
  CHECK(c.train.log_every == 50);
  CHECK(c.sweep.grid.empty());
  CHECK(c.sweep.variants == std::vector<nn::Variant>{nn::Variant{}});
  CHECK(c.sweep.seeds == std::vector<int>{0});
  REQUIRE(ex.runs.size() == 1);
  CHECK(ex.runs[0].id == "QKV/seed0");
}

TEST_CASE("config: unknown keys name file, line, the dotted key and the closest valid key") {
  TempDir dir;
  const std::string typo = dir.write("typo.yaml", kMinimal + "  d_modle: 64\n");
  check_contains(error_of([&] { load_experiment(typo); }),
                 {typo + ":7:3", "unknown key 'model.d_modle'", "did you mean 'model.d_model'?"});

  const std::string misplaced = dir.write("misplaced.yaml", kMinimal + "lr: 0.01\n");
  check_contains(error_of([&] { load_experiment(misplaced); }),
                 {misplaced + ":7:1", "unknown key 'lr'", "did you mean 'optim.lr'?"});

  const std::string wrong_section = dir.write("section.yaml", kMinimal + "  epochs: 3\n");
  check_contains(error_of([&] { load_experiment(wrong_section); }),
                 {wrong_section + ":7:3", "'model.epochs'", "did you mean 'train.epochs'?"});

  const std::string nothing_close = dir.write("far.yaml", kMinimal + "  zzzzzzzz: 1\n");
  const std::string far = error_of([&] { load_experiment(nothing_close); });
  check_contains(far, {nothing_close + ":7:3", "unknown key 'model.zzzzzzzz'", "valid keys here:", "d_model"});
  CHECK(far.find("did you mean") == std::string::npos);

  const std::string section_typo = dir.write("modle.yaml", kMinimal + "optimm:\n  lr: 0.1\n");
  check_contains(error_of([&] { load_experiment(section_typo); }),
                 {section_typo + ":7:1", "unknown key 'optimm'", "did you mean 'optim'?"});
}

TEST_CASE("config: bad values name file, line, key, value and the expected form") {
  TempDir dir;
  auto expect = [&](const std::string& name, const std::string& extra, std::initializer_list<std::string> parts) {
    const std::string path = dir.write(name, kMinimal + extra);
    const std::string message = error_of([&] { load_experiment(path); });
    check_contains(message, {path + ":"});
    check_contains(message, parts);
  };
  expect("type.yaml", "  layers: two\n", {":7:11", "model.layers: two is not valid", "expected integer in 1..10000"});
  expect("frac.yaml", "  layers: 2.5\n", {":7:11", "model.layers: 2.5", "expected integer in 1..10000"});
  expect("quoted.yaml", "  layers: \"2\"\n", {":7:11", "model.layers: '2'", "expected integer"});
  expect("range.yaml", "  dropout: 1.5\n", {":7:12", "model.dropout: 1.5", "expected number in [0.0, 1.0)"});
  expect("neg.yaml", "  pos2d_channels: -2\n", {":7:19", "model.pos2d_channels: -2", "expected integer in 2..4096"});
  expect("enum.yaml", "  activation: tanh\n", {":7:15", "model.activation: tanh", "expected one of relu|gelu"});
  expect("list.yaml", "  layers: [2, 4]\n", {"model.layers: [2, 4]", "expected integer in 1..10000", "sweep.grid"});
  expect("dup.yaml", "  d_model: 64\n", {":7:3", "duplicate key 'd_model'", ":5:3"});
  expect("lr.yaml", "optim:\n  lr: 0\n", {":8:7", "optim.lr: 0", "expected number > 0.0"});
  expect("dev.yaml", "train:\n  device: gpu\n", {":8:11", "train.device: gpu", "cpu, cuda or cuda:N"});
  expect("seeds.yaml", "sweep:\n  seeds: [0, 0]\n", {":8:10", "sweep.seeds: [0, 0]", "no repeats"});
  expect("seed.yaml", "sweep:\n  seeds: [0, x]\n", {":8:14", "sweep.seeds[1]: x is not valid", "expected integer"});
  expect("ms.yaml", "schedule:\n  name: multistep\n", {"schedule.milestones", "when schedule.name is multistep"});
  expect("ms2.yaml", "schedule:\n  milestones: [5, 3]\n", {":8:15", "schedule.milestones: [5, 3]", "increasing"});
  expect("section.yaml", "optim: 3\n", {":7:8", "optim: 3 is not valid", "expected a map"});
  expect("syntax.yaml", "train: [1, \n", {"YAML syntax error"});

  // Rules across keys point at the key that breaks them.
  const std::string swap = dir.write("swap.yaml", "name: s\ntask:\n  name: swap\n  length: 15\n");
  check_contains(error_of([&] { load_experiment(swap); }), {swap + ":4:11", "task.length: 15", "even integer"});
  const std::string div = dir.write("div.yaml", "name: d\ntask: {name: sort}\nmodel:\n  d_model: 30\n  heads: 4\n");
  check_contains(error_of([&] { load_experiment(div); }),
                 {div + ":5:10", "model.heads: 4", "divides model.d_model = 30"});
  const std::string minlr = dir.write("minlr.yaml", kMinimal + "schedule:\n  min_lr: 0.5\n");
  check_contains(error_of([&] { load_experiment(minlr); }), {minlr + ":8:11", "schedule.min_lr: 0.5", "<= optim.lr"});

  const std::string noname = dir.write("noname.yaml", "task:\n  name: copy\n");
  check_contains(error_of([&] { load_experiment(noname); }), {noname, "missing required key 'name'", "string"});
  const std::string kind = dir.write("kind.yaml", "name: x\ntask:\n  kind: vision\nmodel:\n  kind: encoder\n");
  check_contains(error_of([&] { load_experiment(kind); }),
                 {kind + ":5:9", "model.kind: encoder", "'vit' for task.kind vision"});
  const std::string family = dir.write("family.yaml", "name: x\ntask:\n  kind: images\n");
  check_contains(error_of([&] { load_experiment(family); }),
                 {family + ":3:9", "task.kind: images", "one of synthetic|vision|anomaly|lm"});
  const std::string notask = dir.write("notask.yaml", "name: x\ntask:\n  name: shuffle\n");
  check_contains(error_of([&] { load_experiment(notask); }),
                 {notask + ":3:9", "task.name", "one of reverse|sort|sub|swap|copy"});
  const std::string badname = dir.write("badname.yaml", "name: a/b\ntask: {name: copy}\n");
  check_contains(error_of([&] { load_experiment(badname); }), {badname + ":1:7", "name: a/b", "no '/'"});
}

TEST_CASE("config: sweep.variants are read once into typed variants and the keys they set are not keys") {
  TempDir dir;
  const std::string path = dir.write("v.yaml", kMinimal + "sweep:\n  variants: [qk, QVK]\n");
  check_contains(error_of([&] { load_experiment(path); }),
                 {path + ":8:18", "sweep.variants[1]: unknown variant 'QVK'", "accepted:", "Q=K-V (or qk)"});
  const Experiment ex = load_experiment(dir.write("v2.yaml", kMinimal + "sweep:\n  variants: [qk, kv, MQA, qv]\n"));
  REQUIRE(ex.runs.size() == 4);
  CHECK(ex.runs[0].id == "Q=K-V/seed0");
  CHECK(ex.runs[1].variant.sharing == nn::Sharing::q_kv);
  CHECK(ex.runs[2].variant.kv_heads == 1);
  CHECK(ex.runs[3].id == "Q=V-K/seed0");
  // The variant sets the attention's sharing, KV heads and 2D scores; as keys they are refused.
  for (const char* key : {"sharing: qk", "kv_heads: 2", "pos2d: true"}) {
    const std::string file = dir.write("sh.yaml", kMinimal + "  " + key + "\n");
    check_contains(error_of([&] { load_experiment(file); }),
                   {file + ":7:3", "is set by the variant", "sweep.variants"});
  }
  check_contains(error_of([&] { load_experiment(dir.write("seed.yaml", kMinimal + "train:\n  seed: 3\n")); }),
                 {"train.seed", "is set by the seed", "sweep.seeds"});
  check_contains(error_of([&] { load_experiment(dir.write("o.yaml", kMinimal), "", {"model.sharing=qk"}); }),
                 {"override 'model.sharing=qk'", "is set by the variant"});
}

// ---- overrides and scales -------------------------------------------------------------------

TEST_CASE("config: file < scale < command-line overrides") {
  TempDir dir;
  const std::string path = dir.write("p.yaml", kMinimal +
                                                   "scales:\n"
                                                   "  big:\n"
                                                   "    model.d_model: 128\n"
                                                   "    optim.lr: 0.01\n"
                                                   "    sweep.seeds: [3, 4]\n");
  CHECK(synthetic(load_experiment(path).config).model.d_model == 32);
  const Experiment scaled = load_experiment(path, "big");
  CHECK(synthetic(scaled.config).model.d_model == 128);
  CHECK(synthetic(scaled.config).optim.lr == 0.01);
  CHECK(scaled.runs.size() == 2);
  const Experiment over =
      load_experiment(path, "big", {"model.d_model=256", "train.device=cuda:0", "sweep.seeds=[0,1,2]"});
  CHECK(synthetic(over.config).model.d_model == 256);
  CHECK(synthetic(over.config).optim.lr == 0.01);  // from the scale, not overridden
  CHECK(synthetic(over.config).train.device == "cuda:0");
  CHECK(synthetic(over.config).sweep.seeds == std::vector<int>{0, 1, 2});
  CHECK(over.runs.size() == 3);
  // Later overrides win over earlier ones.
  CHECK(synthetic(load_experiment(path, "", {"model.layers=3", "model.layers=5"}).config).model.layers == 5);
  // A map value merges key by key; a grid key can be set on its own.
  const Experiment merged = load_experiment(path, "", {"model={layers: 6}", "sweep.grid.model.layers=[1,2]"});
  CHECK(synthetic(merged.config).model.d_model == 32);
  CHECK(synthetic(merged.config).model.layers == 6);
  REQUIRE(merged.runs.size() == 2);
  CHECK(merged.runs[1].id == "layers=2/QKV/seed0");
  CHECK(synthetic(merged.runs[1].config).model.layers == 2);
}

TEST_CASE("config: bad overrides and unknown scales name the argument, key and expected form") {
  TempDir dir;
  const std::string path = dir.write("o.yaml", kMinimal + "scales:\n  paper:\n    model.layers: 4\n  smoke: {}\n");
  check_contains(error_of([&] { load_experiment(path, "", {"model.d_model"}); }),
                 {"override 'model.d_model'", "key=value", "no '='"});
  check_contains(error_of([&] { load_experiment(path, "", {"=3"}); }), {"override '=3'", "key is empty"});
  check_contains(error_of([&] { load_experiment(path, "", {"model.dmodel=3"}); }),
                 {"override 'model.dmodel=3'", "unknown key 'model.dmodel'", "did you mean 'model.d_model'?"});
  check_contains(error_of([&] { load_experiment(path, "", {"model.d_model=big"}); }),
                 {"override 'model.d_model=big'", "model.d_model: big is not valid", "expected integer in 1..65536"});
  check_contains(error_of([&] { load_experiment(path, "", {"sweep.seeds=[0,1"}); }),
                 {"override 'sweep.seeds=[0,1'", "YAML syntax error"});
  check_contains(error_of([&] { load_experiment(path, "", {"sweep.grid.model.d_modl=[1]"}); }),
                 {"override 'sweep.grid.model.d_modl=[1]'", "did you mean 'sweep.grid.model.d_model'?"});
  check_contains(error_of([&] { load_experiment(path, "huge"); }),
                 {path, "unknown scale 'huge'", "defines: paper, smoke"});
  check_contains(error_of([&] { load_experiment(dir.write("ns.yaml", kMinimal), "paper"); }),
                 {"ns.yaml", "unknown scale 'paper'", "defines no scales"});

  // Keys of every scale are checked, chosen or not; values of the chosen one like any other.
  const std::string bad_scale =
      dir.write("bs.yaml", kMinimal + "scales:\n  a:\n    model.layers: 1\n  b:\n    model.layrs: 4\n");
  check_contains(error_of([&] { load_experiment(bad_scale, "a"); }),
                 {bad_scale + ":11:5", "unknown key 'model.layrs'", "did you mean 'model.layers'?"});
  const std::string bad_value = dir.write("bv.yaml", kMinimal + "scales:\n  a:\n    model.layers: 0\n");
  CHECK(synthetic(load_experiment(bad_value).config).model.layers == 2);
  check_contains(error_of([&] { load_experiment(bad_value, "a"); }),
                 {bad_value + ":9:19", "model.layers: 0", "expected integer in 1..10000"});
}

// ---- sweeps -----------------------------------------------------------------------------------

TEST_CASE("config: grid x variants x seeds, with ids safe as paths") {
  TempDir dir;
  const std::string path = dir.write("g.yaml", kMinimal +
                                                   "sweep:\n"
                                                   "  grid:\n"
                                                   "    train.device: [cpu, \"cuda:0\"]\n"
                                                   "    optim.lr: [1e-3, 0.01]\n"
                                                   "    model.kind: [encoder]\n"
                                                   "    task.data_seed: [3]\n"
                                                   "  variants: [QKV, GQA-2]\n"
                                                   "  seeds: [7]\n");
  const Experiment ex = load_experiment(path);
  REQUIRE(ex.runs.size() == 2 * 2 * 2);
  CHECK(ex.runs[0].id == "kind=encoder,lr=1e-3,data_seed=3,device=cpu/QKV/seed7");
  CHECK(ex.runs[1].id == "kind=encoder,lr=1e-3,data_seed=3,device=cpu/GQA-2/seed7");
  CHECK(ex.runs[2].id == "kind=encoder,lr=1e-3,data_seed=3,device=cuda_0/QKV/seed7");
  CHECK(ex.runs[7].id == "kind=encoder,lr=0.01,data_seed=3,device=cuda_0/GQA-2/seed7");
  CHECK(synthetic(ex.runs[2].config).train.device == "cuda:0");
  CHECK(synthetic(ex.runs[7].config).optim.lr == 0.01);
  CHECK(synthetic(ex.runs[7].config).task.data_seed == 3);
  CHECK(ex.runs[1].variant.kv_heads == 2);
  CHECK(ex.runs[0].variant.kv_heads == 0);
  CHECK(ex.runs[0].seed == 7);
  for (const Run& r : ex.runs) {
    for (const fs::path& part : fs::path(r.id)) CHECK(part.string().find_first_of(":/ ") == std::string::npos);
    CHECK(std::count(r.id.begin(), r.id.end(), '/') == 2);
  }
  const std::vector<std::pair<std::string, std::string>> point = {{"model.kind", "encoder"},
                                                                  {"optim.lr", "1e-3"},
                                                                  {"task.data_seed", "3"},
                                                                  {"train.device", "cpu"}};
  CHECK(ex.runs[0].point == point);

  // A run's own config expands to exactly that run.
  for (const Run& r : {ex.runs[0], ex.runs[7]}) {
    const std::vector<Run> again = expand(r.config);
    REQUIRE(again.size() == 1);
    CHECK(again[0].id == r.id);
    CHECK(again[0].config == r.config);
  }
  CHECK(expand(ex.config).size() == ex.runs.size());
  CHECK(sanitize_component("a/b c:d") == "a_b_c_d");
  CHECK(sanitize_component("..") == "__");
}

TEST_CASE("config: bad grids and failing runs point at the value that breaks them") {
  TempDir dir;
  auto expect = [&](const std::string& name, const std::string& sweep, std::initializer_list<std::string> parts) {
    const std::string path = dir.write(name, kMinimal + "sweep:\n" + sweep);
    const std::string message = error_of([&] { load_experiment(path); });
    check_contains(message, {path + ":"});
    check_contains(message, parts);
  };
  expect("g1.yaml", "  grid:\n    model.d_modle: [1]\n",
         {":9:5", "unknown key 'sweep.grid.model.d_modle'", "did you mean 'model.d_model'?"});
  expect("g2.yaml", "  grid:\n    model.d_model: [32, x]\n",
         {":9:25", "sweep.grid.model.d_model[1]: x is not valid", "expected integer in 1..65536"});
  expect("g3.yaml", "  grid:\n    model.d_model: 32\n",
         {":9:20", "sweep.grid.model.d_model: 32 is not valid", "expected a non-empty list of integer in 1..65536"});
  expect("g4.yaml", "  grid:\n    model.d_model: []\n", {"expected a non-empty list"});
  expect("g5.yaml", "  grid:\n    model.sharing: [QKV]\n", {":9:5", "is set by the variant", "sweep.variants"});
  expect("g6.yaml", "  grid:\n    train.seed: [1, 2]\n", {"is set by the seed", "sweep.seeds"});
  expect("g10.yaml", "  grid:\n    task.kind: [synthetic]\n", {":9:5", "cannot be swept", "task family"});
  expect("g7.yaml", "  grid:\n    model.d_model: [32, 32]\n", {"listed twice"});
  expect("g9.yaml", "  grid:\n    model.heads: [2, 4]\n  variants: [GQA-4]\n",
         {":10:14", "sweep.variants: GQA-4 is not valid here", "divide model.heads = 2",
          "in sweep run 'heads=2/GQA-4/seed0'"});
  // Each value is valid alone; the combination with the task is not.
  const std::string swap =
      dir.write("g8.yaml", "name: s\ntask:\n  name: swap\nsweep:\n  grid:\n    task.length: [16, 15]\n");
  check_contains(error_of([&] { load_experiment(swap); }),
                 {swap + ":6:23", "task.length: 15", "even integer", "in sweep run 'length=15/QKV/seed0'"});
}

TEST_CASE("config: to_yaml writes a config that loads back equal") {
  TempDir dir;
  const Experiment ex = load_experiment(kSynthetic + "reverse.yaml", "paper");
  for (const Config* c : {&ex.config, &ex.runs[5].config, &ex.runs.back().config}) {
    const std::string yaml = to_yaml(*c);
    CHECK(config_from_yaml(yaml) == *c);
    // And through a file, as config.yaml is read.
    const std::string path = dir.write("rt.yaml", yaml);
    CHECK(load_experiment(path).config == *c);
  }

  Config c = ex.config;
  SyntheticConfig& s = std::get<SyntheticConfig>(c.family);
  s.name = "123";
  s.model.activation = Activation::gelu;
  s.model.dropout = 0.123456789012345;
  s.optim.name = OptimName::adamw;
  s.optim.lr = 3e-4;
  s.optim.eps = 1e-12;
  s.schedule.name = ScheduleName::multistep;
  s.schedule.milestones = {1, 2};
  s.schedule.warmup_steps = 11;
  s.train.device = "cuda:1";
  s.sweep.variants = {nn::parse_variant("Q-GQA-2"), nn::parse_variant("(Q=K-V)+")};
  const std::string yaml = to_yaml(c);
  INFO(yaml);
  const Config back = config_from_yaml(yaml);
  CHECK(back == c);
  CHECK(synthetic(back).model.dropout == 0.123456789012345);
  CHECK(yaml.find("variants: [Q-GQA-2, (Q=K-V)+]") != std::string::npos);
  // Changing anything breaks equality: the comparison is not vacuous.
  Config other = back;
  std::get<SyntheticConfig>(other.family).sweep.grid[0].values[0] = Node::scalar("33");
  CHECK(!(other == c));
}

TEST_CASE("config: describe_schema lists every key of the family with type, default and doc") {
  const std::string text = describe_schema(TaskKind::synthetic);
  for (const KeyInfo& k : family_keys(TaskKind::synthetic)) {
    INFO("key: ", k.key);
    CHECK(text.find(k.key) != std::string::npos);
    if (!k.section) CHECK(text.find(k.doc) != std::string::npos);
  }
  check_contains(text, {"model.d_model", "integer in 1..65536", "default 64", "model.activation", "one of relu|gelu",
                        "default relu", "schedule.warmup", "number in [0.0, 1.0)", "default 0.05", "name",
                        "required  experiment name", "sweep.variants", "default [QKV]"});
  CHECK(text.find("train.steps") == std::string::npos);  // the language models' loop
  CHECK(find_key(TaskKind::synthetic, "model.d_model") != nullptr);
  CHECK(find_key(TaskKind::synthetic, "model") != nullptr);
  CHECK(find_key(TaskKind::synthetic, "model")->section);
  CHECK(find_key(TaskKind::synthetic, "model.d_modle") == nullptr);
}

TEST_CASE("config: override parsing and dotted keys") {
  const Override o = parse_override("model.sharing=Q=K-V");
  CHECK(o.key == "model.sharing");
  CHECK(o.value.text == "Q=K-V");
  const Override list = parse_override("sweep.variants=[QKV, (Q=K-V)+]");
  REQUIRE(list.value.is_sequence());
  CHECK(list.value.items.size() == 2);
  CHECK(list.value.items[1].text == "(Q=K-V)+");
  CHECK(split_key("sweep.grid.model.d_model") == std::vector<std::string>{"sweep", "grid", "model.d_model"});
  CHECK(split_key("model.d_model") == std::vector<std::string>{"model", "d_model"});
  CHECK(edit_distance("d_modle", "d_model") == 1);
  CHECK(edit_distance("abc", "") == 3);
  CHECK(closest_key("model.layrs", {"model.layers", "model.heads"}) == "model.layers");
  CHECK(closest_key("model.qqqq", {"model.layers", "model.heads"}).empty());
  // A path holding '=' (a run folder of Q-K=V) is a file, not an override.
  std::vector<std::string> files, overrides;
  split_arguments({"runs/lm/shakespeare/Q-K=V/seed0/config.yaml", "model.d_model=32", "sweep.variants=[Q-K=V]",
                   "train_x=1", "a.yaml", "=1", "Q-K=V.yaml"},
                  files, overrides);
  CHECK(files == std::vector<std::string>{"runs/lm/shakespeare/Q-K=V/seed0/config.yaml", "a.yaml", "=1", "Q-K=V.yaml"});
  CHECK(overrides == std::vector<std::string>{"model.d_model=32", "sweep.variants=[Q-K=V]", "train_x=1"});
}

// ---- run folders --------------------------------------------------------------------------------

TEST_CASE("config: RunDir writes config and meta, and detects complete runs") {
  TempDir dir;
  const Experiment ex = load_experiment(kSynthetic + "sort.yaml", "smoke");
  const Run& run = ex.runs[5];  // (Q=K-V)+, seed 1
  const RunDir rd(dir.path / "out", run);
  CHECK(rd.path() == dir.path / "out" / "sort" / "d_model=64,heads=4,layers=2,length=16" / "(Q=K-V)+" / "seed1");
  CHECK(!rd.complete());
  rd.start(run.config);
  REQUIRE(fs::exists(rd.path() / "config.yaml"));
  CHECK(load_experiment((rd.path() / "config.yaml").string()).config == run.config);
  const Run again = single_run(load_config_file((rd.path() / "config.yaml").string()), "config.yaml");
  CHECK(again.id == run.id);
  CHECK(again.variant == run.variant);
  check_contains(error_of([&] { single_run(ex.config, "sort.yaml"); }), {"sort.yaml", "describes 12 runs"});
  std::ifstream meta_in(rd.path() / "meta.json");
  const nlohmann::json meta = nlohmann::json::parse(meta_in);
  for (const char* key : {"qkvlab_version", "git_commit", "hostname", "cpu_model", "cores", "start_time"}) {
    INFO("meta key: ", key);
    CHECK(meta.contains(key));
  }
  CHECK(meta["qkvlab_version"] == QKV_VERSION);
  CHECK(meta["cores"].get<int>() >= 1);
  const std::string commit = meta["git_commit"];
  CHECK((commit == "unknown" || commit.size() == 40));
  CHECK(!rd.complete());  // started, not finished
  CHECK_THROWS_AS(rd.read_result(), IOError);

  // A damaged result (a crash of some other writer) does not count.
  std::ofstream(rd.path() / "result.json") << "{\"test_acc\": 0.9";
  CHECK(!rd.complete());
  std::ofstream(rd.path() / "result.json") << "[1, 2]";
  CHECK(!rd.complete());

  ResultRow row;
  row.experiment = "sort";
  row.kind = TaskKind::synthetic;
  row.task = "sort";
  row.run = run.id;
  row.variant = "(Q=K-V)+";
  row.seed = 1;
  row.metrics = ClassificationResult{0.875, 0.5, 0.9, 1, 10, 2.0, 5.0, 0.0, {{1, 0.7, 0.6, 0.9}}};
  rd.write_result(row);
  CHECK(rd.complete());
  CHECK(rd.read_result() == row);
  // A later process finds the same folder complete; the other runs are not.
  CHECK(RunDir(dir.path / "out", run).complete());
  CHECK(RunDir(dir.path / "out", "sort", run.id).complete());
  CHECK(!RunDir(dir.path / "out", ex.runs[3]).complete());
  for (const auto& entry : fs::directory_iterator(rd.path()))
    CHECK(entry.path().filename().string().find(".tmp") == std::string::npos);

  CHECK_THROWS_AS(RunDir(dir.path, "a/b", "x"), ValueError);
  CHECK_THROWS_AS(RunDir(dir.path, "a", "../x"), ValueError);
}
