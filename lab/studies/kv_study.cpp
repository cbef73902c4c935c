#include "lab/studies/kv_study.h"

#include "io/atomic_file.h"
#include "lab/experiment/codec.h"
#include "lab/experiment/config.h"
#include "lab/experiment/lm_run.h"
#include "lab/experiment/models.h"
#include "lab/infer/run_model.h"
#include "lab/report/kv_analysis.h"
#include "lab/tasks/anomaly.h"
#include "lab/tasks/lm.h"
#include "lab/tasks/vision.h"
#include "lab/tasks/vision_data.h"
#include "nn/models/encoder.h"
#include "nn/models/set_transformer.h"
#include "nn/models/vit.h"
#include "tensor/error.h"
#include "tensor/format.h"
#include "train/data/loader_batches.h"
#include "train/data/synthetic.h"

namespace qkv::studies {

namespace fs = std::filesystem;
using namespace experiment;

namespace {

report::KvAnalysis analyze_lm(const fs::path& folder, const KvStudyOptions& o) {
  const LmRunFiles f = open_lm_run(folder, "analyze");
  LmConfig c = f.config;
  if (!o.data_root.empty()) c.data.root = o.data_root;
  const fs::path tokens = tasks::run_token_folder(f, c, o.token_data, "analyze");
  const std::unique_ptr<nn::GPT> model = infer::load_run_model(f, c, o.device);
  report::KvAnalysis a = report::analyze_gpt(*model, report::validation_batches(tokens, "val", c.model.context,
                                                                                o.tokens, c.train.eval_batch_size));
  a.checkpoint = f.checkpoint.filename().string();
  a.inputs = cat("validation tokens from ", tokens.string());
  return a;
}

// The model of a classification run with the weights it tested (<folder>/checkpoint.safetensors),
// on `device`, measured over what `feed` runs through it.
report::KvAnalysis measure_tested(nn::Module& model, const fs::path& folder, const Device& device,
                                  const std::function<void()>& feed) {
  const fs::path file = folder / "checkpoint.safetensors";
  check<IOError>(fs::is_regular_file(file), "analyze: ", folder.string(),
                 " has no checkpoint.safetensors (written when a run of the epoch loop tests its weights)");
  model.to(device);
  model.load(file.string());
  model.eval();
  return report::analyze_attention(feed);
}

// Runs `forward` over batches of `inputs`' rows on `device` until `budget` attention inputs
// (rows x `per_row`) were fed.
void feed_rows(const Tensor& inputs, int64_t per_row, int64_t batch, int64_t budget, const Device& device,
               const std::function<void(const Tensor&)>& forward) {
  const int64_t rows = std::min(inputs.size(0), std::max<int64_t>(1, (budget + per_row - 1) / per_row));
  for (int64_t r = 0; r < rows; r += batch) forward(inputs.slice(0, r, std::min(rows, r + batch)).to(device));
}

// <out> of a run folder <out>/<experiment>/<run id>, where the run's caches are.
fs::path output_root(const fs::path& folder, const Run& run, const std::string& experiment) {
  const std::optional<fs::path> root = run_output_root(folder, experiment, run.id);
  check<IOError>(root.has_value(), "analyze: ", folder.string(), " is not <out>/", experiment, "/", run.id,
                 " (a moved run): a set-anomaly run reads its features from the cache <out>/features that "
                 "`qkvlab run` wrote, so analyze it where it was written");
  return *root;
}

report::KvAnalysis analyze_classifier(const fs::path& folder, const Config& config, const Run& run,
                                      const KvStudyOptions& o) {
  report::KvAnalysis a;
  switch (config.kind()) {
    case TaskKind::synthetic: {
      const SyntheticConfig& c = config.as<SyntheticConfig>();
      const data::SyntheticSplits splits =
          data::make_synthetic_splits(c.task.name, c.task.length, c.task.vocab, c.task.train_size, c.task.val_size,
                                      c.task.test_size, uint64_t(c.task.data_seed));
      nn::Encoder model(encoder_config(c, run.variant));
      a = measure_tested(model, folder, o.device, [&] {
        feed_rows(splits.test.inputs, c.task.length, c.train.eval_batch_size, o.tokens, o.device,
                  [&](const Tensor& x) { model.forward(x); });
      });
      a.family = "encoder";
      a.inputs = "test-sequence tokens";
      break;
    }
    case TaskKind::vision: {
      VisionConfig c = config.as<VisionConfig>();
      if (!o.data_root.empty()) c.data.root = o.data_root;
      const tasks::VisionSplits data = tasks::load_vision_splits(c);
      const tasks::VisionInputs in = tasks::vision_inputs(c, *data.train);
      nn::ViT model(tasks::vit_of(c, run.variant, in, *data.train));
      const int64_t per_image = model.config().patches() + 1;  // and the class token
      data::LoaderBatches test(data.test, in.eval, o.device);
      a = measure_tested(model, folder, o.device, [&] {
        test.start_epoch(0);
        Tensor x, y;
        for (int64_t fed = 0; fed < o.tokens && test.next(x, y); fed += x.size(0) * per_image) model.forward(x);
      });
      a.family = "vit";
      a.inputs = "test-image tokens (patches and the class token)";
      break;
    }
    case TaskKind::anomaly: {
      AnomalyConfig c = config.as<AnomalyConfig>();
      if (!o.data_root.empty()) c.data.root = o.data_root;
      const tasks::AnomalySets data =
          tasks::anomaly_sets(c, output_root(folder, run, c.name) / "features", o.device, /*write_cache=*/false);
      nn::SetTransformer model(set_transformer_config(c, run.variant, data.train_features.features.size(1)));
      a = measure_tested(model, folder, o.device, [&] {
        feed_rows(data.test.features, c.data.set_size, c.train.eval_batch_size, o.tokens, o.device,
                  [&](const Tensor& x) { model.forward(x); });
      });
      a.family = "set_transformer";
      a.inputs = "test-set elements";
      break;
    }
    case TaskKind::lm: break;
  }
  a.checkpoint = "checkpoint.safetensors";
  return a;
}

}  // namespace

report::KvAnalysis analyze_run(const fs::path& folder, const KvStudyOptions& o, std::FILE* log) {
  const char* example = "; give a run folder of `qkvlab run`, such as runs/lm/shakespeare/QKV/seed0";
  check<IOError>(fs::is_directory(folder), "analyze: ", folder.string(), " is not a folder", example);
  const fs::path config_file = folder / "config.yaml";
  check<IOError>(fs::is_regular_file(config_file), "analyze: ", folder.string(),
                 " is not a run folder (no config.yaml)", example);
  const Config config = load_config_file(config_file.string());
  const Run run = single_run(config, config_file.string());
  report::KvAnalysis a =
      config.kind() == TaskKind::lm ? analyze_lm(folder, o) : analyze_classifier(folder, config, run, o);
  a.label = nn::variant_name(run.variant);
  a.run = folder.string();
  std::fprintf(log, "analyze: %s (%s, %s): %s attention inputs a layer, %s\n", folder.c_str(), a.label.c_str(),
               a.checkpoint.c_str(), with_commas(a.tokens).c_str(), a.inputs.c_str());
  if (a.tokens < o.tokens)
    std::fprintf(log, "analyze: %s: its held-out data gave %s attention inputs, fewer than --tokens %s\n",
                 folder.c_str(), with_commas(a.tokens).c_str(), with_commas(o.tokens).c_str());
  return a;
}

std::vector<report::KvAnalysis> run_kv_study(const KvStudyOptions& o, std::FILE* out, std::FILE* log) {
  check<ValueError>(!o.runs.empty(), "analyze: no run folders given");
  std::vector<report::KvAnalysis> results;
  for (const std::string& run : o.runs) results.push_back(analyze_run(run, o, log));
  const std::string md = report::kv_markdown(results);
  std::fputs(md.c_str(), out);
  std::fflush(out);

  const fs::path dir = o.out.empty() ? fs::path(o.runs.front()) / "analysis" : fs::path(o.out);
  std::error_code ec;
  fs::create_directories(dir, ec);
  check<IOError>(fs::is_directory(dir), "analyze: cannot create the output folder ", dir.string(),
                 ec ? cat(" (", ec.message(), ")") : std::string());
  write_file_atomically((dir / "analysis.md").string(), [&](std::ostream& os) { os << md; });
  report::write_kv_csv(results, dir / "analysis.csv");
  std::fprintf(log, "analyze: wrote %s and %s\n", (dir / "analysis.md").string().c_str(),
               (dir / "analysis.csv").string().c_str());
  report::write_study_figure(report::kv_figure(results), dir / "analysis_layers", log, "analyze");
  return results;
}

}  // namespace qkv::studies
