#include "train/loops/lm_loop.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "autograd/grad_mode.h"
#include "tensor/safetensors.h"
#include "train/optim/adam.h"
#include "train/optim/clip.h"
#include "train/loops/mfu.h"
#include "train/loops/progress.h"

namespace qkv::loops {

using optim::AdamOptions;
using optim::AdamW;
using optim::LRSchedule;
using optim::NamedTensors;
using optim::clip_grad_norm;

namespace fs = std::filesystem;

namespace {

// AdamW in two groups, as GPT training does it: matrices and embeddings decay, biases and
// LayerNorm parameters do not.
struct LmOptimizer {
  NamedTensors all, decayed, plain;
  std::unique_ptr<AdamW> decay, no_decay;

  LmOptimizer(const NamedTensors& params, const LmTrainOptions& o) : all(params) {
    for (const auto& p : params) (p.second.dim() >= 2 ? decayed : plain).push_back(p);
    AdamOptions a = o.adam;
    decay = std::make_unique<AdamW>(decayed, a);
    a.weight_decay = 0;
    no_decay = std::make_unique<AdamW>(plain, a);
  }
  void set_lr(double lr) {
    decay->set_lr(lr);
    no_decay->set_lr(lr);
  }
  void step() {
    decay->step();
    no_decay->step();
  }
  void zero_grad() {
    decay->zero_grad();
    no_decay->zero_grad();
  }
  NamedTensors state_dict() const {
    NamedTensors out;
    for (auto& [n, t] : decay->state_dict()) out.emplace_back("decay." + n, t);
    for (auto& [n, t] : no_decay->state_dict()) out.emplace_back("no_decay." + n, t);
    return out;
  }
  void load_state_dict(const std::map<std::string, Tensor>& state) {
    NamedTensors d, p;
    for (const auto& [n, t] : state) {
      if (n.starts_with("decay.")) d.emplace_back(n.substr(6), t);
      else if (n.starts_with("no_decay.")) p.emplace_back(n.substr(9), t);
    }
    decay->load_state_dict(d);
    no_decay->load_state_dict(p);
  }
};

// Doubles in checkpoint metadata are written in hex so they come back bit for bit.
std::string exact(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", x);
  return buf;
}
double parse_exact(const std::string& s, const std::string& file, const std::string& key) {
  char* end = nullptr;
  const double x = std::strtod(s.c_str(), &end);
  check<IOError>(!s.empty() && end && *end == '\0', file, ": metadata '", key, "' is not a number: '", s, "'");
  return x;
}

fs::path checkpoint_dir(const fs::path& run) { return run / "checkpoints"; }
std::string step_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step_%08lld", static_cast<long long>(step));
  return buf;
}
fs::path model_file(const fs::path& run, int64_t step) { return checkpoint_dir(run) / (step_name(step) + ".safetensors"); }
fs::path state_file(const fs::path& run, int64_t step) { return checkpoint_dir(run) / (step_name(step) + ".state.safetensors"); }

// Steps with a complete checkpoint (a state file, written last, beside its model file), oldest first.
std::vector<int64_t> checkpoint_steps(const fs::path& run) {
  std::vector<int64_t> steps;
  if (!fs::is_directory(checkpoint_dir(run))) return steps;
  for (const auto& e : fs::directory_iterator(checkpoint_dir(run))) {
    const std::string name = e.path().filename().string();
    long long step = 0;
    char tail[32] = {};
    if (std::sscanf(name.c_str(), "step_%lld.state.safetensor%1s", &step, tail) == 2 && tail[0] == 's' &&
        fs::exists(model_file(run, step)))
      steps.push_back(step);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

// What a checkpoint restores besides the model and optimizer.
struct LoopState {
  int64_t step = 0, skipped = 0, tokens = 0, log_count = 0;
  double log_loss_sum = 0;
  uint64_t metrics_bytes = 0;
  GeneratorState gen;
  data::TokenCursor cursor;
};

safetensors::Metadata to_metadata(const LoopState& s) {
  return {{"step", std::to_string(s.step)},
          {"skipped_steps", std::to_string(s.skipped)},
          {"tokens", std::to_string(s.tokens)},
          {"log_loss_sum", exact(s.log_loss_sum)},
          {"log_count", std::to_string(s.log_count)},
          {"metrics_bytes", std::to_string(s.metrics_bytes)},
          {"generator_seed", std::to_string(s.gen.seed)},
          {"generator_offset", std::to_string(s.gen.offset)},
          {"data_epoch", std::to_string(s.cursor.epoch)},
          {"data_index", std::to_string(s.cursor.index)}};
}

LoopState from_metadata(const safetensors::Metadata& m, const std::string& file) {
  auto get = [&](const std::string& key) -> const std::string& {
    auto it = m.find(key);
    check<IOError>(it != m.end(), file, ": training state lacks metadata '", key, "'");
    return it->second;
  };
  auto integer = [&](const std::string& key) {
    const std::string& v = get(key);
    check<IOError>(!v.empty() && v.find_first_not_of("0123456789") == std::string::npos, file, ": metadata '", key,
                   "' is not a non-negative integer: '", v, "'");
    return std::stoull(v);
  };
  LoopState s;
  s.step = int64_t(integer("step"));
  s.skipped = int64_t(integer("skipped_steps"));
  s.tokens = int64_t(integer("tokens"));
  s.log_loss_sum = parse_exact(get("log_loss_sum"), file, "log_loss_sum");
  s.log_count = int64_t(integer("log_count"));
  s.metrics_bytes = integer("metrics_bytes");
  s.gen = {integer("generator_seed"), integer("generator_offset")};
  s.cursor = {int64_t(integer("data_epoch")), int64_t(integer("data_index"))};
  return s;
}

void save_checkpoint(const nn::GPT& model, const LmOptimizer& opt, const LoopState& s, const fs::path& run,
                     int64_t keep) {
  fs::create_directories(checkpoint_dir(run));
  model.save(model_file(run, s.step).string(), {{"step", std::to_string(s.step)}});
  safetensors::save(state_file(run, s.step).string(), opt.state_dict(), to_metadata(s));   // last: marks it complete
  std::vector<int64_t> steps = checkpoint_steps(run);
  for (size_t i = 0; i + size_t(keep) < steps.size(); ++i) {
    fs::remove(state_file(run, steps[i]));
    fs::remove(model_file(run, steps[i]));
  }
}

void append_line(const fs::path& path, const nlohmann::json& j) {
  std::ofstream f(path, std::ios::app);
  check<IOError>(bool(f), "cannot append to ", path.string());
  f << j.dump() << "\n";
  check<IOError>(bool(f.flush()), "cannot write ", path.string());
}

uint64_t file_size_or_zero(const fs::path& p) { return fs::exists(p) ? fs::file_size(p) : 0; }

}  // namespace

std::optional<fs::path> latest_checkpoint(const fs::path& run_dir) {
  const auto steps = checkpoint_steps(run_dir);
  if (steps.empty()) return std::nullopt;
  return model_file(run_dir, steps.back());
}

double evaluate_lm(nn::GPT& model, data::TokenBatches& data, int64_t batches) {
  NoGradGuard no_grad;
  model.eval();
  const Device device = model.wte.weight.device();
  data.seek({0, 0});
  double sum = 0;
  for (int64_t b = 0; b < batches; ++b) {
    Tensor x, y;
    data.next(x, y);
    sum += model.loss(x.to(device), y.to(device)).item<float>();
  }
  return sum / double(batches);
}

LmTrainResult train_lm(nn::GPT& model, Generator& gen, data::TokenBatches& train, data::TokenBatches& val,
                       const LRSchedule& schedule, const LmTrainOptions& o) {
  check<ValueError>(o.steps > 0 && o.grad_accum > 0 && o.eval_every > 0 && o.eval_batches > 0 && o.keep_checkpoints > 0,
                    "lm training: steps, grad_accum, eval_every, eval_batches and keep_checkpoints must be positive");
  const Device device = model.wte.weight.device();
  const fs::path metrics = o.dir / "metrics.jsonl", log = o.dir / "train.log";
  LmOptimizer opt(model.named_parameters(), o);
  LoopState s;
  LmTrainResult result;
  const auto steps = checkpoint_steps(o.dir);
  if (o.resume && !steps.empty()) {
    const fs::path state_path = state_file(o.dir, steps.back());
    safetensors::Metadata meta;
    auto state = safetensors::load(state_path.string(), device, &meta);
    s = from_metadata(meta, state_path.string());
    model.load(model_file(o.dir, s.step).string());
    opt.load_state_dict(state);
    gen.set_state(s.gen);
    train.seek(s.cursor);
    // The records after the checkpoint are rewritten by the resumed steps.
    check<IOError>(file_size_or_zero(metrics) >= s.metrics_bytes, metrics.string(), " is shorter than checkpoint ",
                   state_path.string(), " recorded (", s.metrics_bytes, " bytes)");
    if (fs::exists(metrics)) fs::resize_file(metrics, s.metrics_bytes);
    result.resumed_from = s.step;
  } else {
    fs::create_directories(o.dir);
    fs::remove_all(checkpoint_dir(o.dir));
    fs::remove(metrics);
    fs::remove(log);
  }
  std::FILE* log_file = std::fopen(log.string().c_str(), "a");
  check<IOError>(log_file != nullptr, "cannot open ", log.string());
  Progress progress(o.label, o.steps, o.log_every, stdout, log_file);
  progress.resume_at(s.step);
  if (o.peak_flops > 0) progress.message(cat("MFU against a peak of ", int64_t(o.peak_flops / 1e9), " GFLOP/s"));
  if (result.resumed_from > 0) progress.message(cat("resumed from step ", result.resumed_from));

  int64_t T = 0, tokens_timed = 0;
  const auto start = std::chrono::steady_clock::now();
  auto last_log = start;
  int64_t tokens_at_last_log = 0;
  double eval_seconds = 0;
  model.train();
  for (int64_t done = 0; s.step < o.steps && (o.stop_after == 0 || done < o.stop_after); ++done) {
    const double lr = schedule.lr_at(s.step);
    opt.set_lr(lr);
    opt.zero_grad();
    double step_loss = 0;
    int64_t step_tokens = 0;
    for (int64_t a = 0; a < o.grad_accum; ++a) {
      Tensor x, y;
      train.next(x, y);
      T = x.size(1);
      Tensor loss = model.loss(x.to(device), y.to(device)) * (1.0 / double(o.grad_accum));
      loss.backward();
      step_loss += loss.item<float>();
      step_tokens += x.numel();
    }
    tokens_timed += step_tokens;
    const double norm = clip_grad_norm(opt.all, o.clip > 0 ? o.clip : INFINITY);
    const bool skip = !std::isfinite(norm) || (o.skip_grad_norm > 0 && norm > o.skip_grad_norm);
    if (skip) ++s.skipped;
    else opt.step();
    ++s.step;
    s.tokens += step_tokens;
    s.log_loss_sum += step_loss;
    ++s.log_count;
    if (s.step % o.log_every == 0 || s.step == o.steps) {
      const auto now = std::chrono::steady_clock::now();
      const double secs = std::chrono::duration<double>(now - last_log).count();
      const double tps = secs > 0 ? double(tokens_timed - tokens_at_last_log) / secs : 0;
      nlohmann::json j{{"step", s.step},       {"loss", s.log_loss_sum / double(s.log_count)},
                       {"lr", lr},             {"grad_norm", norm},
                       {"skipped", s.skipped}, {"tokens_per_s", tps}};
      std::string note = cat(int64_t(tps), " tok/s");
      if (o.peak_flops > 0) {
        j["mfu"] = tps * lm_train_flops_per_token(model, T) / o.peak_flops;
        char mfu[32];
        std::snprintf(mfu, sizeof mfu, " MFU %.1f%%", 100 * j["mfu"].get<double>());
        note += mfu;
      }
      progress.set_note(note);
      append_line(metrics, j);
      s.log_loss_sum = 0;
      s.log_count = 0;
      last_log = now;
      tokens_at_last_log = tokens_timed;
    }
    progress.update(s.step, step_loss, lr);
    if (s.step % o.eval_every == 0 || s.step == o.steps) {
      const auto eval_start = std::chrono::steady_clock::now();
      const double v = evaluate_lm(model, val, o.eval_batches);
      model.train();
      append_line(metrics, {{"step", s.step}, {"val_loss", v}, {"val_ppl", std::exp(v)}});
      result.evals.push_back({s.step, v});
      char line[96];
      std::snprintf(line, sizeof line, "step %lld: val loss %.4f, ppl %.2f", static_cast<long long>(s.step), v, std::exp(v));
      progress.message(line);
      s.gen = gen.state();
      s.cursor = train.cursor();
      s.metrics_bytes = file_size_or_zero(metrics);
      save_checkpoint(model, opt, s, o.dir, o.keep_checkpoints);
      last_log = std::chrono::steady_clock::now();   // throughput counts training time only
      eval_seconds += std::chrono::duration<double>(last_log - eval_start).count();
    }
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double train_seconds = result.seconds - eval_seconds;
  result.tokens_per_second = train_seconds > 0 ? double(tokens_timed) / train_seconds : 0;
  if (o.peak_flops > 0 && T > 0) result.mfu = result.tokens_per_second * lm_train_flops_per_token(model, T) / o.peak_flops;
  result.finished = s.step >= o.steps;
  result.steps = s.step;
  result.skipped_steps = s.skipped;
  if (!result.evals.empty()) {
    result.final_val_loss = result.evals.back().val_loss;
    result.best_val_loss = result.evals.front().val_loss;
    for (const auto& e : result.evals) result.best_val_loss = std::min(result.best_val_loss, e.val_loss);
  }
  char summary[128];
  std::snprintf(summary, sizeof summary, "val loss %.4f (ppl %.2f), %.0f tokens/s", result.final_val_loss,
                std::exp(result.final_val_loss), result.tokens_per_second);
  progress.finish(summary);
  std::fclose(log_file);
  return result;
}

}  // namespace qkv::loops
