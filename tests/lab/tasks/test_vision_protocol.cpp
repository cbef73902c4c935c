// The vision tasks as the study ran them: images resized (data.image_size) and padded
// (data.pad_to, model.pad_to_patch) in the loader before the ViT sees them, a patch that does not
// divide the padded size refused by key, the protocols end to end through run_vision, result rows
// with and without the new fields, and the shipped files' paper scales.
#include <doctest/doctest.h>

#include <cmath>
#include <set>

#include "lab/experiment/experiment.h"
#include "lab/experiment/models.h"
#include "lab/tasks/protocol.h"
#include "lab/tasks/vision.h"
#include "tests/train/data/image_helpers.h"
#include "train/data/image/image_resize.h"

using namespace qkv;
using namespace qkv::experiment;
using test::check_contains;

namespace {

const std::string kVision = std::string(QKV_SOURCE_DIR) + "/experiments/vision/";
const std::string kSynthetic = std::string(QKV_SOURCE_DIR) + "/experiments/synthetic/";

const VisionConfig& vision(const Config& c) { return c.as<VisionConfig>(); }

std::shared_ptr<data::MemoryImageDataset> rgb_images(int64_t n, int64_t side) {
  return test::make_dataset(
      n, side, side, 3, 10,
      [](int64_t i, int64_t y, int64_t x, int64_t c) { return (i * 53 + y * 29 + x * 7 + c * 91) % 256; },
      [](int64_t i) { return i % 10; });
}

std::vector<data::ImageBatch> one_epoch(std::shared_ptr<const data::ImageDataset> d, const data::LoaderOptions& o) {
  data::ImageLoader loader(std::move(d), o);
  return test::epoch_batches(loader, 0);
}

// A 28x28 MNIST in IDX files under root/mnist: `train` and `test` images, the label says which
// half of the image is bright.
void write_mnist(const std::filesystem::path& root, int64_t train, int64_t test) {
  for (const auto& [prefix, n] : {std::pair{"train", train}, std::pair{"t10k", test}}) {
    std::vector<uint8_t> px(size_t(n * 28 * 28)), labels(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      labels[size_t(i)] = uint8_t(i % 2);
      for (int64_t y = 0; y < 28; ++y)
        for (int64_t x = 0; x < 28; ++x)
          px[size_t((i * 28 + y) * 28 + x)] = uint8_t((y < 14) == (i % 2 == 0) ? 200 : 20);
    }
    test::write_file(root / "mnist" / cat(prefix, "-images-idx3-ubyte"),
                     test::idx_file(0x803, {uint32_t(n), 28, 28}, px));
    test::write_file(root / "mnist" / cat(prefix, "-labels-idx1-ubyte"), test::idx_file(0x801, {uint32_t(n)}, labels));
  }
}

}  // namespace

TEST_CASE("vision protocol: data.image_size resizes in the loader, before normalisation") {
  const auto data = rgb_images(3, 4);
  data::LoaderOptions o;
  o.batch_size = 3, o.shuffle = false, o.workers = 2, o.image_size = 8;
  o.mean = {0.5f, 0.4f, 0.3f}, o.std = {0.2f, 0.25f, 0.3f};
  data::ImageLoader loader(data, o);
  CHECK((loader.height() == 8 && loader.width() == 8));
  const std::vector<data::ImageBatch> batches = test::epoch_batches(loader, 0);
  REQUIRE(batches.size() == 1);
  REQUIRE(batches[0].images.shape() == Shape{3, 3, 8, 8});
  const std::vector<float> got = batches[0].images.to_vector<float>();
  int64_t mismatches = 0;
  for (int64_t i = 0; i < 3; ++i) {
    std::vector<uint8_t> resized(8 * 8 * 3);
    data::resize_bilinear(test::pixels_of(*data, i).data(), 4, 4, 3, 8, 8, resized.data());
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t p = 0; p < 64; ++p) {
        const float want = (float(resized[size_t(p * 3 + c)]) / 255.0f - o.mean[size_t(c)]) / o.std[size_t(c)];
        mismatches += got[size_t((i * 3 + c) * 64 + p)] != want;
      }
  }
  CHECK(mismatches == 0);
  // Random crops stay inside the resized size.
  o.crop_padding = 2;
  CHECK(one_epoch(data, o)[0].images.shape() == Shape{3, 3, 8, 8});
}

TEST_CASE("vision protocol: 32x32 padded to 35x35 gives patch 7 its 25 patches, and patch 4 keeps 32") {
  const Experiment e = load_experiment(kVision + "cifar10.yaml", "", {"model.patch=7", "model.d_model=16"});
  const VisionConfig& c = vision(e.config);
  CHECK(c.model.pad_to_patch);
  const ImageGeometry g = vision_geometry(c, 32, 32);
  CHECK((g.height == 32 && g.padded_height == 35 && g.padded_width == 35));
  const ImageGeometry g4 = vision_geometry(vision(load_experiment(kVision + "cifar10.yaml").config), 32, 32);
  CHECK((g4.padded_height == 32 && g4.padded_width == 32));
  // data.pad_to says the same explicitly.
  const ImageGeometry explicit_pad =
      vision_geometry(vision(load_experiment(kVision + "cifar10.yaml", "",
                                             {"model.patch=7", "model.pad_to_patch=false", "data.pad_to=35"})
                                 .config),
                      32, 32);
  CHECK((explicit_pad.padded_height == 35 && explicit_pad.padded_width == 35));

  // The loader pads at the right and bottom with 0 after normalisation; the image is unchanged.
  const auto images = rgb_images(2, 32);
  data::LoaderOptions o;
  o.batch_size = 2, o.shuffle = false, o.workers = 0, o.mean = {0.5f, 0.5f, 0.5f}, o.std = {0.25f, 0.25f, 0.25f};
  const std::vector<float> plain = one_epoch(images, o)[0].images.to_vector<float>();
  o.pad_height = o.pad_width = g.padded_height;
  const data::ImageBatch padded = one_epoch(images, o)[0];
  REQUIRE(padded.images.shape() == Shape{2, 3, 35, 35});
  const std::vector<float> p = padded.images.to_vector<float>();
  int64_t image_mismatches = 0, nonzero_border = 0;
  for (int64_t plane = 0; plane < 6; ++plane)
    for (int64_t y = 0; y < 35; ++y)
      for (int64_t x = 0; x < 35; ++x) {
        const float v = p[size_t((plane * 35 + y) * 35 + x)];
        if (y < 32 && x < 32) image_mismatches += v != plain[size_t((plane * 32 + y) * 32 + x)];
        else nonzero_border += v != 0.0f;
      }
  CHECK(image_mismatches == 0);
  CHECK(nonzero_border == 0);

  Generator gen(1);
  nn::ViT vit(vit_config(c, e.runs[0].variant, g.padded_height, g.padded_width, 3, 10), &gen);
  CHECK(vit.config().patches() == 25);
  CHECK(vit.pos_embed.size(1) == 26);  // the class token and 25 patches
  CHECK(vit.forward(padded.images).shape() == Shape{2, 10});
}

TEST_CASE(
    "vision protocol: a patch that does not divide the padded images is refused naming model.patch and the size") {
  const std::string cifar = kVision + "cifar10.yaml";
  auto config_error = [&](std::vector<std::string> overrides) {
    return test::error_of<ConfigError>([&] { load_experiment(cifar, "", overrides); });
  };
  check_contains(config_error({"model.patch=7", "model.pad_to_patch=false"}),
                 {"model.patch: 7", "32x32 images of cifar10", "model.pad_to_patch"});
  check_contains(config_error({"model.patch=7", "model.pad_to_patch=false", "data.pad_to=34"}),
                 {"model.patch: 7", "padded to 34x34"});
  check_contains(config_error({"data.pad_to=30"}), {"data.pad_to: 30", "32x32 images of cifar10"});
  check_contains(config_error({"data.image_size=30", "model.pad_to_patch=false"}),
                 {"model.patch: 4", "30x30 images of cifar10"});
  // And in a sweep, naming the run.
  check_contains(config_error({"model.pad_to_patch=false", "sweep.grid.model.patch=[4, 7]"}),
                 {"model.patch: 7", "32x32", "patch=7"});
  // At run time, for images of a size the dataset's name does not promise.
  const VisionConfig c = vision(load_experiment(kVision + "mnist.yaml").config);
  check_contains(test::error_of<ValueError>([&] { vision_geometry(c, 30, 30); }),
                 {"model.patch: 7", "30x30 images of mnist"});
}

TEST_CASE("vision protocol: run_vision trains all_last on every training image and holdout_best on the rest") {
  test::TempDir root;
  write_mnist(root.path, 96, 32);
  const std::vector<std::string> small = {cat("data.root=", root.path.string()),
                                          "data.workers=0",
                                          "data.image_size=14",
                                          "model.d_model=16",
                                          "model.heads=2",
                                          "model.layers=1",
                                          "train.batch_size=32",
                                          "train.eval_batch_size=32",
                                          "sweep.variants=[QKV]"};
  auto run = [&](std::vector<std::string> overrides) {
    overrides.insert(overrides.end(), small.begin(), small.end());
    const Experiment e = load_experiment(kVision + "mnist.yaml", "smoke", overrides);
    REQUIRE(e.runs.size() == 1);
    RunDir dir(root.path / "runs", e.runs[0]);
    dir.start(e.runs[0].config);
    const ResultRow row = tasks::run_vision(e.runs[0], dir);
    CHECK(dir.read_result().classification()->validations == row.classification()->validations);
    return std::pair{row, loops::read_metrics(dir.path() / "metrics.jsonl")};
  };

  const auto [last, last_records] = run({"train.epochs=2"});
  const ClassificationResult& l = *last.classification();
  CHECK(last.images->train_examples == 96);  // no holdout
  CHECK(l.protocol == Protocol::all_last);
  CHECK(l.steps == 6);
  CHECK(l.best_epoch == 2);
  CHECK(std::isnan(l.best_val_accuracy));
  CHECK(l.validations.empty());
  CHECK(loops::records_of<loops::ValRecord>(last_records).empty());
  // data.image_size reached the model: 14x14 images in 7x7 patches.
  const Experiment resized = load_experiment(kVision + "mnist.yaml", "smoke", small);
  const VisionConfig& vc = vision(resized.config);
  Generator gen(0);
  CHECK(last.params == nn::ViT(vit_config(vc, nn::Variant{}, 14, 14, 1, 10), &gen).num_parameters());
  CHECK(last.params != nn::ViT(vit_config(vc, nn::Variant{}, 28, 28, 1, 10), &gen).num_parameters());

  const auto [best, best_records] =
      run({"train.epochs=1", "train.protocol=holdout_best", "data.holdout=32", "train.evals_per_epoch=2"});
  const ClassificationResult& b = *best.classification();
  CHECK(best.images->train_examples == 64);
  CHECK(b.protocol == Protocol::holdout_best);
  REQUIRE(b.validations.size() == 2);
  CHECK(b.validations[0].epoch == 0.5);
  CHECK(loops::records_of<loops::ValRecord>(best_records) == b.validations);
  CHECK(std::isfinite(b.best_val_accuracy));
}

TEST_CASE("vision protocol: result rows without the protocol fields read as holdout_best and new rows round-trip") {
  nlohmann::json old = {
      {"experiment", "e"},
      {"kind", "synthetic"},
      {"task", "reverse"},
      {"run", "QKV/seed0"},
      {"variant", "QKV"},
      {"seed", 0},
      {"point", nlohmann::json::object()},
      {"params", 10},
      {"test_accuracy", 0.5},
      {"test_loss", 1.0},
      {"best_val_accuracy", 0.5},
      {"best_epoch", 1},
      {"steps", 4},
      {"seconds", 1.0},
      {"steps_per_second", 4.0},
      {"data_wait_fraction", 0.0},
      {"epochs", {{{"record", "epoch"}, {"epoch", 1}, {"train_loss", 1.0}, {"val_loss", 1.0}, {"val_accuracy", 0.5}}}}};
  const ResultRow row = result_from_json(old, "old.json");
  const ClassificationResult& c = *row.classification();
  CHECK(c.protocol == Protocol::holdout_best);
  CHECK(c.tested_epoch == 1.0);
  CHECK(c.validations.empty());

  ResultRow now = row;
  ClassificationResult& n = std::get<ClassificationResult>(now.metrics);
  n.protocol = Protocol::all_last;
  n.tested_epoch = 1.5;
  n.validations = {loops::ValRecord{0.5, 2, 1.1, 0.4}, loops::ValRecord{1.0, 4, 1.0, 0.5}};
  const ResultRow back = result_from_json(nlohmann::json::parse(to_json(now).dump()), "new.json");
  CHECK(back == now);
  nlohmann::json bad = to_json(now);
  bad["protocol"] = "best";
  check_contains(test::error_of<IOError>([&] { result_from_json(bad, "bad.json"); }),
                 {"bad.json", "field 'protocol'", "holdout_best"});
  bad = to_json(now);
  bad["validations"][1]["epoch"] = 0.25;
  check_contains(test::error_of<IOError>([&] { result_from_json(bad, "bad.json"); }), {"validations[1]", "'epoch'"});
}

TEST_CASE("vision protocol: the paper scales run the re-runs' vision protocol and the predecessor's synthetic one") {
  for (const char* file : {"mnist.yaml", "fashion-mnist.yaml", "cifar10.yaml", "cifar100.yaml", "tinyimagenet.yaml"}) {
    CAPTURE(file);
    const Experiment e = load_experiment(kVision + file, "paper");
    std::set<int> patches;
    int64_t off_protocol = 0;  // runs that differ from the re-runs' protocol
    for (const Run& r : e.runs) {
      const VisionConfig& c = vision(r.config);
      const int64_t side = native_image_side(c.data.dataset);
      const ImageGeometry g = vision_geometry(c, side, side);
      const bool cifar = c.data.dataset == DatasetName::cifar10 || c.data.dataset == DatasetName::cifar100;
      off_protocol += c.train.protocol != Protocol::all_last || c.model.dropout != 0.1 ||
                      c.schedule.name != ScheduleName::multistep ||
                      c.schedule.milestones != std::vector<int>{c.train.epochs / 2, c.train.epochs * 3 / 4} ||
                      (cifar && g.padded_height != (c.model.patch == 7 ? 35 : 32));
      patches.insert(c.model.patch);
    }
    CHECK(off_protocol == 0);
    if (std::string(file) != "tinyimagenet.yaml") {
      CHECK(patches == std::set<int>{4, 7});
      CHECK(e.runs.size() == 48 * 6 * 2);
    }
  }
  const Experiment tiny = load_experiment(kVision + "tinyimagenet.yaml", "paper");
  const VisionConfig& t = vision(tiny.config);
  const ImageGeometry g = vision_geometry(t, 64, 64);
  CHECK((g.padded_height / t.model.patch) * (g.padded_width / t.model.patch) + 1 == 197);  // tokens
  CHECK((t.model.d_model == 768 && t.model.layers == 12 && t.model.heads == 12));
  CHECK((t.optim.lr == 1e-4 && t.train.batch_size == 32 && t.train.epochs == 30));
  CHECK(tiny.runs.size() == 3 * 2);
  CHECK(scale_names(kVision + "tinyimagenet.yaml") == std::vector<std::string>{"paper", "cpu", "smoke"});

  for (const char* task : {"reverse", "sort", "sub", "swap", "copy"}) {
    CAPTURE(task);
    const Experiment e = load_experiment(kSynthetic + task + ".yaml", "paper");
    std::set<double> lrs;
    int64_t off_protocol = 0;
    for (const Run& r : e.runs) {
      const SyntheticConfig& c = r.config.as<SyntheticConfig>();
      off_protocol += c.schedule.warmup_steps != 5 || c.train.evals_per_epoch != 4 ||
                      c.train.protocol != Protocol::holdout_best ||
                      c.task.data_seed != e.config.as<SyntheticConfig>().task.data_seed;  // one data seed for all
      lrs.insert(c.optim.lr);
    }
    CHECK(off_protocol == 0);
    CHECK(lrs == std::set<double>{1e-3});  // paper Sec. 4.1: every run at 1e-3
    std::set<double> opt_in;
    for (const Run& r : load_experiment(kSynthetic + task + ".yaml", "paper-lr").runs)
      opt_in.insert(r.config.as<SyntheticConfig>().optim.lr);
    CHECK(opt_in == std::set<double>{1e-3, 1e-4});
  }
}

TEST_CASE("vision protocol: anomaly follows the re-runs' stated values, and the template scale its budget") {
  const Experiment paper = load_experiment(kVision + "anomaly.yaml", "paper");
  const AnomalyConfig& a = paper.config.as<AnomalyConfig>();
  CHECK((a.optim.clip == 5.0 && a.schedule.name == ScheduleName::constant && a.train.protocol == Protocol::all_last));
  CHECK((!a.data.standardize && !a.data.resample && a.data.train_sets == 10000 && a.train.epochs == 20));
  check_contains(tasks::protocol_summary(paper.config),
                 {"20 epochs, batch 128, adam lr 0.001, constant schedule, clip 5",
                  "the weights after the last epoch tested (the test split monitored every epoch)",
                  "sets: 10000 training (drawn once), 2000 test", "features as the encoder gives them"});
  CHECK(paper.runs.size() == 4 * 6 * 2);

  const Experiment t = load_experiment(kVision + "anomaly.yaml", "template");
  const AnomalyConfig& c = t.config.as<AnomalyConfig>();
  CHECK((c.model.d_model == 256 && c.model.heads == 4 && c.model.layers == 4));
  CHECK((c.model.dropout == 0.1 && c.model.input_dropout == 0.1 && c.optim.lr == 5e-4 && c.optim.clip == 2.0));
  CHECK((c.schedule.name == ScheduleName::cosine && c.schedule.warmup_steps == 100 && c.train.epochs == 100));
  CHECK((c.data.train_sets == 45000 && c.data.resample && c.data.val_sets == 5000 && c.data.test_sets == 10000));
  check_contains(tasks::protocol_summary(t.config),
                 {"100 epochs", "adam lr 0.0005, cosine after 100 warmup steps schedule, clip 2",
                  "the best of 1 validation(s) per epoch tested",
                  "sets: 45000 training (drawn anew every epoch), 5000 validation, 10000 test", "input dropout 0.1"});
  CHECK(nn::SetTransformer(experiment::set_transformer_config(c, t.runs[0].variant, 512)).input_dropout.p == 0.1);

  // The synthetic paper scale trains at 1e-3; TinyImageNet at paper scale in the re-runs' mixed precision.
  check_contains(tasks::protocol_summary(load_experiment(kSynthetic + "copy.yaml", "paper").config),
                 {"adam lr 0.001", "cosine after 5 warmup steps", "the best of 4 validation(s) per epoch tested"});
  check_contains(tasks::protocol_summary(load_experiment(kVision + "tinyimagenet.yaml", "paper").config),
                 {"multistep (x0.1 at epochs 15, 22)", "precision fp16"});
}
