#include "lab/report/attention_maps.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "lab/experiment/models.h"
#include "lab/experiment/sweep.h"
#include "lab/report/canvas.h"
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
      data::make_synthetic_splits(data::parse_synthetic_task(std::string(experiment::enum_name(c.task.name))),
                                  c.task.length, c.task.vocab, c.task.train_size, c.task.val_size, 1,
                                  uint64_t(c.task.data_seed));
  NoGradGuard no_grad;
  Tensor ids = data.test.inputs.slice(0, 0, 1);
  const int64_t last = int64_t(model.blocks.size()) - 1;
  Tensor probs = model.blocks[size_t(last)]->attn.probabilities(model.hidden_before(ids, last));
  return probs.select(0, 0).select(0, 0);
}

}  // namespace

int write_attention_maps(const fs::path& out, const fs::path& png, const PaperTable* paper) {
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
  if (chosen.empty()) return 0;
  const int cell = 128, gap = 16, top = 40, scale = 2;
  int left = 0;
  for (const auto& t : order.tasks) left = std::max(left, Canvas::text_width(t, scale) + 12);
  const int W = left + int(order.variants.size()) * (cell + gap) + 40, H = top + int(order.tasks.size()) * (cell + gap);
  Canvas canvas(W, H);
  canvas.text(4, 4, "last layer, head 0 attention on one test example (rows: queries, columns: keys)", {60, 60, 60}, 1);
  for (size_t v = 0; v < order.variants.size(); ++v)
    canvas.text(left + int(v) * (cell + gap), top - 18, order.variants[v], {0, 0, 0}, scale);
  int drawn = 0;
  for (size_t t = 0; t < order.tasks.size(); ++t) {
    const int y0 = top + int(t) * (cell + gap);
    canvas.text(4, y0 + cell / 2 - 6, order.tasks[t], {0, 0, 0}, scale);
    for (size_t v = 0; v < order.variants.size(); ++v) {
      auto it = chosen.find({order.tasks[t], order.variants[v]});
      if (it == chosen.end()) continue;
      Tensor map;
      try {
        map = attention_map(it->second);
      } catch (const Error& e) {  // a damaged run folder costs its map, not the figure
        std::fprintf(stderr, "attention maps: skipped %s: %s\n", it->second.string().c_str(), e.what());
        continue;
      }
      const int64_t n = map.size(0);
      const std::vector<float> p = map.to_vector<float>();
      const float peak = std::max(*std::max_element(p.begin(), p.end()), 1e-6f);
      const int x0 = left + int(v) * (cell + gap);
      for (int py = 0; py < cell; ++py)
        for (int px = 0; px < cell; ++px) {
          const int64_t i = py * n / cell, j = px * n / cell;
          canvas.set(x0 + px, y0 + py, colormap(p[size_t(i * n + j)] / peak));
        }
      ++drawn;
    }
  }
  canvas.save_png(png.string());
  return drawn;
}

}  // namespace qkv::report
