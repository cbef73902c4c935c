#include "lab/studies/convert_study.h"

#include <cmath>

#include "io/atomic_file.h"
#include "lab/experiment/models.h"
#include "lab/experiment/run_dir.h"
#include "lab/infer/convert_run.h"
#include "lab/tasks/lm.h"
#include "lab/tasks/run_task.h"
#include "tensor/error.h"
#include "train/loops/lm_checkpoint.h"

namespace qkv::studies {

namespace fs = std::filesystem;
using experiment::LmConfig;

namespace {

// Trains `run` in its folder under `out`, continuing it from its newest checkpoint when it was
// interrupted, or reads its result when it is complete.
experiment::ResultRow train_or_read(const experiment::Run& run, const fs::path& out, std::FILE* log) {
  const experiment::RunDir dir(out, run);
  const std::string label = cat(run.config.name(), "/", run.id);
  if (dir.complete()) {
    // Reused only when it is the run asked for, data.root (the machine's) and the convert section
    // (which no run reads) aside.
    LmConfig done = experiment::load_config_file((dir.path() / "config.yaml").string()).as<LmConfig>();
    done.data.root = run.config.as<LmConfig>().data.root;
    done.convert = run.config.as<LmConfig>().convert;
    check<ValueError>(experiment::Config{done} == run.config, "convert-study: ", dir.path().string(),
                      " holds a finished run of other settings than this study's (its config.yaml); delete it or "
                      "give another --out");
    std::fprintf(log, "convert-study: %s is complete; reusing it\n", label.c_str());
    return dir.read_result();
  }
  const FolderLock lock = dir.lock();
  for (const auto& f : dir.remove_temporaries())
    std::fprintf(log, "  removed %s, a temporary file an interrupted run left\n", f.string().c_str());
  dir.settle_checkpoints(/*resume=*/true, /*restart=*/false, log);
  dir.start(run.config);
  std::fprintf(log, "convert-study: training %s\n", label.c_str());
  const experiment::ResultRow row = tasks::run_task(run, dir, out, /*resume=*/true);
  std::fprintf(log, "convert-study: %s: %s\n", label.c_str(), experiment::summary(row).c_str());
  return row;
}

// The one run a config derived from the source's describes.
experiment::Run only_run(const LmConfig& c) {
  const std::vector<experiment::Run> runs = experiment::expand(experiment::Config{c});
  check<ValueError>(runs.size() == 1, "convert-study: ", c.name, " expands to ", runs.size(), " runs, expected 1");
  return runs[0];
}

// The source's config as a K=V run of its own: another experiment name, the target variant, the
// source's prepared tokens.
LmConfig derived(const LmConfig& source, const std::string& name, const nn::Variant& target, const fs::path& tokens) {
  LmConfig c = source;
  c.name = name;
  c.sweep.variants = {target};
  c.lm.tokens = tokens.string();
  c.lm.text.clear();
  c.lm.val_text.clear();
  c.model.init_from.clear();
  return c;
}

infer::ConvertedRun convert_or_read(const fs::path& source, const fs::path& folder, const std::string& name,
                                    experiment::ConvertMethod m, const LmConfig& c, std::FILE* log) {
  if (fs::exists(folder / "convert.json")) {
    infer::ConvertedRun done = infer::read_converted(folder);
    check<ValueError>(done.calibration_batches == c.convert.calibration_batches &&
                          done.source_checkpoint == *loops::latest_checkpoint(source),
                      "convert-study: ", folder.string(), " holds a conversion of another checkpoint or calibration (",
                      (folder / "convert.json").string(), "); delete it or give another --out");
    std::fprintf(log, "convert-study: %s is converted; reusing it\n", folder.string().c_str());
    return done;
  }
  fs::remove_all(folder);  // what an interrupted conversion left (convert.json is written last)
  infer::ConvertRequest r;
  r.run = source;
  r.out = folder;
  r.name = name;
  r.method = m;
  r.calibration_batches = c.convert.calibration_batches;
  return infer::convert_run(r);
}

report::ConvertCurve curve(const std::string& label, const experiment::ResultRow& row, int64_t offset) {
  report::ConvertCurve c{label, {}, {}};
  if (const auto* lm = row.lm())
    for (const auto& e : lm->evals) {
      c.step.push_back(double(offset + e.step));
      c.ppl.push_back(e.val_ppl);
    }
  return c;
}

double final_ppl(const experiment::ResultRow& row) { return row.lm() ? row.lm()->val_ppl : NAN; }

}  // namespace

report::ConvertStudy run_convert_study(const experiment::Experiment& e, const fs::path& out_dir, std::FILE* log) {
  check<ValueError>(e.config.kind() == experiment::TaskKind::lm, "convert-study: ", e.path, " is a ",
                    experiment::enum_name(e.config.kind()),
                    " experiment (task.kind); the study converts language "
                    "models (task.kind lm)");
  check<ValueError>(e.runs.size() == 1, "convert-study: ", e.path, " describes ", e.runs.size(),
                    " runs; the study converts one source: list one variant in sweep.variants (QKV, GQA-g or MQA), "
                    "one seed in sweep.seeds and no grid");
  tasks::check_inputs(e.config);
  const experiment::Run& source_run = e.runs[0];
  const LmConfig& c = source_run.config.as<LmConfig>();
  const nn::Variant target = infer::shared_kv_target(experiment::gpt_config(c, source_run.variant));
  const fs::path out = fs::absolute(out_dir).lexically_normal();
  const std::string source_name = nn::variant_name(source_run.variant), target_name = nn::variant_name(target);
  std::fprintf(
      log, "convert-study: %s: %s -> %s by %zu method(s); fine-tune %d steps; from scratch %d steps; output in %s\n",
      c.name.c_str(), source_name.c_str(), target_name.c_str(), c.convert.methods.size(), c.convert.finetune_steps,
      c.train.steps + c.convert.finetune_steps, out.string().c_str());

  const experiment::ResultRow source = train_or_read(source_run, out, log);
  const fs::path tokens = fs::absolute(tasks::lm_token_folder(c, out)).lexically_normal();
  const fs::path source_folder = experiment::RunDir(out, source_run).path();

  report::ConvertStudy s;
  s.experiment = c.name;
  s.source_variant = source_name;
  s.target_variant = target_name;
  s.source_steps = c.train.steps;
  s.finetune_steps = c.convert.finetune_steps;
  s.tokens_per_step = int64_t(c.train.batch_size) * c.train.grad_accum * c.model.context;
  s.source_ppl = final_ppl(source);
  s.curves.push_back(curve(cat(source_name, " (source)"), source, 0));
  for (const experiment::ConvertMethod m : c.convert.methods) {
    const std::string method(experiment::enum_name(m));
    const std::string name = cat(c.name, "-", method);
    const experiment::Run as_run = only_run(derived(c, name, target, tokens));
    const fs::path folder = experiment::RunDir(out, as_run).path();
    const infer::ConvertedRun conv = convert_or_read(source_folder, folder, name, m, c, log);
    std::fprintf(log, "convert-study: %s: validation perplexity %.3f -> %.3f right after conversion\n", method.c_str(),
                 std::exp(conv.source_val_loss), std::exp(conv.val_loss));
    s.calibration_tokens = std::max(s.calibration_tokens, conv.calibration_tokens);

    LmConfig tune = derived(c, name + "-finetune", target, tokens);
    tune.model.init_from = folder.string();
    tune.train.steps = c.convert.finetune_steps;
    tune.train.eval_every = c.convert.finetune_eval_every;
    tune.optim.lr = c.convert.finetune_lr;
    tune.schedule.warmup = 0;
    tune.schedule.warmup_steps = c.convert.finetune_warmup_steps;
    tune.schedule.min_lr = std::min(c.schedule.min_lr, c.convert.finetune_lr);
    const experiment::ResultRow tuned = train_or_read(only_run(tune), out, log);

    report::ConvertCurve cv = curve(cat(method, ", fine-tuned"), tuned, c.train.steps);
    cv.step.insert(cv.step.begin(), double(c.train.steps));
    cv.ppl.insert(cv.ppl.begin(), std::exp(conv.val_loss));
    s.curves.push_back(cv);
    double fit = NAN;
    if (!conv.layer_error.empty()) {
      fit = 0;
      for (double x : conv.layer_error) fit += x / double(conv.layer_error.size());
    }
    s.rows.push_back({method, fit, std::exp(conv.val_loss), final_ppl(tuned)});
  }

  LmConfig scratch = derived(c, c.name + "-scratch", target, tokens);
  scratch.train.steps = c.train.steps + c.convert.finetune_steps;
  const experiment::ResultRow from_scratch = train_or_read(only_run(scratch), out, log);
  s.scratch_ppl = final_ppl(from_scratch);
  s.curves.push_back(curve(cat(target_name, " from scratch"), from_scratch, 0));

  const std::string md = report::convert_study_markdown(s);
  std::fprintf(log, "\n%s", md.c_str());
  std::fflush(log);
  const fs::path report_dir = out / c.name;
  write_file_atomically((report_dir / "convert_study.md").string(), [&](std::ostream& os) { os << md; });
  report::write_convert_study_csv(s, report_dir / "convert_study.csv");
  std::fprintf(log, "convert-study: wrote %s and convert_study.csv\n",
               (report_dir / "convert_study.md").string().c_str());
  report::write_study_figure(report::convert_study_figure(s), report_dir / "convert_study_curves", log,
                             "convert-study");
  return s;
}

}  // namespace qkv::studies
