// qkvlab generate RUN --prompt TEXT [--tokens N] [--temperature T] [--top-k K] [--seed S] [--device D]:
// text from a trained language-model run — its resolved config.yaml, its newest checkpoint and
// the GPT-2 tokenizer it was trained with — decoded incrementally over the KV cache. A checkpoint
// whose weights hold a NaN or inf is refused, naming the file and the tensor.
#include <cstdio>

#include "lab/cli/commands.h"
#include "lab/cli/device_option.h"
#include "lab/experiment/lm_run.h"
#include "lab/experiment/models.h"
#include "lab/experiment/result.h"
#include "lab/experiment/sweep.h"
#include "lab/infer/generate.h"
#include "lab/infer/run_model.h"
#include "tensor/error.h"
#include "train/data/tokens/bpe.h"

namespace qkv::cli {

namespace fs = std::filesystem;

namespace {

struct GenerateOptions {
  std::string run, prompt, data_root, tokenizer;
  Device device;
  int64_t tokens = 100;
  infer::SamplingOptions sampling;
};

void generate_text(const GenerateOptions& o) {
  const experiment::LmRunFiles f = experiment::open_lm_run(o.run, "generate");
  experiment::LmConfig c = f.config;
  if (!o.data_root.empty()) c.data.root = o.data_root;
  const data::Gpt2Tokenizer tokenizer = infer::load_run_tokenizer(c, o.tokenizer);

  const std::unique_ptr<nn::GPT> loaded = infer::load_run_model(f, c, o.device);
  const nn::GPT& model = *loaded;
  std::vector<int64_t> prompt;
  if (o.prompt.empty()) {
    prompt.push_back(tokenizer.eot());  // an empty prompt starts a new document
  } else {
    for (int32_t id : tokenizer.encode(o.prompt)) prompt.push_back(id);
  }
  infer::SamplingOptions s = o.sampling;
  s.vocab_limit = tokenizer.vocab_size();
  const int64_t room = model.config().context - int64_t(prompt.size());
  check<ValueError>(room > 0, "generate: the prompt is ", prompt.size(), " tokens; the model's context is ",
                    model.config().context);
  if (o.tokens > room)
    std::fprintf(stderr, "generate: %lld tokens requested, %lld fit in the context after the prompt\n",
                 static_cast<long long>(o.tokens), static_cast<long long>(room));
  std::fprintf(stderr, "%s, checkpoint %s\n", o.run.c_str(), f.checkpoint.filename().string().c_str());
  if (fs::exists(f.folder / "result.json")) {
    try {
      if (const auto d = experiment::read_result_file(f.folder / "result.json").diverged)
        std::fprintf(stderr, "note: the run diverged at step %lld (%s); its newest checkpoint is from before\n",
                     static_cast<long long>(d->step), d->reason.c_str());
    } catch (const IOError&) {}  // a damaged result does not stop generation from the checkpoint
  }
  std::fputs(o.prompt.c_str(), stdout);
  generate(model, prompt, std::min(o.tokens, room), s, tokenizer.eot(), [&](int64_t id) {
    const int32_t one = int32_t(id);
    std::fputs(tokenizer.decode(std::span<const int32_t>(&one, 1)).c_str(), stdout);
    std::fflush(stdout);
  });
  std::fputs("\n", stdout);
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto o = std::make_shared<GenerateOptions>();
  auto* cmd = app.add_subcommand("generate", "Sample text from a trained language-model run");
  cmd->add_option("run", o->run, "run folder (holds config.yaml and checkpoints/)")->required();
  cmd->add_option("--prompt", o->prompt, "text to continue (empty: start a new document)");
  cmd->add_option("--tokens", o->tokens, "tokens to generate (default 100)")->check(CLI::PositiveNumber);
  cmd->add_option("--temperature", o->sampling.temperature, "softmax temperature; 0 = greedy (default 1)")
      ->check(CLI::Range(0.0, 100.0));
  cmd->add_option("--top-k", o->sampling.top_k, "sample among the k likeliest tokens; 0 = all (default 0)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--seed", o->sampling.seed, "sampling seed (default 0)");
  cmd->add_option("--data-root", o->data_root, "data.root for the tokenizer, if the run's is not valid here");
  cmd->add_option(
      "--tokenizer", o->tokenizer,
      "GPT-2 tokenizer folder (overrides the run's): encoder.json + vocab.bpe, vocab.json + merges.txt or tokenizer.json");
  add_device_option(cmd, o->device, "generate");
  cmd->callback([o] { generate_text(*o); });
}

}  // namespace qkv::cli
