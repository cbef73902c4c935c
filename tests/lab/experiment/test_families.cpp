// The task families of the experiment files (lab/experiment/families.h): task.kind selects the
// schema the whole file is parsed with; every shipped file loads into its family; a key of
// another family is refused naming the family it belongs to, in a file, a scale, an override or
// a grid; each family's own rules name the key that breaks them.
#include <doctest/doctest.h>

#include "lab/experiment/experiment.h"
#include "lab/experiment/models.h"
#include "lab/tasks/run_task.h"
#include "tests/support/error_checks.h"
#include "tests/support/test_support.h"

using namespace qkv;
using namespace qkv::experiment;
using test::check_contains;
using test::TempDir;

namespace {

const std::string kExperiments = std::string(QKV_SOURCE_DIR) + "/experiments/";

std::string error_of(const std::function<void()>& f) { return test::error_of<ConfigError>(f); }

// A minimal valid file of each family; tests append lines (the next line is line 5).
const std::string kVision = "name: v\ntask:\n  kind: vision\ndata:\n";
const std::string kAnomaly = "name: a\ntask:\n  kind: anomaly\ndata:\n";
const std::string kLm = "name: l\ntask:\n  kind: lm\nlm:\n  text: [t.txt]\noptim:\n  name: adamw\n";

}  // namespace

TEST_CASE("families: every shipped experiment file loads into the family its task.kind names") {
  const std::vector<std::pair<std::string, TaskKind>> files = {{"synthetic/reverse.yaml", TaskKind::synthetic},
                                                               {"synthetic/copy.yaml", TaskKind::synthetic},
                                                               {"vision/mnist.yaml", TaskKind::vision},
                                                               {"vision/fashion-mnist.yaml", TaskKind::vision},
                                                               {"vision/cifar10.yaml", TaskKind::vision},
                                                               {"vision/cifar100.yaml", TaskKind::vision},
                                                               {"vision/tinyimagenet.yaml", TaskKind::vision},
                                                               {"vision/anomaly.yaml", TaskKind::anomaly},
                                                               {"lm/shakespeare.yaml", TaskKind::lm},
                                                               {"lm/gpt-300m.yaml", TaskKind::lm},
                                                               {"lm/gpt-1.2b.yaml", TaskKind::lm},
                                                               {"lm/convert.yaml", TaskKind::lm}};
  for (const auto& [file, kind] : files) {
    CAPTURE(file);
    const std::string path = kExperiments + file;
    for (const std::string& scale : scale_names(path)) {
      CAPTURE(scale);
      const Experiment e = load_experiment(path, scale);
      CHECK(e.config.kind() == kind);
      CHECK(!e.runs.empty());
      for (const Run& r : e.runs) CHECK(r.config.kind() == kind);
    }
  }
  const Experiment gpt = load_experiment(kExperiments + "lm/gpt-300m.yaml");
  const LmConfig& lm = gpt.config.as<LmConfig>();
  CHECK(lm.model.d_model == 1024);
  CHECK(lm.train.grad_accum == 192);
  CHECK(lm.schedule.warmup_steps == 500);
  const Experiment sets = load_experiment(kExperiments + "vision/anomaly.yaml");
  const AnomalyConfig& anomaly = sets.config.as<AnomalyConfig>();
  CHECK(anomaly.data.set_size == 10);
  CHECK(anomaly.model.kind == "set_transformer");
  const Experiment images = load_experiment(kExperiments + "vision/mnist.yaml");
  const VisionConfig& mnist = images.config.as<VisionConfig>();
  CHECK(mnist.data.dataset == DatasetName::mnist);
  CHECK(mnist.schedule.milestones == std::vector<int>{10, 15});
  CHECK_THROWS_WITH_AS(images.config.as<LmConfig>(), doctest::Contains("is a vision experiment"), ValueError);
}

TEST_CASE("families: a key of another family is refused, naming the families it belongs to") {
  TempDir dir;
  auto expect = [&](const std::string& name, const std::string& text, std::initializer_list<std::string> parts) {
    const std::string path = dir.write(name, text);
    const std::string message = error_of([&] { load_experiment(path); });
    check_contains(message, {path + ":"});
    check_contains(message, parts);
  };
  expect("lm_epochs.yaml", kLm + "train:\n  epochs: 3\n",
         {":9:3", "train.epochs is not a setting of lm experiments (task.kind: lm)",
          "belongs to synthetic, vision, anomaly experiments"});
  expect("lm_milestones.yaml", kLm + "schedule:\n  milestones: [2]\n",
         {"schedule.milestones is not a setting of lm experiments", "synthetic, vision, anomaly"});
  expect("syn_lm.yaml", "name: s\nlm:\n  text: [a.txt]\n",
         {":2:1", "lm is not a setting of synthetic experiments", "lm"});
  expect("syn_root.yaml", "name: s\ndata:\n  root: x\n",
         {"data is not a setting of synthetic experiments", "belongs to vision, anomaly, lm experiments"});
  expect("syn_steps.yaml", "name: s\ntrain:\n  steps: 10\n", {"train.steps", "belongs to lm experiments"});
  expect("vis_norm.yaml", kVision + "  root: d\nmodel:\n  norm: pre\n",
         {":7:3", "model.norm is not a setting of vision experiments", "belongs to synthetic experiments"});
  expect("vis_sets.yaml", kVision + "  set_size: 5\n", {":5:3", "data.set_size", "belongs to anomaly experiments"});
  expect("ano_workers.yaml", kAnomaly + "  workers: 4\n", {":5:3", "data.workers", "belongs to vision experiments"});
  expect("ano_limit.yaml", kAnomaly + "  train_limit: 100\n", {"data.train_limit", "belongs to vision experiments"});
  expect("lm_head.yaml", kLm + "model:\n  head: mlp\n",
         {"model.head is not a setting of lm experiments", "belongs to synthetic experiments"});

  // The same in a scale (chosen or not), an override and a grid.
  const std::string lm = kExperiments + "lm/shakespeare.yaml";
  check_contains(error_of([&] { load_experiment(lm, "", {"train.epochs=3"}); }),
                 {"override 'train.epochs=3'", "not a setting of lm experiments", "synthetic, vision, anomaly"});
  check_contains(error_of([&] { load_experiment(lm, "", {"sweep.grid.train.epochs=[1,2]"}); }),
                 {"sweep.grid.train.epochs", "not a setting of lm experiments"});
  const std::string scaled = dir.write("scale.yaml", kLm + "scales:\n  quick:\n    train.epochs: 1\n");
  check_contains(error_of([&] { load_experiment(scaled); }), {scaled + ":10:5", "train.epochs", "not a setting of lm"});
  const std::string grid = dir.write("grid.yaml", kVision + "sweep:\n  grid:\n    model.head: [mlp]\n");
  check_contains(error_of([&] { load_experiment(grid); }),
                 {grid + ":7:5", "sweep.grid.model.head", "not a setting of vision experiments", "synthetic"});
  // A typo is still a typo, with a suggestion from the family's own keys.
  check_contains(error_of([&] { load_experiment(dir.write("typo.yaml", kLm + "train:\n  stesp: 3\n")); }),
                 {"unknown key 'train.stesp'", "did you mean 'train.steps'?"});
}

TEST_CASE("families: each family's rules name the key that breaks them") {
  TempDir dir;
  const std::string lm = kExperiments + "lm/shakespeare.yaml";
  check_contains(error_of([&] { load_experiment(lm, "", {"optim.name=adam"}); }),
                 {"optim.name", "adamw for task.kind lm"});
  // No data at all is an imported model's config; training it stops at the input check, before
  // anything trains (lab/tasks/run_task.h).
  const Experiment no_data = load_experiment(lm, "", {"lm.text=[]"});
  check_contains(test::error_of<IOError>([&] { tasks::check_inputs(no_data.config); }),
                 {"lm.text and lm.tokens are both empty", "no data of its own"});
  check_contains(error_of([&] { load_experiment(lm, "", {"lm.tokens=prepared"}); }),
                 {"lm.tokens", "empty when lm.text"});
  check_contains(error_of([&] { load_experiment(lm, "", {"sweep.variants=[(Q=K=V)+]"}); }),
                 {"sweep.variants: (Q=K=V)+ is not valid here", "non-causal"});
  check_contains(error_of([&] { load_experiment(lm, "", {"schedule.warmup_steps=500"}); }),
                 {"schedule.warmup_steps", "fewer than train.steps"});
  check_contains(error_of([&] { load_experiment(lm, "", {"schedule.name=multistep"}); }),
                 {"schedule.name: multistep is not valid", "cosine or constant"});
  check_contains(error_of([&] { load_experiment(lm, "", {"sweep.variants=[GQA-3]"}); }),
                 {"GQA-3 is not valid here", "KV heads must divide model.heads = 4"});
  const std::string features = dir.write("f.yaml", kAnomaly + "  features: file\n");
  check_contains(error_of([&] { load_experiment(features); }), {"data.features_file", "when data.features is file"});
  const std::string patch = dir.write("p.yaml", kVision + "model:\n  kind: vit\n  d_model: 30\n  heads: 4\n");
  check_contains(error_of([&] { load_experiment(patch); }),
                 {patch + ":8:10", "model.heads: 4", "divides model.d_model"});
}

TEST_CASE("families: describe_schema lists a family's own keys and no other's") {
  const std::string lm = describe_schema(TaskKind::lm);
  check_contains(lm,
                 {"Keys of lm experiments", "train.steps", "lm.sampling", "schedule.warmup_steps", "model.context"});
  for (const char* other : {"train.epochs", "schedule.milestones", "model.norm", "data.dataset"}) {
    CAPTURE(other);
    CHECK(lm.find(other) == std::string::npos);
  }
  const std::string vision = describe_schema(TaskKind::vision);
  check_contains(vision, {"data.crop_padding", "model.patch", "train.epochs", "schedule.warmup_steps"});
  CHECK(vision.find("data.set_size") == std::string::npos);
  CHECK(describe_schema(TaskKind::anomaly).find("data.set_size") != std::string::npos);
  // Every leaf key of every family has a doc line.
  for (TaskKind k : {TaskKind::synthetic, TaskKind::vision, TaskKind::anomaly, TaskKind::lm})
    for (const KeyInfo& key : family_keys(k)) {
      CAPTURE(key.key);
      CHECK(!key.doc.empty());
    }
}

TEST_CASE("families: model.init_from and the convert section of lm experiments, their defaults and refusals") {
  TempDir dir;
  const Experiment plain = load_experiment(dir.write("plain.yaml", kLm));
  const LmConfig& c = plain.config.as<LmConfig>();
  CHECK(c.model.init_from.empty());
  CHECK(c.convert.methods ==
        std::vector<ConvertMethod>{ConvertMethod::copy_k, ConvertMethod::average, ConvertMethod::svd});
  CHECK(c.convert.finetune_steps == 100);
  const Experiment set = load_experiment(dir.write("set.yaml", kLm + "model:\n  init_from: runs/x\n"), "",
                                         {"convert.methods=[svd]", "convert.finetune_steps=17"});
  CHECK(set.config.as<LmConfig>().model.init_from == "runs/x");
  CHECK(set.config.as<LmConfig>().convert.methods == std::vector<ConvertMethod>{ConvertMethod::svd});
  CHECK(set.config.as<LmConfig>().convert.finetune_steps == 17);
  const std::string lm = dir.write("lm.yaml", kLm);
  check_contains(error_of([&] { load_experiment(lm, "", {"convert.methods=[svd, pca]"}); }),
                 {"convert.methods[1]", "pca", "copy-k|average|svd"});
  check_contains(error_of([&] { load_experiment(lm, "", {"convert.methods=[svd, svd]"}); }),
                 {"convert.methods", "each method listed once"});
  check_contains(error_of([&] { load_experiment(lm, "", {"convert.methods=[]"}); }), {"convert.methods", "non-empty"});
  check_contains(error_of([&] { load_experiment(lm, "", {"convert.finetune_warmup_steps=100"}); }),
                 {"convert.finetune_warmup_steps", "fewer than convert.finetune_steps = 100"});
  check_contains(error_of([&] { load_experiment(lm, "", {"model.init_from=[a]"}); }), {"model.init_from", "string"});
  // Keys of the language models only.
  check_contains(error_of([&] { load_experiment(dir.write("s.yaml", "name: s\nmodel:\n  init_from: x\n")); }),
                 {"model.init_from", "lm"});
  check_contains(describe_schema(TaskKind::lm), {"model.init_from", "convert.methods", "convert.finetune_steps"});
}

TEST_CASE("families: model.activation of a GPT is exact GELU by default, gelu_tanh (GPT-2's gelu_new) on request") {
  const auto plain = load_experiment(kExperiments + "lm/shakespeare.yaml");
  CHECK(plain.config.as<LmConfig>().model.activation == Activation::gelu);
  CHECK(gpt_config(plain.config.as<LmConfig>(), plain.runs[0].variant).activation == nn::Activation::gelu);
  const auto tanh_form = load_experiment(kExperiments + "lm/shakespeare.yaml", "", {"model.activation=gelu_tanh"});
  CHECK(gpt_config(tanh_form.config.as<LmConfig>(), tanh_form.runs[0].variant).activation == nn::Activation::gelu_tanh);
  check_contains(error_of(
                     [&] { load_experiment(kExperiments + "lm/shakespeare.yaml", "", {"model.activation=swish"}); }),
                 {"model.activation", "swish", "gelu_tanh"});
}
