// The language-model commands that read an experiment file without training:
//   qkvlab params FILE                       parameter counts per variant
//   qkvlab flops FILE --seq N                multiply-accumulates of a forward pass (the paper's table)
//   qkvlab cache FILE --context N [--batch B] [--dtype bf16,int8] [--no-measure] [--device D]
//                                            KV-cache bytes per variant and dtype, computed and measured
//   qkvlab bench decode FILE [--batch B] [--context N] [--new-tokens K] [--precision bf16|fp32] [--graph]
//                            [--device D]
//                                            decode tokens/s and peak memory per variant, and the
//                                            Q-K=V-vs-QKV ratios beside the paper's
//   qkvlab bench decode --run RUN [--dtype f32,bf16,int8] [--eval-batches N] ...
//                                            a trained run's decode speed and validation
//                                            perplexity per KV-cache dtype (bench_decode_run.h)
// FILE takes --scale and key=value overrides like `qkvlab run`.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>

#include "lab/cli/bench_decode_run.h"
#include "lab/cli/commands.h"
#include "lab/cli/device_option.h"
#include "lab/experiment/experiment.h"
#include "lab/experiment/overrides.h"
#include "lab/infer/decode_bench.h"
#include "lab/report/decode_report.h"
#include "lab/report/lm_reports.h"
#include "tensor/error.h"

namespace qkv::cli {

namespace {

struct FileOptions {
  std::vector<std::string> args;  // the file and key=value overrides
  std::string scale;
};

void add_file_options(CLI::App* cmd, FileOptions& o, bool required = true) {
  cmd->add_option("args", o.args,
                  "a language-model experiment file (e.g. experiments/lm/gpt-300m.yaml) and key=value overrides")
      ->required(required);
  cmd->add_option("--scale", o.scale, "a named scale of the file");
}

std::vector<report::LmVariantModel> models_of(const FileOptions& o) {
  std::vector<std::string> files, overrides;
  experiment::split_arguments(o.args, files, overrides);
  check<ValueError>(files.size() == 1, "expected one experiment file, got ", files.size());
  return report::lm_variant_models(experiment::load_experiment(files[0], o.scale, overrides));
}

}  // namespace

void add_lm_report_commands(CLI::App& app) {
  {
    auto o = std::make_shared<FileOptions>();
    auto* cmd =
        app.add_subcommand("params", "Parameter counts of each attention variant of a language-model experiment");
    add_file_options(cmd, *o);
    cmd->callback([o] { std::cout << report::params_report(models_of(*o)); });
  }
  {
    auto o = std::make_shared<FileOptions>();
    auto seq = std::make_shared<int64_t>(2048);
    auto* cmd = app.add_subcommand("flops", "Multiply-accumulates of one forward pass per variant (batch 1)");
    add_file_options(cmd, *o);
    cmd->add_option("--seq", *seq, "sequence length (default 2048)")->check(CLI::PositiveNumber);
    cmd->callback([o, seq] { std::cout << report::flops_report(models_of(*o), *seq); });
  }
  {
    auto o = std::make_shared<FileOptions>();
    auto c = std::make_shared<report::CacheOptions>();
    auto dtype = std::make_shared<std::string>("bf16");
    auto no_measure = std::make_shared<bool>(false);
    auto device = std::make_shared<std::string>("cpu");
    auto* cmd = app.add_subcommand("cache",
                                   "KV-cache bytes per variant: per token and at a context, computed and "
                                   "measured from the allocator after a real prefill");
    add_file_options(cmd, *o);
    cmd->add_option("--context", c->context, "tokens cached per sequence")->required()->check(CLI::PositiveNumber);
    cmd->add_option("--batch", c->batch, "sequences (default 1)")->check(CLI::PositiveNumber);
    cmd->add_option("--dtype", *dtype,
                    "cache storage, one or a comma-separated list: bf16 (default), f16, f32 or int8 (a float32 scale "
                    "per row)");
    cmd->add_option("--prefill", c->prefill, "prompt tokens run through the model to fill the cache (default 16)")
        ->check(CLI::PositiveNumber);
    cmd->add_flag("--no-measure", *no_measure, "closed form only: build no model");
    add_device_option(cmd, *device);
    cmd->callback([o, c, dtype, no_measure, device] {
      c->dtypes = parse_cache_dtypes(*dtype, "cache --dtype");
      c->measure = !*no_measure;
      if (c->measure) c->device = usable_device(*device, "cache");
      const auto models = models_of(*o);
      std::cout << report::cache_report(report::cache_rows(models, *c), *c);
    });
  }
  {
    auto* bench = app.add_subcommand("bench", "Benchmarks of trained-model use");
    bench->require_subcommand(1);
    auto o = std::make_shared<FileOptions>();
    auto batch = std::make_shared<int64_t>(1), context = std::make_shared<int64_t>(512),
         prompt = std::make_shared<int64_t>(128), tokens = std::make_shared<int64_t>(32);
    auto dtype = std::make_shared<std::string>("f32");
    auto precision = std::make_shared<std::string>("fp32");
    auto device = std::make_shared<std::string>("cpu");
    auto paper = std::make_shared<std::string>(default_paper_tables() + "/decode.yaml");
    auto graph = std::make_shared<bool>(false);
    auto run = std::make_shared<BenchDecodeRunOptions>();
    auto* cmd = bench->add_subcommand("decode",
                                      "Decode tokens/s and peak memory per variant (random weights), beside the "
                                      "paper's Q-K=V gains; or a trained run's, per KV-cache dtype, with its "
                                      "validation perplexity (--run)");
    add_file_options(cmd, *o, /*required=*/false);
    auto* batch_opt =
        cmd->add_option("--batch", *batch, "sequences decoded together (default 1)")->check(CLI::PositiveNumber);
    auto* context_opt =
        cmd->add_option("--context", *context, "cache capacity per sequence (default 512; --run: its context)")
            ->check(CLI::PositiveNumber);
    auto* prompt_opt = cmd->add_option("--prompt", *prompt, "prefilled tokens (default 128; --run: what fits)")
                           ->check(CLI::PositiveNumber);
    auto* tokens_opt = cmd->add_option("--new-tokens", *tokens, "tokens decoded one at a time (default 32)")
                           ->check(CLI::PositiveNumber);
    auto* dtype_opt = cmd->add_option("--dtype", *dtype,
                                      "cache storage: f32 (default), bf16, f16 or int8 (a float32 scale per row); "
                                      "with --run a comma-separated list (default f32,bf16,int8)");
    cmd->add_option("--run", run->run,
                    "a trained language-model run folder: decode with its weights and report its validation "
                    "perplexity through the cache, per --dtype");
    cmd->add_option("--eval-batches", run->eval_batches,
                    "--run: validation batches scored (default the run's train.eval_batches)")
        ->check(CLI::PositiveNumber);
    cmd->add_option("--data-root", run->data_root, "--run: data.root, if the run's is not valid here");
    cmd->add_option("--token-data", run->token_data, "--run: the prepared token folder the run was trained on");
    cmd->add_option("--precision", *precision,
                    "fp32 (default) or bf16: the KV cache in bfloat16, read in place by attention (weights stay "
                    "float32)")
        ->excludes(dtype_opt);
    cmd->add_option("--paper", *paper, "the paper's decode measurements (default experiments/paper/decode.yaml)");
    cmd->add_flag("--graph", *graph,
                  "decode through the static step (positions read on the device), captured once as a CUDA graph on "
                  "a GPU and replayed per token; its first step is not timed");
    add_device_option(cmd, *device);
    cmd->callback([=] {
      if (!run->run.empty()) {
        check<ValueError>(o->args.empty(), "bench decode: give an experiment file or --run, not both");
        BenchDecodeRunOptions r = *run;
        r.device = *device;
        if (batch_opt->count() > 0) r.batch = *batch;
        if (context_opt->count() > 0) r.context = *context;
        if (prompt_opt->count() > 0) r.prompt = *prompt;
        if (tokens_opt->count() > 0) r.new_tokens = *tokens;
        if (dtype_opt->count() > 0) r.dtypes = parse_cache_dtypes(*dtype, "bench decode --dtype");
        return bench_decode_run(r);
      }
      check<ValueError>(!o->args.empty(), "bench decode: give a language-model experiment file, or --run RUN");
      check<ValueError>(*prompt + *tokens <= *context, "bench decode: --prompt ", *prompt, " + --new-tokens ", *tokens,
                        " exceed --context ", *context);
      const Device dev = usable_device(*device, "bench decode");
      const infer::DecodeDtypes dts = infer::decode_dtypes(infer::parse_decode_precision(*precision), dev);
      const DType dt = dtype_opt->count() > 0 ? parse_dtype(*dtype) : dts.cache;
      std::optional<report::PaperDecode> theirs;
      if (std::filesystem::exists(*paper)) theirs = report::load_paper_decode(*paper);
      const auto models = models_of(*o);
      std::printf("decode on %s: batch %lld, prompt %lld, %lld new tokens, cache of %lld positions (%s)\n",
                  dev.str().c_str(), static_cast<long long>(*batch), static_cast<long long>(*prompt),
                  static_cast<long long>(*tokens), static_cast<long long>(*context), dtype_name(dt));
      if (dtype_opt->count() == 0) std::printf("precision %s\n", dts.note.c_str());
      std::printf("\n%s", report::decode_header().c_str());
      std::vector<report::DecodeRow> rows;
      DType weights = DType::f32;
      bool graphed = false;
      for (const auto& m : models) {
        nn::GPTConfig c = m.config;
        c.context = std::max(c.context, *context);
        const infer::DecodeBenchResult r = infer::bench_decode(c, *batch, *context, *prompt, *tokens, dt, dev, *graph,
                                                               dtype_opt->count() > 0 ? DType::f32 : dts.weights);
        weights = r.weight_dtype;
        graphed = r.graphed;
        rows.push_back({m.variant, r.prefill_ms, r.decode_tokens_per_s, r.cache_bytes, r.peak_bytes, r.peak_rss_bytes,
                        r.rss_since_start});
        std::printf("%s", report::decode_row(rows.back()).c_str());
        std::fflush(stdout);
      }
      std::printf("\nran: weights %s, KV cache %s%s\n", dtype_name(weights), dtype_name(dt),
                  !*graph   ? ""
                  : graphed ? ", decode steps replayed as a CUDA graph"
                            : ", the static decode step (eager)");
      std::printf("%s", report::decode_comparison(rows, theirs ? &*theirs : nullptr).c_str());
      if (!theirs) std::printf("(no paper decode numbers: %s not found; pass --paper)\n", paper->c_str());
    });
  }
}

}  // namespace qkv::cli
