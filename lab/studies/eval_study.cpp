#include "lab/studies/eval_study.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "io/atomic_file.h"
#include "lab/experiment/lm_run.h"
#include "lab/infer/run_model.h"
#include "lab/report/number_text.h"
#include "lab/report/table.h"
#include "nn/variant.h"
#include "tensor/error.h"
#include "tensor/format.h"

namespace qkv::studies {

namespace fs = std::filesystem;
using infer::McScore;
using data::McTask;

namespace {

// The scored file of a task, and its few-shot pool when one is there.
struct TaskFiles {
  fs::path test;
  std::optional<fs::path> train;
};
TaskFiles task_files(const fs::path& dir, McTask task) {
  const std::string name = data::mc_task_name(task);
  for (const fs::path& test : {dir / name / "test.jsonl", dir / (name + ".jsonl")})
    if (fs::is_regular_file(test)) {
      const fs::path train = dir / name / "train.jsonl";
      return {test, fs::is_regular_file(train) ? std::optional<fs::path>(train) : std::nullopt};
    }
  throw IOError(cat("eval: no ", name, " task file: looked for ", (dir / name / "test.jsonl").string(), " and ",
                    (dir / (name + ".jsonl")).string(), " (docs/LANGUAGE_MODELS.md says where the files come from)"));
}

std::string percent(double x) { return report::fmt("%.2f", 100 * x); }

}  // namespace

EvalResult run_eval_study(const EvalOptions& o, std::FILE* out, std::FILE* log) {
  check<ValueError>(!o.tasks.empty(), "eval: no tasks given (--tasks)");
  std::vector<McTask> tasks;
  for (const std::string& name : o.tasks) try {
      tasks.push_back(data::parse_mc_task(name));
    } catch (const ValueError& e) { throw ValueError(cat("eval --tasks: ", e.what())); }
  check<ValueError>(!o.task_data.empty(), "eval: no task folder given (--task-data DIR)");
  const experiment::LmRunFiles f = experiment::open_lm_run(o.run, "eval");
  experiment::LmConfig c = f.config;
  if (!o.data_root.empty()) c.data.root = o.data_root;
  const data::Gpt2Tokenizer tokenizer = infer::load_run_tokenizer(c, o.tokenizer);
  const std::unique_ptr<nn::GPT> model = infer::load_run_model(f, c, o.device);
  model->eval();
  const std::string variant = nn::variant_name(f.run.variant);

  EvalResult result;
  for (McTask task : tasks) {
    const TaskFiles files = task_files(o.task_data, task);
    const std::vector<data::McItem> items = data::read_mc_items(task, files.test);
    const std::vector<data::McItem> pool = files.train ? data::read_mc_items(task, *files.train) : items;
    std::fprintf(log, "eval: %s: %zu questions from %s, shots from %s\n", data::mc_task_name(task), items.size(),
                 files.test.c_str(), files.train ? files.train->c_str() : "the other questions");
    result.scores.push_back(infer::score_mc(*model, tokenizer, task, items, pool, !files.train, o.scoring));
    result.mean_acc += result.scores.back().acc / double(tasks.size());
    result.mean_acc_norm += result.scores.back().acc_norm / double(tasks.size());
  }

  std::string md =
      cat("# Downstream, ", o.scoring.shots, "-shot: ", o.run, " (", variant, ", ", f.checkpoint.filename().string(),
          ")\n\n| task | questions | acc | acc_norm |\n|---|---|---|---|\n");
  for (const McScore& s : result.scores)
    md += cat("| ", data::mc_task_name(s.task), " | ", s.items, " | ", percent(s.acc), " | ", percent(s.acc_norm),
              " |\n");
  md += cat("| average | | ", percent(result.mean_acc), " | ", percent(result.mean_acc_norm), " |\n\n");
  const fs::path table11 = fs::path(o.paper_dir) / "table11.yaml";
  if (!o.paper_dir.empty() && fs::is_regular_file(table11)) {
    const report::PaperTable paper = report::load_paper_table(table11.string());
    const auto theirs = paper.at(variant, "avg");
    md += theirs ? cat("The paper's ", paper.model_size, " ", variant, " averages ", percent(*theirs),
                       " (acc, 5-shot, over ARC-C, ARC-E, HellaSwag, PIQA, WinoGrande; ", paper.title, ").")
                 : cat(paper.title, " has no ", variant, " row.");
    md += " Accuracy in percent; acc_norm divides each choice's log-likelihood by its length in bytes.\n";
  }
  std::fputs(md.c_str(), out);
  std::fflush(out);

  const fs::path dir = o.out.empty() ? fs::path(o.run) / "eval" : fs::path(o.out);
  std::error_code ec;
  fs::create_directories(dir, ec);
  check<IOError>(fs::is_directory(dir), "eval: cannot create the output folder ", dir.string(),
                 ec ? cat(" (", ec.message(), "); choose another with --out")
                    : std::string("; choose another with --out"));
  const std::string stem = cat("downstream_", o.scoring.shots, "shot");
  write_file_atomically((dir / (stem + ".md")).string(), [&](std::ostream& os) { os << md; });
  nlohmann::json j = {{"run", o.run},
                      {"variant", variant},
                      {"checkpoint", f.checkpoint.filename().string()},
                      {"shots", o.scoring.shots},
                      {"seed", o.scoring.seed},
                      {"mean_acc", result.mean_acc},
                      {"mean_acc_norm", result.mean_acc_norm},
                      {"tasks", nlohmann::json::array()}};
  for (const McScore& s : result.scores)
    j["tasks"].push_back(
        {{"task", data::mc_task_name(s.task)}, {"questions", s.items}, {"acc", s.acc}, {"acc_norm", s.acc_norm}});
  write_file_atomically((dir / (stem + ".json")).string(), [&](std::ostream& os) { os << j.dump(2) << "\n"; });
  std::fprintf(log, "eval: wrote %s and %s\n", (dir / (stem + ".md")).c_str(), (dir / (stem + ".json")).c_str());
  return result;
}

}  // namespace qkv::studies
