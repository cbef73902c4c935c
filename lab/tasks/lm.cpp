#include "lab/tasks/lm.h"

#include <cmath>
#include <fstream>

#include "train/data/token_batches.h"
#include "train/data/token_dataset.h"
#include "train/loops/lm_loop.h"
#include "lab/tasks/common.h"
#include "train/loops/mfu.h"

namespace qkv::tasks {

namespace fs = std::filesystem;
using experiment::Config;

nn::GPTConfig gpt_config(const Config& c) {
  nn::GPTConfig g;
  g.vocab = c.model.vocab;
  g.context = c.model.context;
  g.layers = c.model.layers;
  g.ffn = int64_t(c.model.ffn_mult * c.model.d_model + 0.5);
  g.dropout = c.model.dropout;
  g.attention = attention_config(c.model);
  g.attention.causal = true;
  return g;
}

namespace {
fs::path under_root(const Config& c, const std::string& p) {
  const fs::path path(p);
  return path.is_absolute() ? path : fs::path(c.data.root) / path;
}
}  // namespace

void check_lm_inputs(const Config& c) {
  if (!c.lm.tokens.empty()) {
    const fs::path folder = under_root(c, c.lm.tokens);
    check<IOError>(fs::is_directory(folder), "lm.tokens '", c.lm.tokens, "': no folder ", folder.string(),
                   " (make one with `qkvlab data prepare`, or set data.root=PATH)");
    return;
  }
  for (const auto& t : c.lm.text)
    check<IOError>(fs::is_regular_file(under_root(c, t)), "lm.text '", t, "': no file ", under_root(c, t).string(),
                   "; set data.root=PATH to the folder holding it");
  const fs::path tok = under_root(c, c.lm.tokenizer);
  for (const char* name : {"encoder.json", "vocab.bpe"})
    check<IOError>(fs::is_regular_file(tok / name), "lm.tokenizer '", c.lm.tokenizer, "': no ", (tok / name).string(),
                   " (GPT-2's encoder.json and vocab.bpe; set data.root=PATH or lm.tokenizer)");
}

fs::path lm_token_folder(const Config& c, const fs::path& out) {
  check_lm_inputs(c);
  if (!c.lm.tokens.empty()) return under_root(c, c.lm.tokens);
  data::PrepareOptions p;
  for (const auto& t : c.lm.text) p.inputs.push_back(under_root(c, t));
  p.tokenizer = under_root(c, c.lm.tokenizer);
  p.val_fraction = c.lm.val_fraction;
  p.out = out / "tokens" / c.name;
  return data::prepare_once(p);
}

namespace {
// Validation losses of the whole run (also the steps before a resume) from metrics.jsonl.
std::vector<std::pair<int64_t, double>> val_history(const fs::path& metrics) {
  std::vector<std::pair<int64_t, double>> out;
  std::ifstream f(metrics);
  std::string line;
  while (std::getline(f, line)) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("val_loss")) out.emplace_back(j["step"].get<int64_t>(), j["val_loss"].get<double>());
  }
  return out;
}
}  // namespace

nlohmann::json run_lm(const experiment::Run& run, const experiment::RunDir& dir, const fs::path& out, bool resume) {
  const Config& c = run.config;
  const Device device = prepare_device(c);
  const fs::path tokens = lm_token_folder(c, out);
  data::TokenBatchOptions tb;
  tb.batch = c.train.batch_size;
  tb.context = c.model.context;
  tb.sampling = c.lm.sampling == experiment::LmSamplingName::packed ? data::LmSampling::packed : data::LmSampling::per_document;
  tb.loss_on_padding = c.lm.loss_on_padding;
  tb.seed = uint64_t(run.seed) + 0x9e3779b97f4a7c15ull;   // a stream apart from the init's
  data::TokenBatches train(tokens, "train", tb);
  tb.batch = c.train.eval_batch_size;
  tb.shuffle = false;
  data::TokenBatches val(tokens, "val", tb);

  Generator gen(uint64_t(run.seed));
  nn::GPT model(gpt_config(c), &gen);
  model.to(device);
  const int64_t steps = c.train.steps;
  const int64_t warmup = c.schedule.warmup_steps > 0 ? c.schedule.warmup_steps : int64_t(c.schedule.warmup * double(steps));
  std::unique_ptr<optim::LRSchedule> schedule;
  if (c.schedule.name == experiment::ScheduleName::constant) schedule = std::make_unique<optim::ConstantLR>(c.optim.lr);
  else schedule = std::make_unique<optim::CosineWarmup>(c.optim.lr, warmup, steps, c.schedule.min_lr);

  loops::LmTrainOptions o;
  o.steps = steps;
  o.grad_accum = c.train.grad_accum;
  o.eval_every = c.train.eval_every;
  o.eval_batches = std::min<int64_t>(c.train.eval_batches, val.windows_per_epoch() / std::max<int64_t>(1, tb.batch));
  check<ValueError>(o.eval_batches >= 1, "the validation split of ", tokens.string(), " holds fewer than one batch of ",
                    tb.batch, " windows of ", c.model.context, " tokens; lower train.eval_batch_size or model.context");
  o.keep_checkpoints = c.train.keep_checkpoints;
  o.log_every = c.train.log_every;
  o.adam = adam_options(c.optim);
  o.clip = c.optim.clip;
  o.skip_grad_norm = c.train.skip_grad_norm;
  o.peak_flops = c.train.peak_tflops > 0 ? c.train.peak_tflops * 1e12 : loops::measure_gemm_flops(device);
  o.dir = dir.path();
  o.resume = resume;
  o.label = cat(c.name, " ", run.id);
  const loops::LmTrainResult r = loops::train_lm(model, gen, train, val, *schedule, o);

  const auto history = val_history(dir.path() / "metrics.jsonl");
  double best = INFINITY;
  for (const auto& h : history) best = std::min(best, h.second);
  const double final_loss = history.empty() ? r.final_val_loss : history.back().second;
  nn::AttentionConfig qkv = gpt_config(c).attention;
  qkv.sharing = nn::Sharing::qkv;
  qkv.kv_heads = 0;
  const int64_t cache = nn::KVCache::bytes_per_token(gpt_config(c).attention, c.model.layers, DType::bf16);
  const int64_t cache_qkv = nn::KVCache::bytes_per_token(qkv, c.model.layers, DType::bf16);
  nlohmann::json point = nlohmann::json::object(), evals = nlohmann::json::array();
  for (const auto& [k, v] : run.point) point[k] = v;
  for (const auto& [step, loss] : history) evals.push_back({{"step", step}, {"val_loss", loss}});
  const nlohmann::json result = {{"experiment", c.name},
                                 {"task", "lm"},
                                 {"run", run.id},
                                 {"variant", run.variant.name},
                                 {"seed", run.seed},
                                 {"point", point},
                                 {"params", model.num_parameters()},
                                 {"val_loss", final_loss},
                                 {"val_ppl", std::exp(final_loss)},
                                 {"best_val_loss", best},
                                 {"steps", r.steps},
                                 {"skipped_steps", r.skipped_steps},
                                 {"resumed_from", r.resumed_from},
                                 {"tokens_per_s", r.tokens_per_second},
                                 {"mfu", r.mfu},
                                 {"peak_flops", o.peak_flops},
                                 {"seconds", r.seconds},
                                 {"kv_cache_bytes_per_token_bf16", cache},
                                 {"kv_cache_reduction", 1.0 - double(cache) / double(cache_qkv)},
                                 {"evals", evals},
                                 {"summary", cat("val ppl ", std::exp(final_loss))}};
  dir.write_result(result);
  return result;
}

}  // namespace qkv::tasks
