// qkvlab convert RUN --out DIR [--to VARIANT] [--method copy-k|average|svd] [--calibration-batches N]
//                  [--data-root DIR] [--token-data DIR]:
// turns a trained QKV (or GQA-g, MQA) language-model run into its K=V form (Q-K=V, Q-GQA-g,
// Q-MQA) and writes it as a run folder of its own (lab/infer/convert_run.h) that generate,
// analyze and model.init_from read. Prints the fit's error per layer and the validation
// perplexity before and after.
#include <cmath>
#include <cstdio>

#include "lab/cli/commands.h"
#include "lab/infer/convert_run.h"
#include "tensor/error.h"
#include "tensor/format.h"

namespace qkv::cli {

namespace {

struct ConvertOptions {
  infer::ConvertRequest request;
  std::string run, out, method = "svd";
  bool no_eval = false;
};

void convert(ConvertOptions o) {
  infer::ConvertRequest& r = o.request;
  r.run = o.run;
  r.out = o.out;
  r.method = infer::parse_convert_method(o.method, "convert --method");
  r.evaluate = !o.no_eval;
  const infer::ConvertedRun c = infer::convert_run(r);
  std::printf("convert: %s (%s, %s) -> %s (%s) by %s\n", o.run.c_str(), nn::variant_name(c.source_variant).c_str(),
              c.source_checkpoint.filename().string().c_str(), o.out.c_str(),
              nn::variant_name(c.target_variant).c_str(), o.method.c_str());
  if (c.calibration_tokens > 0)
    std::printf("  calibration: %s training tokens of %s\n", with_commas(c.calibration_tokens).c_str(),
                c.token_folder.string().c_str());
  if (!c.layer_error.empty()) {
    std::printf("  relative error of what scores and outputs see, per layer:");
    for (double e : c.layer_error) std::printf(" %.3g", e);
    std::printf("\n");
  }
  if (r.evaluate)
    std::printf("  validation perplexity: %.3f before, %.3f after (loss %.4f -> %.4f)\n", std::exp(c.source_val_loss),
                std::exp(c.val_loss), c.source_val_loss, c.val_loss);
  std::printf("  wrote %s and convert.json; fine-tune it with model.init_from=%s\n", c.checkpoint.string().c_str(),
              o.out.c_str());
}

}  // namespace

void add_convert_command(CLI::App& app) {
  auto o = std::make_shared<ConvertOptions>();
  auto* cmd = app.add_subcommand("convert", "Turn a trained QKV (or GQA) language-model run into its K=V form");
  cmd->footer(
      "Methods: copy-k (W_kv = W_k, biases too), average (W_kv = (W_k + W_v) / 2), svd (data-aware: per KV head the\n"
      "shared projection that best serves the scores, weighted by the group's queries, and the outputs, weighted\n"
      "by W_o, on the run's own training tokens; the per-head maps folded into W_q and W_o; closed form). The\n"
      "target keeps the source's KV heads: QKV -> Q-K=V, GQA-g -> Q-GQA-g, MQA -> Q-MQA. The output is a run\n"
      "folder (config.yaml, checkpoints/, convert.json) for generate, analyze, and model.init_from of a new run.");
  cmd->add_option("run", o->run, "the source: a language-model run folder (config.yaml and checkpoints/)")->required();
  cmd->add_option("--out", o->out, "the folder to write (new or empty)")->required();
  cmd->add_option("--to", o->request.to, "the target variant (default: the source's K=V form)");
  cmd->add_option("--method", o->method, "copy-k, average or svd (default svd)");
  cmd->add_option("--calibration-batches", o->request.calibration_batches,
                  "training batches (train.batch_size x model.context tokens) svd reads (default 16)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--no-eval", o->no_eval, "skip the validation perplexity before and after");
  cmd->add_option("--data-root", o->request.data_root, "data.root for the token data, if the run's is not valid here");
  cmd->add_option("--token-data", o->request.token_data,
                  "prepared token folder the run was trained on (default: the run's, <out>/tokens/<experiment>)");
  cmd->callback([o] { convert(*o); });
}

}  // namespace qkv::cli
