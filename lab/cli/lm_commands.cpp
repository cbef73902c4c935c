// The commands that read an experiment file without training:
//   qkvlab params FILE                       parameter counts per variant (any family)
//   qkvlab flops FILE --seq N                multiply-accumulates of a forward pass (any family; a
//                                            language model's closed forms, the paper's table, beside
//                                            the count from its op calls)
//   qkvlab cache FILE --context N [--batch B] [--cache-dtype bf16,int8] [--no-measure] [--device D]
//                                            KV-cache bytes per variant and dtype, computed and measured
//   qkvlab bench decode FILE [--batch B] [--context N] [--new-tokens K] [--cache-dtype LIST]
//                            [--precision bf16|fp32] [--graph] [--device D]
//   qkvlab bench decode --run RUN [--cache-dtype LIST] [--eval-batches N] ...
//                                            the decode studies (lab/studies/decode_study.h)
// FILE takes --scale and key=value overrides like `qkvlab run`.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>

#include "lab/cli/commands.h"
#include "lab/cli/device_option.h"
#include "lab/experiment/experiment.h"
#include "lab/experiment/overrides.h"
#include "lab/infer/decode_bench.h"
#include "lab/report/lm_reports.h"
#include "lab/report/model_reports.h"
#include "lab/studies/decode_study.h"
#include "tensor/error.h"

namespace qkv::cli {

namespace {

struct FileOptions {
  std::vector<std::string> args;  // the file and key=value overrides
  std::string scale;
};

void add_file_options(CLI::App* cmd, FileOptions& o, bool required = true) {
  cmd->add_option("args", o.args, "an experiment file (e.g. experiments/lm/gpt-300m.yaml) and key=value overrides")
      ->required(required);
  cmd->add_option("--scale", o.scale, "a named scale of the file");
}

void add_cache_dtype_option(CLI::App* cmd, std::string& list) {
  cmd->add_option("--cache-dtype", list,
                  "KV-cache storages compared, a comma-separated list of f32, bf16, f16 and int8 (a float32 scale per "
                  "row); default " +
                      std::string(infer::kDefaultCacheDTypes));
}

experiment::Experiment experiment_of(const FileOptions& o) {
  std::vector<std::string> files, overrides;
  experiment::split_arguments(o.args, files, overrides);
  check<ValueError>(files.size() == 1, "expected one experiment file, got ", files.size());
  return experiment::load_experiment(files[0], o.scale, overrides);
}

std::vector<report::LmVariantModel> models_of(const FileOptions& o) {
  return report::lm_variant_models(experiment_of(o));
}

}  // namespace

void add_lm_report_commands(CLI::App& app) {
  {
    auto o = std::make_shared<FileOptions>();
    auto* cmd = app.add_subcommand("params", "Parameter counts of each attention variant of an experiment file");
    add_file_options(cmd, *o);
    cmd->callback([o] {
      const experiment::Experiment e = experiment_of(*o);
      std::cout << (e.config.kind() == experiment::TaskKind::lm
                        ? report::params_report(report::lm_variant_models(e))
                        : report::family_params_report(report::family_models(e)));
    });
  }
  {
    auto o = std::make_shared<FileOptions>();
    auto seq = std::make_shared<int64_t>(2048);
    auto* cmd = app.add_subcommand("flops", "Multiply-accumulates of one forward pass per variant (batch 1)");
    add_file_options(cmd, *o);
    cmd->add_option("--seq", *seq, "language models: sequence length (default 2048); the others read one example")
        ->check(CLI::PositiveNumber);
    cmd->callback([o, seq] {
      const experiment::Experiment e = experiment_of(*o);
      std::cout << (e.config.kind() == experiment::TaskKind::lm
                        ? report::flops_report(report::lm_variant_models(e), *seq)
                        : report::family_macs_report(report::family_models(e)));
    });
  }
  {
    auto o = std::make_shared<FileOptions>();
    auto c = std::make_shared<report::CacheOptions>();
    auto dtypes = std::make_shared<std::string>(infer::kDefaultCacheDTypes);
    auto no_measure = std::make_shared<bool>(false);
    auto* cmd = app.add_subcommand("cache",
                                   "KV-cache bytes per variant: per token and at a context, computed and "
                                   "measured from the allocator after a real prefill");
    add_file_options(cmd, *o);
    cmd->add_option("--context", c->context, "tokens cached per sequence")->required()->check(CLI::PositiveNumber);
    cmd->add_option("--batch", c->batch, "sequences (default 1)")->check(CLI::PositiveNumber);
    add_cache_dtype_option(cmd, *dtypes);
    cmd->add_option("--prefill", c->prefill, "prompt tokens run through the model to fill the cache (default 16)")
        ->check(CLI::PositiveNumber);
    cmd->add_flag("--no-measure", *no_measure, "closed form only: build no model");
    add_device_option(cmd, c->device, "cache");
    cmd->callback([o, c, dtypes, no_measure] {
      c->dtypes = infer::parse_cache_dtypes(*dtypes, "cache --cache-dtype");
      c->measure = !*no_measure;
      std::cout << report::cache_report(report::cache_rows(models_of(*o), *c), *c);
    });
  }
  {
    auto* bench = app.add_subcommand("bench", "Benchmarks of trained-model use");
    bench->require_subcommand(1);
    auto o = std::make_shared<FileOptions>();
    auto v = std::make_shared<studies::VariantDecodeOptions>();
    auto run = std::make_shared<studies::RunDecodeOptions>();
    auto dtypes = std::make_shared<std::string>(infer::kDefaultCacheDTypes);
    auto precision = std::make_shared<std::string>("fp32");
    auto device = std::make_shared<Device>();
    auto paper = std::make_shared<std::string>(default_paper_tables() + "/decode.yaml");
    auto* cmd = bench->add_subcommand("decode",
                                      "Decode tokens/s and peak memory per variant (random weights) and KV-cache "
                                      "dtype, beside the paper's Q-K=V gains; or a trained run's, per KV-cache "
                                      "dtype, with its validation perplexity (--run)");
    add_file_options(cmd, *o, /*required=*/false);
    auto* batch_opt =
        cmd->add_option("--batch", v->batch, "sequences decoded together (default 1)")->check(CLI::PositiveNumber);
    auto* context_opt =
        cmd->add_option("--context", v->context, "cache capacity per sequence (default 512; --run: its context)")
            ->check(CLI::PositiveNumber);
    auto* prompt_opt = cmd->add_option("--prompt", v->prompt, "prefilled tokens (default 128; --run: what fits)")
                           ->check(CLI::PositiveNumber);
    auto* tokens_opt = cmd->add_option("--new-tokens", v->new_tokens, "tokens decoded one at a time (default 32)")
                           ->check(CLI::PositiveNumber);
    add_cache_dtype_option(cmd, *dtypes);
    cmd->add_option("--run", run->run,
                    "a trained language-model run folder: decode with its weights and report its validation "
                    "perplexity through the cache, per --cache-dtype");
    cmd->add_option("--eval-batches", run->eval_batches,
                    "--run: validation batches scored (default the run's train.eval_batches)")
        ->check(CLI::PositiveNumber);
    cmd->add_option("--data-root", run->data_root, "--run: data.root, if the run's is not valid here");
    cmd->add_option("--token-data", run->token_data, "--run: the prepared token folder the run was trained on");
    cmd->add_option("--precision", *precision,
                    "weights and activations: fp32 (default) or bf16 (on a GPU; the CPU keeps float32)");
    cmd->add_option("--paper", *paper, "the paper's decode measurements (default experiments/paper/decode.yaml)");
    cmd->add_flag("--graph", v->graph,
                  "decode through the static step (positions read on the device), captured once as a CUDA graph on "
                  "a GPU and replayed per token; its first step is not timed");
    add_device_option(cmd, *device, "bench decode");
    cmd->callback([=] {
      const std::vector<DType> cache_dtypes = infer::parse_cache_dtypes(*dtypes, "bench decode --cache-dtype");
      if (!run->run.empty()) {
        check<ValueError>(o->args.empty(), "bench decode: give an experiment file or --run, not both");
        studies::RunDecodeOptions r = *run;
        r.device = *device;
        r.cache_dtypes = cache_dtypes;
        if (batch_opt->count() > 0) r.batch = v->batch;
        if (context_opt->count() > 0) r.context = v->context;
        if (prompt_opt->count() > 0) r.prompt = v->prompt;
        if (tokens_opt->count() > 0) r.new_tokens = v->new_tokens;
        studies::run_trained_decode_study(r);
        return;
      }
      check<ValueError>(!o->args.empty(), "bench decode: give a language-model experiment file, or --run RUN");
      v->models = models_of(*o);
      v->cache_dtypes = cache_dtypes;
      v->precision = infer::parse_decode_precision(*precision);
      v->device = *device;
      v->paper_path = *paper;
      if (std::filesystem::exists(*paper)) v->paper = report::load_paper_decode(*paper);
      studies::run_variant_decode_study(*v);
    });
  }
}

}  // namespace qkv::cli
