#include "lab/tasks/lm.h"

#include <cmath>
#include <cstdio>

#include "lab/experiment/models.h"
#include "lab/tasks/common.h"
#include "train/data/tokens/token_dataset.h"
#include "train/data/tokens/tokenizer_files.h"
#include "train/loops/lm_checkpoint.h"
#include "train/loops/lm_loop.h"
#include "train/loops/mfu.h"
#include "train/loops/run_log.h"

namespace qkv::tasks {

namespace fs = std::filesystem;
using experiment::LmConfig;

namespace {
fs::path under_root(const LmConfig& c, const std::string& p) {
  const fs::path path(p);
  return path.is_absolute() ? path : fs::path(c.data.root) / path;
}

data::LmSampling sampling_of(experiment::LmSamplingName s) {
  switch (s) {
    case experiment::LmSamplingName::packed: return data::LmSampling::packed;
    case experiment::LmSamplingName::per_document: return data::LmSampling::per_document;
    case experiment::LmSamplingName::official: return data::LmSampling::official;
  }
  throw ValueError("unknown lm.sampling");
}
}  // namespace

std::string lm_protocol(const LmConfig& c) {
  const int64_t T = c.model.context;
  std::string s = cat(c.train.steps, " steps of ", c.train.batch_size, " x ", c.train.grad_accum, " sequences; ");
  switch (c.lm.sampling) {
    case experiment::LmSamplingName::packed: s += cat("packed windows of ", T + 1, " tokens, ", T, " targets"); break;
    case experiment::LmSamplingName::per_document:
      s += cat("per_document: a document from its end-of-text, cut to ", T + 1, " tokens, padded; ", T,
               " targets, padding ", c.lm.loss_on_padding ? "counted" : "masked");
      break;
    case experiment::LmSamplingName::official:
      s += cat("official: a document without a leading separator, cut to ", T + 1, " tokens, padded with end-of-text; ",
               T - 1, " targets per row, padding counted");
      break;
  }
  s += cat("; validation: ",
           c.lm.val_text.empty() && c.lm.tokens.empty() ? "the last fraction of lm.text" : "the val split",
           ", its first ", c.train.eval_batches, " batches of ", c.train.eval_batch_size, " in order every ",
           c.train.eval_every, " steps");
  // cat() prints doubles as %g does: "0.1", "100".
  s += cat("; AdamW weight decay ", c.optim.weight_decay, " on ",
           c.optim.decay == optim::DecayRule::all ? "all parameters" : "matrices");
  if (c.train.skip_grad_norm > 0) s += cat("; steps with gradient norm > ", c.train.skip_grad_norm, " made again");
  const loops::PrecisionChoice p = loops::choose_precision(c.train.precision, c.train.device);
  s += cat("; precision ", loops::precision_name(p.requested));
  if (p.used != p.requested) s += cat(" (computed in ", loops::precision_name(p.used), ")");
  return s;
}

fs::path init_weights_file(const LmConfig& c) {
  const fs::path p(c.model.init_from);
  const std::string key = cat("model.init_from '", c.model.init_from, "'");
  check<IOError>(!p.empty(), key, ": no weights named");
  if (fs::is_directory(p)) {
    const auto checkpoint = loops::latest_checkpoint(p);
    check<IOError>(checkpoint.has_value(), key, ": the folder ", p.string(),
                   " holds no checkpoint (expected checkpoints/step_N.safetensors with its .state.safetensors, as "
                   "`qkvlab run` and `qkvlab convert` write them)");
    return *checkpoint;
  }
  check<IOError>(fs::is_regular_file(p), key, ": no such file or folder (expected a run folder or a .safetensors ",
                 "file, relative to the working directory)");
  return p;
}

void check_lm_inputs(const LmConfig& c) {
  if (!c.model.init_from.empty()) init_weights_file(c);
  if (!c.lm.tokens.empty()) {
    const fs::path folder = under_root(c, c.lm.tokens);
    check<IOError>(fs::is_directory(folder), "lm.tokens '", c.lm.tokens, "': no folder ", folder.string(),
                   " (make one with `qkvlab data prepare`, or set data.root=PATH)");
    return;
  }
  check<IOError>(!c.lm.text.empty(), "lm.text and lm.tokens are both empty: experiment '", c.name,
                 "' has no data of its own (an imported model?); give lm.text (text files) or lm.tokens (a folder ",
                 "made by `qkvlab data prepare`)");
  for (const auto* list : {&c.lm.text, &c.lm.val_text})
    for (const auto& t : *list)
      check<IOError>(fs::is_regular_file(under_root(c, t)), list == &c.lm.text ? "lm.text '" : "lm.val_text '", t,
                     "': no file ", under_root(c, t).string(), "; set data.root=PATH to the folder holding it");
  const fs::path tok = under_root(c, c.lm.tokenizer);
  try {
    (void)data::read_tokenizer_files(tok);
  } catch (const IOError& e) {
    throw IOError(cat("lm.tokenizer '", c.lm.tokenizer, "': ", e.what(), " (set data.root=PATH or lm.tokenizer)"));
  }
}

fs::path lm_token_folder(const LmConfig& c, const fs::path& out) {
  check_lm_inputs(c);
  if (!c.lm.tokens.empty()) return under_root(c, c.lm.tokens);
  data::PrepareOptions p;
  for (const auto& t : c.lm.text) p.inputs.push_back(under_root(c, t));
  for (const auto& t : c.lm.val_text) p.val_inputs.push_back(under_root(c, t));
  p.tokenizer = under_root(c, c.lm.tokenizer);
  p.val_fraction = c.lm.val_text.empty() ? c.lm.val_fraction : 0.0;  // validation files: no fraction cut
  p.out = out / "tokens" / c.name;
  return data::prepare_once(p);
}

fs::path run_token_folder(const experiment::LmRunFiles& f, const LmConfig& c, const std::string& token_data,
                          const std::string& command) {
  if (!token_data.empty()) return token_data;
  if (!c.lm.tokens.empty()) return lm_token_folder(c, {});  // lm.tokens under data.root
  check<IOError>(!c.lm.text.empty(), command, ": ", f.folder.string(),
                 " has no token data of its own (an imported model?); give --token-data DIR, a folder made by ",
                 "`qkvlab data prepare --tokenizer ", c.lm.tokenizer, " FILES --out DIR`");
  const auto root = experiment::run_output_root(f);
  check<IOError>(root.has_value(), command, ": ", f.folder.string(),
                 " does not end in <experiment>/<run id> = ", c.name, "/", f.run.id,
                 " (a moved run?), so its token data cannot be found; give --token-data ",
                 "DIR, the prepared folder it was trained on (<out>/tokens/", c.name, ")");
  const fs::path prepared = *root / "tokens" / c.name;
  if (fs::is_regular_file(prepared / "dataset.json")) return prepared;
  return lm_token_folder(c, *root);
}

experiment::ResultRow run_lm(const experiment::Run& run, const experiment::RunDir& dir, const fs::path& out,
                             bool resume, dist::Communicator* comm) {
  const auto& c = run.config.as<LmConfig>();
  const Device device = prepare_device(c.train, comm);
  // Rank 0 prepares the token data (when not up to date); the others then find it ready.
  if (!dist::is_writer(comm)) comm->barrier("rank 0 preparing the token data");
  const fs::path tokens = lm_token_folder(c, out);
  if (comm && dist::is_writer(comm)) comm->barrier("rank 0 preparing the token data");
  data::TokenBatchOptions tb;
  tb.batch = c.train.batch_size;
  tb.context = c.model.context;
  tb.sampling = sampling_of(c.lm.sampling);
  tb.loss_on_padding = c.lm.loss_on_padding;
  tb.seed = shuffle_seed(run);
  tb.shard = dist::shard_of(comm);
  data::TokenBatches train(tokens, "train", tb);
  tb.batch = c.train.eval_batch_size;
  tb.shuffle = false;
  data::TokenBatches val(tokens, "val", tb);

  Generator gen(uint64_t(run.seed));
  const nn::GPTConfig config = experiment::gpt_config(c, run.variant);
  nn::GPT model(config, &gen);
  if (!c.model.init_from.empty()) {  // a resumed run then restores its own checkpoint over these
    const fs::path weights = init_weights_file(c);
    try {
      model.load(weights.string());
    } catch (const Error& e) { throw IOError(cat("model.init_from '", c.model.init_from, "': ", e.what())); }
    if (dist::is_writer(comm)) std::printf("  model.init_from: starting from %s\n", weights.string().c_str());
  }
  model.to(device);
  const auto schedule = optim::make_schedule(schedule_spec(c.schedule, c.optim.lr, c.train.steps));

  loops::LmTrainOptions o;
  o.steps = c.train.steps;
  o.grad_accum = c.train.grad_accum;
  o.eval_every = c.train.eval_every;
  // Validation reads the split from its start, in order (val does not shuffle): the same batches
  // every time, never wrapping around into a second pass.
  o.eval_batches = std::min<int64_t>(c.train.eval_batches, val.windows_per_epoch() / std::max<int64_t>(1, tb.batch));
  check<ValueError>(o.eval_batches >= 1, "the validation split of ", tokens.string(), " holds fewer than one batch of ",
                    tb.batch, " samples of ", c.model.context, " tokens; lower train.eval_batch_size or model.context");
  if (o.eval_batches < c.train.eval_batches)
    std::printf("train.eval_batches: %d asked, the validation split of %s holds %lld batches of %lld; using those\n",
                c.train.eval_batches, tokens.string().c_str(), static_cast<long long>(o.eval_batches),
                static_cast<long long>(tb.batch));
  o.keep_checkpoints = c.train.keep_checkpoints;
  o.log_every = c.train.log_every;
  const loops::PrecisionChoice precision = loops::choose_precision(c.train.precision, device);
  o.precision = precision.used;
  o.clip = c.optim.clip;
  o.skip_grad_norm = c.train.skip_grad_norm;
  o.nonfinite = nonfinite_policy(c.train);
  const loops::PeakFlops peak = loops::peak_flops(device, precision.used, c.train.peak_tflops);
  o.peak_flops = peak.flops;
  o.peak_source = peak.source;
  o.dir = dir.path();
  o.resume = resume;
  o.label = cat(c.name, " ", run.id);
  o.comm = comm;
  o.bucket_mb = c.train.bucket_mb;
  const std::unique_ptr<optim::Optimizer> optimizer = make_optimizer(c.optim, model.named_parameters(), c.optim.decay);
  const loops::LmTrainResult r = loops::train_lm(model, gen, *optimizer, train, val, *schedule, o);
  if (!dist::is_writer(comm)) return {};  // rank 0 reads the run's files and writes its result

  // The validation curve of the whole run, also the steps before a resume.
  // A validation that was not finite (it stopped the run) stays in metrics.jsonl, not in the curve.
  std::vector<loops::EvalRecord> evals;
  for (const auto& e :
       loops::records_of<loops::EvalRecord>(loops::read_metrics(loops::RunLog::metrics_file(dir.path()))))
    if (std::isfinite(e.val_loss)) evals.push_back(e);
  double best = INFINITY;
  for (const auto& e : evals) best = std::min(best, e.val_loss);
  if (r.diverged) best = NAN;  // a diverged run has no final metrics (result.h)
  const double final_loss = r.diverged ? NAN : evals.empty() ? r.final_val_loss : evals.back().val_loss;
  nn::AttentionConfig qkv = config.attention;  // the reference: plain QKV softmax attention
  qkv.sharing = nn::Sharing::qkv;
  qkv.kv_heads = 0;
  qkv.v_rank = 0;
  qkv.linear = false;
  const int64_t cache = nn::KVCache::bytes_per_token(config.attention, c.model.layers, DType::bf16);
  const int64_t cache_qkv = nn::KVCache::bytes_per_token(qkv, c.model.layers, DType::bf16);

  experiment::ResultRow row;
  row.experiment = c.name;
  row.kind = experiment::TaskKind::lm;
  row.task = "lm";
  row.run = run.id;
  row.variant = nn::variant_name(run.variant);
  row.seed = run.seed;
  row.point = run.point;
  row.scale = run.scale;
  row.params = model.num_parameters();
  row.metrics = experiment::LmResult{final_loss,
                                     std::exp(final_loss),
                                     best,
                                     r.steps,
                                     r.skipped_steps,
                                     r.resumed_from,
                                     r.tokens_per_second,
                                     r.mfu,
                                     o.peak_flops,
                                     r.seconds,
                                     cache,
                                     1.0 - double(cache) / double(cache_qkv),
                                     evals};
  auto& lm = std::get<experiment::LmResult>(row.metrics);
  lm.model = experiment::LmShape{config.layers,
                                 config.d_model(),
                                 config.attention.heads,
                                 config.ffn_width(),
                                 config.context,
                                 config.vocab,
                                 config.attention.rope ? "llama" : "gpt"};
  if (!r.diverged)
    lm.train_loss = experiment::last_interval_train_loss(loops::read_metrics(loops::RunLog::metrics_file(dir.path())));
  row.diverged = r.diverged;
  row.precision = precision;
  dir.write_result(row);
  return row;
}

}  // namespace qkv::tasks
