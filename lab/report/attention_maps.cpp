#include "lab/report/attention_maps.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "lab/experiment/models.h"
#include "lab/experiment/sweep.h"
#include "lab/report/plot.h"
#include "lab/report/table.h"
#include "train/data/synthetic.h"

namespace qkv::report {
namespace {

namespace fs = std::filesystem;

// Probabilities [T, T] of the last layer's first head of the run in `dir` on its first test
// example (the last layer is where the task's structure shows).
Tensor attention_map(const fs::path& dir) {
  const std::string file = (dir / "config.yaml").string();
  const experiment::Run run = experiment::single_run(experiment::load_config_file(file), file);
  const auto& c = run.config.as<experiment::SyntheticConfig>();
  nn::Encoder model(experiment::encoder_config(c, run.variant));
  model.load((dir / "checkpoint.safetensors").string());
  model.eval();
  const data::SyntheticSplits data =
      data::make_synthetic_splits(c.task.name, c.task.length, c.task.vocab, c.task.train_size, c.task.val_size, 1,
                                  uint64_t(c.task.data_seed));
  NoGradGuard no_grad;
  Tensor ids = data.test.inputs.slice(0, 0, 1);
  const int64_t last = int64_t(model.blocks.size()) - 1;
  Tensor probs = model.blocks[size_t(last)]->attn.probabilities(model.hidden_before(ids, last));
  return probs.select(0, 0).select(0, 0);
}

}  // namespace

int write_attention_maps(const fs::path& out, const fs::path& stem, const PaperTable* paper) {
  const std::vector<ResultRow> results = collect_results(out).rows;
  // The first finished run with a checkpoint per (task, variant), in table order.
  const Table order = build_table(results, paper);
  std::map<std::pair<std::string, std::string>, fs::path> chosen;
  for (const ResultRow& r : results) {
    if (r.kind != experiment::TaskKind::synthetic || !r.complete()) continue;
    const auto key = std::make_pair(r.task, r.variant);
    const fs::path dir = out / r.experiment / fs::path(r.run);
    if (chosen.count(key) || !fs::exists(dir / "checkpoint.safetensors") || !fs::exists(dir / "config.yaml")) continue;
    chosen[key] = dir;
  }
  if (chosen.empty() || order.variants.empty()) return 0;
  // One row of panels per task, one column per variant; a missing run leaves its place empty.
  Figure fig{"last layer, head 0 attention on one test example (rows: queries, columns: keys)",
             int(order.variants.size()),
             {},
             {}};
  int drawn = 0;
  for (const auto& task : order.tasks) {
    const int before = drawn;
    for (const auto& variant : order.variants) {
      HeatmapPanel& panel = fig.heatmaps.emplace_back();
      panel.title = task + ": " + variant;
      auto it = chosen.find({task, variant});
      if (it == chosen.end()) continue;
      Tensor map;
      try {
        map = attention_map(it->second);
      } catch (const Error& e) {  // a damaged run folder costs its map, not the figure
        std::fprintf(stderr, "attention maps: skipped %s: %s\n", it->second.string().c_str(), e.what());
        continue;
      }
      const std::vector<float> p = map.to_vector<float>();
      panel.rows = map.size(0);
      panel.cols = map.size(1);
      panel.values.assign(p.begin(), p.end());
      panel.x_label = "key";
      panel.y_label = "query";
      panel.min = 0.0;
      ++drawn;
    }
    if (drawn == before) fig.heatmaps.resize(fig.heatmaps.size() - order.variants.size());  // no row for it
  }
  if (drawn == 0) return 0;
  write_figure(fig, stem);
  return drawn;
}

}  // namespace qkv::report
