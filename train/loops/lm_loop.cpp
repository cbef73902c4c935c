#include "train/loops/lm_loop.h"

#include <cmath>
#include <cstdio>
#include <optional>

#include "autograd/autocast.h"
#include "autograd/grad_mode.h"
#include "io/fault_hook.h"
#include "train/dist/consistency.h"
#include "train/loops/host_values.h"
#include "train/loops/lm_checkpoint.h"
#include "train/loops/mfu.h"
#include "train/loops/run_log.h"
#include "train/loops/shared_checkpoint.h"
#include "train/loops/step_loop.h"

namespace qkv::loops {

using optim::LRSchedule;

namespace {
// Targets a batch's mean loss is over (those not kIgnoreTarget); targets on the CPU.
int64_t counted_targets(const Tensor& targets) {
  const int64_t* t = targets.data<int64_t>();
  int64_t n = 0;
  for (int64_t i = 0; i < targets.numel(); ++i) n += t[i] != data::kIgnoreTarget;
  return n;
}

// This rank's share of a batch's targets, which weighs its mean loss so that the sum over the
// ranks is the whole batch's mean: 1 in a single process.
double share_of_batch(dist::Communicator* comm, const Tensor& targets, const std::string& what) {
  if (!comm) return 1;
  const double mine = double(counted_targets(targets));
  const double all = comm->all_reduce({mine}, dist::ReduceOp::sum, what)[0];
  return all > 0 ? mine / all : 0;
}
}  // namespace

double evaluate_lm(nn::GPT& model, data::TokenBatches& data, int64_t batches, dist::Communicator* comm,
                   Precision precision) {
  NoGradGuard no_grad;
  AutocastGuard autocast(autocast_dtype_for(precision));
  model.eval();
  const Device device = model.wte.weight.device();
  data.seek({0, 0});
  DeviceSum sum(device);
  for (int64_t b = 0; b < batches; ++b) {
    Tensor x, y;
    data.next(x, y);
    const double share = share_of_batch(comm, y, cat("the validation batch sizes (batch ", b + 1, ")"));
    if (share > 0) sum.add(model.loss(x.to(device), y.to(device)), share);
  }
  double total = sum.value();
  if (comm) total = comm->all_reduce({total}, dist::ReduceOp::sum, "the validation loss")[0];
  return total / double(batches);
}

namespace {

// The language model's part of the training loop (step_loop.h): grad_accum micro-batches of
// token windows a step; a validation every eval_every steps and at the last, each followed by a
// checkpoint; lm_step records with tokens/s and MFU.
class LmRun final : public TrainingRun {
 public:
  LmRun(nn::GPT& model, Generator& gen, optim::Optimizer& opt, data::TokenBatches& train, data::TokenBatches& val,
        const LmTrainOptions& o, RunLog& log, LmTrainResult& result)
      : model_(model),
        gen_(gen),
        opt_(opt),
        train_(train),
        val_(val),
        o_(o),
        log_(log),
        result_(result),
        device_(model.wte.weight.device()),
        autocast_(autocast_dtype_for(o.precision)),
        world_(o.comm ? o.comm->size() : 1) {}

  bool next_step(int64_t step, std::vector<MicroBatch>& batches) override {
    if (step >= o_.steps) return false;
    for (int64_t a = 0; a < o_.grad_accum; ++a) {
      Tensor x, y;
      train_.next(x, y);
      seq_len_ = x.size(1);
      const double share = share_of_batch(o_.comm, y, cat("the batch sizes at step ", step + 1));
      // The job's tokens: every rank has as many rows.
      batches.push_back({x, y, share / double(o_.grad_accum), x.numel() * world_});
    }
    return true;
  }

  // model.loss (logits, then cross-entropy in float32) under the run's autocast; backward()
  // never autocasts (autograd/autocast.h).
  Tensor loss(const MicroBatch& b) override {
    AutocastGuard guard(autocast_);
    return model_.loss(b.inputs.to(device_), b.targets.to(device_));
  }

  MetricsRecord log_record(const LogWindow& w) override {
    const double tps = w.tokens_per_second();
    result_.logged_tokens.push_back(w.tokens);
    LmStepRecord r{w.step, w.skipped, w.mean_loss, w.lr, w.grad_norm, tps, std::nullopt};
    std::string note = cat(int64_t(tps), " tok/s");
    if (o_.peak_flops > 0) {
      r.mfu = mfu(tps);
      char text[32];
      std::snprintf(text, sizeof text, " MFU %.1f%%", 100 * *r.mfu);
      note += text;
    }
    log_.progress().set_note(note);
    return r;
  }

  bool evaluation_due(int64_t step) override { return step % o_.eval_every == 0 || step == o_.steps; }

  std::optional<Divergence> evaluate(int64_t step, const LoopState& loop) override {
    const double v = evaluate_lm(model_, val_, o_.eval_batches, o_.comm, o_.precision);
    fault_point("eval", step);
    model_.train();
    result_.evals.push_back({step, v, std::exp(v)});
    log_.record(result_.evals.back());
    // Weights gone non-finite through finite steps (e.g. an overflow): no checkpoint.
    if (!std::isfinite(v))
      return Divergence{step, 0, cat("non-finite validation loss (", describe_value(v), ") at step ", step)};
    char line[96];
    std::snprintf(line, sizeof line, "step %lld: val loss %.4f, ppl %.2f", static_cast<long long>(step), v,
                  std::exp(v));
    log_.progress().message(line);
    LmLoopState s;
    static_cast<LoopState&>(s) = loop;
    s.gen = gen_.state();
    s.cursor = train_.cursor();
    s.metrics_bytes = log_.metrics_bytes();
    if (dist::is_writer(o_.comm)) save_lm_checkpoint(model_, opt_.state_dict(), s, o_.dir, o_.keep_checkpoints);
    return std::nullopt;
  }

  // Model FLOP utilization per device at `tokens_per_second` for the whole job.
  double mfu(double tokens_per_second) const {
    return tokens_per_second / world_ * lm_train_flops_per_token(model_.config(), seq_len_) / o_.peak_flops;
  }
  int64_t seq_len() const { return seq_len_; }

 private:
  nn::GPT& model_;
  Generator& gen_;
  optim::Optimizer& opt_;
  data::TokenBatches &train_, &val_;
  const LmTrainOptions& o_;
  RunLog& log_;
  LmTrainResult& result_;
  const Device device_;
  const std::optional<DType> autocast_;
  const int world_;
  int64_t seq_len_ = 0;
};

}  // namespace

LmTrainResult train_lm(nn::GPT& model, Generator& gen, optim::Optimizer& opt, data::TokenBatches& train,
                       data::TokenBatches& val, const LRSchedule& schedule, const LmTrainOptions& o) {
  check<ValueError>(o.steps > 0 && o.grad_accum > 0 && o.eval_every > 0 && o.eval_batches > 0 && o.keep_checkpoints > 0,
                    "lm training: steps, grad_accum, eval_every, eval_batches and keep_checkpoints must be positive");
  const Device device = model.wte.weight.device();
  dist::Communicator* comm = o.comm;
  const bool writer = dist::is_writer(comm);
  const int rank = comm ? comm->rank() : 0, world = comm ? comm->size() : 1;
  check<ValueError>(train.options().batch % world == 0, "lm training: train.batch_size ", train.options().batch,
                    " does not split evenly over ", world,
                    " ranks (every rank takes the same rows of a batch): ", "make it a multiple of ", world,
                    " or start another number of ranks");
  StepSettings settings = step_settings(o);
  settings.skip_above = o.skip_grad_norm;
  settings.loss_scale_growth = o.loss_scale_growth;
  // The ranks' initial weights are checked identical before a checkpoint replaces them.
  if (comm) dist::check_identical(*comm, dist::digest(model.state_dict()), "initial weights");
  LmLoopState s;
  LmTrainResult result;
  const ResumedCheckpoint shared = o.resume ? resume_lm_checkpoint(o.dir, device, comm) : ResumedCheckpoint{};
  const std::optional<LmCheckpoint>& resumed = shared.checkpoint;
  if (resumed) {
    s = resumed->state;
    model.load(resumed->model_file.string());
    try {
      opt.load_state_dict(resumed->optimizer);
    } catch (const ValueError& e) {  // e.g. a checkpoint of another optimizer or model
      throw ValueError(cat(resumed->state_file.string(), ": the optimizer state does not fit this run: ", e.what()));
    }
    gen.set_state(dist::for_rank(s.gen, rank));  // the checkpoint holds rank 0's
    train.seek(s.cursor);
    result.resumed_from = s.step;
  } else {
    if (writer) remove_checkpoints(o.dir);
    gen.set_state(dist::for_rank(gen.state(), rank));  // weights drawn alike, dropout per rank
  }
  if (comm) comm->barrier("loading the checkpoint");  // before rank 0 writes the next one
  RunLog log({writer ? o.dir : std::filesystem::path(), o.label, o.steps, o.log_every,
              resumed ? std::optional<uint64_t>(s.metrics_bytes) : std::nullopt});
  Progress& progress = log.progress();
  progress.resume_at(s.step);
  if (o.peak_flops > 0)
    progress.message(cat("MFU against a peak of ", int64_t(o.peak_flops / 1e9), " GFLOP/s",
                         o.peak_source.empty() ? "" : cat(" (", o.peak_source, ")")));
  if (result.resumed_from > 0)
    progress.message(cat("resumed from step ", result.resumed_from,
                         shared.sent_to > 0 ? cat(" (rank 0 sent the checkpoint to ", shared.sent_to,
                                                  " rank(s) whose host does not see the run folder)")
                                            : std::string()));

  LmRun run(model, gen, opt, train, val, o, log, result);
  // The gradient norm sums the model's parameters in the model's order.
  StepLoop loop(opt, model.named_parameters(), schedule, {settings, o.steps, o.log_every, o.stop_after}, log, s);
  model.train();
  const LoopResult done = loop.run(run);
  result.diverged = done.diverged;
  result.seconds = done.seconds;
  if (comm) progress.message(loop.reduce_summary(done.train_seconds()));
  result.tokens_per_second = done.train_seconds() > 0 ? double(done.tokens) / done.train_seconds() : 0;
  if (o.peak_flops > 0 && run.seq_len() > 0) result.mfu = run.mfu(result.tokens_per_second);
  result.finished = !result.diverged && loop.state().step >= o.steps;
  result.steps = loop.state().step;
  result.skipped_steps = loop.state().skipped;
  result.loss_scale = loop.state().loss_scale;
  if (result.diverged) {
    result.final_val_loss = result.best_val_loss = NAN;
    progress.finish(cat("diverged at step ", result.diverged->step, ": ", result.diverged->reason));
    return result;
  }
  if (!result.evals.empty()) {
    result.final_val_loss = result.evals.back().val_loss;
    result.best_val_loss = result.evals.front().val_loss;
    for (const auto& e : result.evals) result.best_val_loss = std::min(result.best_val_loss, e.val_loss);
  }
  char summary[128];
  std::snprintf(summary, sizeof summary, "val loss %.4f (ppl %.2f), %.0f tokens/s", result.final_val_loss,
                std::exp(result.final_val_loss), result.tokens_per_second);
  progress.finish(summary);
  return result;
}

}  // namespace qkv::loops
