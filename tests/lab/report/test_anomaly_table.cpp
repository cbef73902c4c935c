// Table 2's anomaly cells that did not run as the paper (ImageNet-pretrained ResNet34, sets of
// CIFAR-100 images resized to 224 px) are marked, with a footnote per mark and a CSV column; the
// result row records the image size and the weights (absent in older rows, which still read).
#include <doctest/doctest.h>

#include "lab/experiment/result.h"
#include "lab/report/table.h"
#include "tests/support/error_checks.h"

using namespace qkv;
using namespace qkv::experiment;

namespace {

ResultRow row(const std::string& task, const std::string& variant, double accuracy, int seed) {
  ResultRow r;
  r.experiment = task;
  r.kind = task == "anomaly" ? TaskKind::anomaly : TaskKind::vision;
  r.task = task;
  r.run = variant + "/seed" + std::to_string(seed);
  r.variant = variant;
  r.seed = seed;
  ClassificationResult c;
  c.test_accuracy = accuracy;
  c.epochs = {{1, 1.0, 0.9, accuracy}};
  r.metrics = c;
  if (r.kind == TaskKind::vision) r.images = ImageCounts{100, 10};
  return r;
}

ResultRow anomaly(const std::string& variant, double accuracy, int seed, const std::string& dataset, int64_t size,
                  bool pretrained) {
  ResultRow r = row("anomaly", variant, accuracy, seed);
  r.sets = SetSource{dataset, pretrained ? "weights/resnet34.safetensors" : "resnet34 (random init)", 0.1};
  r.sets->image_size = size;
  r.sets->pretrained = pretrained;
  return r;
}

report::PaperTable paper() {
  report::PaperTable p;
  p.columns = {"mnist", "anomaly", "avg"};
  p.average = {"mnist", "anomaly"};
  p.variants = {"QKV", "Q=K=V", "Q=K-V"};
  p.values["QKV"] = {{"mnist", 0.981}, {"anomaly", 0.942}, {"avg", 0.9}};
  return p;
}

}  // namespace

TEST_CASE("anomaly table: cells not run as the paper are marked, with a footnote per mark") {
  const std::vector<ResultRow> rows = {row("mnist", "QKV", 0.98, 0),
                                       row("mnist", "Q=K=V", 0.97, 0),
                                       row("mnist", "Q=K-V", 0.96, 0),
                                       anomaly("QKV", 0.40, 0, "cifar10", 32,
                                               false),  // random weights, CIFAR-10, 32 px
                                       anomaly("QKV", 0.44, 1, "cifar10", 32, false),       //
                                       anomaly("Q=K=V", 0.93, 0, "cifar100", 224, true),    // as the paper
                                       anomaly("Q=K-V", 0.90, 0, "cifar100", 224, false)};  // random weights only
  const report::PaperTable p = paper();
  const report::Table t = report::build_table(rows, &p);
  CHECK(t.cells.at("QKV").at("anomaly").not_as_paper ==
        (report::kRandomWeights | report::kStandInDataset | report::kNot224));
  CHECK(t.cells.at("Q=K=V").at("anomaly").not_as_paper == 0);
  CHECK(t.cells.at("Q=K-V").at("anomaly").not_as_paper == report::kRandomWeights);
  CHECK(t.cells.at("QKV").at("mnist").not_as_paper == 0);

  const std::string md = report::to_markdown(t, &p, "Table 2");
  test::check_contains(md,
                       {"| QKV | 0.980 ± 0.000 (1) [0.981] | 0.420 ± 0.028 (2)†‡§ [0.942] | 0.700†‡§ [0.900] |",
                        "| Q=K=V | 0.970 ± 0.000 (1) | 0.930 ± 0.000 (1) | 0.950 |",
                        "| Q=K-V | 0.960 ± 0.000 (1) | 0.900 ± 0.000 (1)† | 0.930† |",
                        "† ResNet34 with random weights (no data.resnet_weights): the paper's is ImageNet-pretrained",
                        "‡ sets of CIFAR-10 images: the paper uses CIFAR-100",
                        "§ images encoded at 32 px: the paper resizes them to 224 px"});

  const std::string csv = report::to_csv(t, &p);
  test::check_contains(csv, {"variant,task,mean,std,runs,paper,diverged,not_as_paper\n",
                             "QKV,anomaly,0.420000,0.028284,2,0.9420,0,random_weights stand_in_dataset not_224px\n",
                             "QKV,mnist,0.980000,0.000000,1,0.9810,0,\n", "Q=K=V,anomaly,0.930000,0.000000,1,,0,\n",
                             "Q=K-V,avg,0.930000,,,,,random_weights\n"});

  // A table of runs as the paper ran them has no marks and no footnotes.
  const report::Table faithful = report::build_table({rows[1], rows[5]}, &p);
  const std::string clean = report::to_markdown(faithful, &p, "Table 2");
  for (const char* mark : {"†", "‡", "§"}) CHECK(clean.find(mark) == std::string::npos);
  // Without set-anomaly runs the CSV keeps its columns.
  CHECK(report::to_csv(report::build_table({rows[0]}, &p), &p).find("not_as_paper") == std::string::npos);
}

TEST_CASE("anomaly table: rows written before the setup was recorded are read and marked from what they say") {
  ResultRow old = row("anomaly", "QKV", 0.5, 0);
  old.sets = SetSource{"cifar10", "resnet34 (random init)", 0.1};
  nlohmann::json j = to_json(old);
  CHECK(!j.contains("resnet_image_size"));
  const ResultRow back = result_from_json(j, "old/result.json");
  CHECK(back == old);
  CHECK(!back.sets->image_size);
  CHECK(!back.sets->pretrained);
  const report::Table t = report::build_table({back}, nullptr);
  CHECK(t.cells.at("QKV").at("anomaly").not_as_paper ==
        (report::kRandomWeights | report::kStandInDataset | report::kNot224));
  test::check_contains(report::to_markdown(t, nullptr, "T"), {"§ images encoded at a size not recorded"});

  // New rows round-trip their setup; a mistyped field is named.
  ResultRow now = anomaly("QKV", 0.9, 0, "cifar100", 224, true);
  CHECK(result_from_json(to_json(now), "x") == now);
  nlohmann::json bad = to_json(now);
  bad["resnet_pretrained"] = "yes";
  test::check_contains(test::error_of<IOError>([&] { result_from_json(bad, "runs/a/result.json"); }),
                       {"runs/a/result.json", "resnet_pretrained"});
  bad = to_json(now);
  bad["resnet_image_size"] = -3;
  test::check_contains(test::error_of<IOError>([&] { result_from_json(bad, "runs/a/result.json"); }),
                       {"runs/a/result.json", "resnet_image_size"});
}

TEST_CASE("anomaly table: the scale each column's runs were made at is named under the table") {
  ResultRow mnist = row("mnist", "QKV", 0.98, 0), set = anomaly("QKV", 0.95, 0, "cifar100", 224, true);
  mnist.scale = "paper";
  set.scale = "template";
  CHECK(result_from_json(to_json(set), "x").scale == "template");
  const report::PaperTable p = paper();
  test::check_contains(report::to_markdown(report::build_table({mnist, set}, &p), &p, "Table 2"),
                       {"Scales the runs were made at: MNIST: `paper`, anomaly: `template`."});
  ResultRow mixed = anomaly("QKV", 0.8, 1, "cifar100", 224, true);
  mixed.scale = "paper";
  test::check_contains(report::to_markdown(report::build_table({mnist, set, mixed}, &p), &p, "Table 2"),
                       {"anomaly: `template` and `paper`"});
  // Rows that recorded no scale (older ones) add no line.
  const std::string plain = report::to_markdown(report::build_table({row("mnist", "QKV", 0.98, 0)}, &p), &p, "T");
  CHECK(plain.find("Scales the runs") == std::string::npos);
}
