#include "train/loops/lm_loop.h"

#include <chrono>
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
#include "train/loops/optimizer_step.h"
#include "train/loops/preflight_step.h"
#include "train/loops/run_log.h"

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

LmTrainResult train_lm(nn::GPT& model, Generator& gen, optim::Optimizer& opt, data::TokenBatches& train,
                       data::TokenBatches& val, const LRSchedule& schedule, const LmTrainOptions& o) {
  check<ValueError>(o.steps > 0 && o.grad_accum > 0 && o.eval_every > 0 && o.eval_batches > 0 && o.keep_checkpoints > 0,
                    "lm training: steps, grad_accum, eval_every, eval_batches and keep_checkpoints must be positive");
  const Device device = model.wte.weight.device();
  // The forward passes (model.loss: logits, then cross-entropy in float32) under the run's
  // autocast; backward() calls never autocast (autograd/autocast.h).
  const std::optional<DType> autocast = autocast_dtype_for(o.precision);
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
  std::optional<LmCheckpoint> resumed = o.resume ? load_latest_lm_checkpoint(o.dir, device) : std::nullopt;
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
  if (result.resumed_from > 0) progress.message(cat("resumed from step ", result.resumed_from));
  fault_point("start", s.step);  // testing hook (io/fault_hook.h), as are the others below

  int64_t T = 0, tokens_timed = 0;
  const auto start = std::chrono::steady_clock::now();
  ThroughputWindow window(start);
  double eval_seconds = 0;
  // The gradient norm sums the model's parameters in the model's order.
  OptimizerStep opt_step(opt, model.named_parameters(), settings, s.loss_scale, s.nonfinite_streak);
  model.train();
  for (int64_t done = 0; s.step < o.steps && (o.stop_after == 0 || done < o.stop_after); ++done) {
    const double lr = schedule.lr_at(s.step);
    opt_step.begin(s.step, lr);
    DeviceSum loss_sum(device);
    int64_t step_tokens = 0;
    for (int64_t a = 0; a < o.grad_accum; ++a) {
      Tensor x, y;
      train.next(x, y);
      T = x.size(1);
      if (done == 0 && a == 0)
        preflight_step(opt, true, [&] {
          Tensor loss;
          {
            AutocastGuard guard(autocast);
            loss = model.loss(x.to(device), y.to(device));
          }
          loss.backward();
        });
      const double share = share_of_batch(comm, y, cat("the batch sizes at step ", s.step + 1));
      if (a == o.grad_accum - 1) opt_step.arm_reduce();  // the last micro-batch all-reduces
      if (share > 0) {
        Tensor loss;
        {
          AutocastGuard guard(autocast);
          loss = model.loss(x.to(device), y.to(device)) * (share / double(o.grad_accum));
        }
        opt_step.backward(loss);
        loss_sum.add(loss);
      }
      step_tokens += x.numel() * world;  // the job's tokens: every rank has as many rows
    }
    tokens_timed += step_tokens;
    window.add(step_tokens);
    const StepOutcome out = opt_step.finish(loss_sum.tensor(), log, 0);
    s.loss_scale = opt_step.loss_scale();
    s.nonfinite_streak = opt_step.nonfinite_streak();
    if (out.action == StepAction::stop) {
      result.diverged = opt_step.diverged();
      break;
    }
    const double step_loss = out.loss, norm = out.norm;
    s.skipped += !out.applied;
    ++s.step;
    s.tokens += step_tokens;
    if (out.counts_loss()) {  // a non-finite step's loss stays out of the logged mean
      s.log_loss_sum += step_loss;
      ++s.log_count;
    }
    if (s.step % o.log_every == 0 || s.step == o.steps) {
      const ThroughputWindow::Rate rate = window.take(std::chrono::steady_clock::now());
      const double tps = rate.per_second();
      result.logged_tokens.push_back(rate.tokens);
      LmStepRecord r{s.step, s.skipped, s.log_loss_sum / double(s.log_count), lr, norm, tps, std::nullopt};
      std::string note = cat(int64_t(tps), " tok/s");
      if (o.peak_flops > 0) {
        r.mfu = tps / world * lm_train_flops_per_token(model, T) / o.peak_flops;  // per device
        char mfu[32];
        std::snprintf(mfu, sizeof mfu, " MFU %.1f%%", 100 * *r.mfu);
        note += mfu;
      }
      progress.set_note(note);
      log.record(r);
      s.log_loss_sum = 0;
      s.log_count = 0;
    }
    progress.update(s.step, step_loss, lr);
    fault_point("train", s.step);
    if (s.step % o.eval_every == 0 || s.step == o.steps) {
      const auto eval_start = std::chrono::steady_clock::now();
      const double v = evaluate_lm(model, val, o.eval_batches, comm, o.precision);
      fault_point("eval", s.step);
      model.train();
      result.evals.push_back({s.step, v, std::exp(v)});
      log.record(result.evals.back());
      if (!std::isfinite(v)) {  // weights gone non-finite through finite steps (e.g. an overflow): no checkpoint
        result.diverged =
            Divergence{s.step, 0, cat("non-finite validation loss (", describe_value(v), ") at step ", s.step)};
        progress.message(cat("step ", s.step, ": run stopped as diverged: ", result.diverged->reason));
        eval_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - eval_start).count();
        break;
      }
      char line[96];
      std::snprintf(line, sizeof line, "step %lld: val loss %.4f, ppl %.2f", static_cast<long long>(s.step), v,
                    std::exp(v));
      progress.message(line);
      s.gen = gen.state();
      s.cursor = train.cursor();
      s.metrics_bytes = log.metrics_bytes();
      if (writer) save_lm_checkpoint(model, opt.state_dict(), s, o.dir, o.keep_checkpoints);
      const auto eval_end = std::chrono::steady_clock::now();
      window.restart(eval_end);  // throughput counts training time only
      eval_seconds += std::chrono::duration<double>(eval_end - eval_start).count();
    }
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (comm) progress.message(opt_step.reduce_summary(result.seconds - eval_seconds));
  const double train_seconds = result.seconds - eval_seconds;
  result.tokens_per_second = train_seconds > 0 ? double(tokens_timed) / train_seconds : 0;
  if (o.peak_flops > 0 && T > 0)
    result.mfu = result.tokens_per_second / world * lm_train_flops_per_token(model, T) / o.peak_flops;
  result.finished = !result.diverged && s.step >= o.steps;
  result.steps = s.step;
  result.skipped_steps = s.skipped;
  result.loss_scale = opt_step.loss_scale();
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
