// qkvlab analyze RUN... [--tokens N] [--out DIR] [--data-root DIR] [--token-data DIR] [--device D]:
// the paper's "why K=V works" measurements (lab/report/kv_analysis.h) on trained language-model runs — the
// mean cosine between the Q, K and V projection outputs on the run's own validation tokens, and
// the effective rank of each projection weight, per layer and overall, beside the paper's
// numbers. Prints the tables and writes analysis.md, analysis.csv and a figure to --out.
#include <cstdio>
#include <iostream>

#include "io/atomic_file.h"
#include "lab/cli/commands.h"
#include "lab/cli/device_option.h"
#include "lab/experiment/models.h"
#include "lab/infer/generate.h"
#include "lab/infer/run_model.h"
#include "lab/report/kv_analysis.h"
#include "lab/tasks/lm.h"
#include "tensor/error.h"
#include "tensor/format.h"

namespace qkv::cli {

namespace fs = std::filesystem;

namespace {

struct AnalyzeOptions {
  std::vector<std::string> runs;
  std::string out, data_root, token_data;
  Device device;
  int64_t tokens = 8192;
};

report::KvAnalysis analyze_run(const std::string& folder, const AnalyzeOptions& o, const Device& device) {
  const experiment::LmRunFiles f = experiment::open_lm_run(folder, "analyze");
  experiment::LmConfig c = f.config;
  if (!o.data_root.empty()) c.data.root = o.data_root;
  const fs::path tokens = tasks::run_token_folder(f, c, o.token_data, "analyze");
  const std::unique_ptr<nn::GPT> loaded = infer::load_run_model(f, c, device);
  nn::GPT& model = *loaded;
  const std::vector<Tensor> batches =
      report::validation_batches(tokens, "val", c.model.context, o.tokens, c.train.eval_batch_size);
  report::KvAnalysis a = report::analyze_gpt(model, batches);
  a.label = nn::variant_name(f.run.variant);
  a.run = folder;
  a.checkpoint = f.checkpoint.filename().string();
  std::fprintf(stderr, "analyze: %s (%s, %s): %s validation tokens from %s\n", folder.c_str(), a.label.c_str(),
               a.checkpoint.c_str(), with_commas(a.tokens).c_str(), tokens.string().c_str());
  if (a.tokens < o.tokens)
    std::fprintf(stderr, "analyze: %s: its validation split holds %s tokens in whole windows, fewer than --tokens %s\n",
                 folder.c_str(), with_commas(a.tokens).c_str(), with_commas(o.tokens).c_str());
  return a;
}

void analyze(const AnalyzeOptions& o) {
  std::vector<report::KvAnalysis> results;
  for (const std::string& run : o.runs) results.push_back(analyze_run(run, o, o.device));
  const std::string md = report::kv_markdown(results);
  std::cout << md << std::flush;

  const fs::path out = o.out.empty() ? fs::path(o.runs.front()) / "analysis" : fs::path(o.out);
  std::error_code ec;
  fs::create_directories(out, ec);
  check<IOError>(fs::is_directory(out), "analyze: cannot create the output folder ", out.string(),
                 ec ? cat(" (", ec.message(), ")") : std::string());
  write_file_atomically((out / "analysis.md").string(), [&](std::ostream& os) { os << md; });
  report::write_kv_csv(results, out / "analysis.csv");
  std::fprintf(stderr, "analyze: wrote %s and %s\n", (out / "analysis.md").string().c_str(),
               (out / "analysis.csv").string().c_str());
  try {
    const report::FigureFiles files = report::write_figure(report::kv_figure(results), out / "analysis_layers");
    std::fprintf(stderr, "analyze: figure %s (.svg, .pdf; data in %s)\n", files.png.string().c_str(),
                 files.csv.string().c_str());
  } catch (const IOError& e) {  // no gnuplot: the tables stand without the figure
    std::fprintf(stderr, "analyze: no figure: %s\n", e.what());
  }
}

}  // namespace

void add_analyze_command(CLI::App& app) {
  auto o = std::make_shared<AnalyzeOptions>();
  auto* cmd =
      app.add_subcommand("analyze",
                         "Why K=V works: projection cosines and effective ranks of trained language-model runs");
  cmd->footer(
      "cos(A, B): per layer, the outputs X W + b of the A and B projections on the block's attention input X\n"
      "(after ln1, before the head split), one d_model-wide vector per token; the cosine between a token's two\n"
      "vectors, averaged over the tokens (a zero vector counts as 0; GQA/MQA: K and V repeated over their group of\n"
      "query heads). Roles one projection serves are tied: 1 (tied). The tokens are the first --tokens of the\n"
      "run's validation split, in order, in windows of the model's context.\n"
      "Effective rank (Roy & Vetterli 2007) of each projection weight: exp(-sum_i p_i ln p_i), p_i = s_i / sum_j s_j\n"
      "over its singular values s (square roots of its Gram matrix's eigenvalues, float64). Overall values are\n"
      "the mean over layers. Only language-model runs (task.kind lm) are analysed; each uses its newest checkpoint.");
  cmd->add_option("runs", o->runs, "language-model run folders (config.yaml and checkpoints/)")->required();
  cmd->add_option("--tokens", o->tokens, "validation tokens fed through each model (default 8192)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--out", o->out,
                  "folder for analysis.md, analysis.csv and the figure (default: <first run>/analysis)");
  cmd->add_option("--data-root", o->data_root, "data.root for the token data, if the run's is not valid here");
  cmd->add_option(
      "--token-data", o->token_data,
      "prepared token folder to read the validation split from (default: the run's, <out>/tokens/<experiment>)");
  add_device_option(cmd, o->device, "analyze");
  cmd->callback([o] { analyze(*o); });
}

}  // namespace qkv::cli
