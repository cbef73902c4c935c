#include "train/loops/lm_checkpoint.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <regex>

#include "io/fault_hook.h"
#include "io/safetensors.h"

namespace qkv::loops {

namespace fs = std::filesystem;

namespace {

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

safetensors::Metadata to_metadata(const LmLoopState& s) {
  return {{"step", std::to_string(s.step)},
          {"skipped_steps", std::to_string(s.skipped)},
          {"tokens", std::to_string(s.tokens)},
          {"log_loss_sum", exact(s.log_loss_sum)},
          {"log_count", std::to_string(s.log_count)},
          {"nonfinite_streak", std::to_string(s.nonfinite_streak)},
          {"loss_scale", std::to_string(int64_t(s.loss_scale.scale))},  // 0, or a power of two
          {"loss_scale_good_steps", std::to_string(s.loss_scale.good_steps)},
          {"metrics_bytes", std::to_string(s.metrics_bytes)},
          {"generator_seed", std::to_string(s.gen.seed)},
          {"generator_offset", std::to_string(s.gen.offset)},
          {"data_epoch", std::to_string(s.cursor.epoch)},
          {"data_index", std::to_string(s.cursor.index)}};
}

LmLoopState from_metadata(const safetensors::Metadata& m, const std::string& file) {
  auto get = [&](const std::string& key) -> const std::string& {
    auto it = m.find(key);
    check<IOError>(it != m.end(), file, ": training state lacks metadata '", key, "'");
    return it->second;
  };
  // Counters are int64 in the loop; the generator's seed and offset use all 64 bits.
  auto integer = [&](const std::string& key, uint64_t max = uint64_t(INT64_MAX)) {
    const std::string& v = get(key);
    uint64_t x = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
    check<IOError>(!v.empty() && ec == std::errc() && end == v.data() + v.size() && x <= max, file, ": metadata '", key,
                   "' is not an integer in 0..", max, ": '", v, "'");
    return x;
  };
  LmLoopState s;
  s.step = int64_t(integer("step"));
  s.skipped = int64_t(integer("skipped_steps"));
  s.tokens = int64_t(integer("tokens"));
  s.log_loss_sum = parse_exact(get("log_loss_sum"), file, "log_loss_sum");
  s.log_count = int64_t(integer("log_count"));
  s.nonfinite_streak = m.count("nonfinite_streak") ? int64_t(integer("nonfinite_streak")) : 0;  // older checkpoints
  if (m.count("loss_scale")) {  // older checkpoints: none (an fp16 run starts a new scale)
    const uint64_t v = integer("loss_scale", uint64_t(kMaxLossScale));
    check<IOError>((v & (v - 1)) == 0, file, ": metadata 'loss_scale' is ", v,
                   ", expected 0 or a power of two from 1 to 2^24");
    s.loss_scale.scale = double(v);
    s.loss_scale.good_steps = int64_t(integer("loss_scale_good_steps"));
  }
  s.metrics_bytes = integer("metrics_bytes");
  s.gen = {integer("generator_seed", UINT64_MAX), integer("generator_offset", UINT64_MAX)};
  s.cursor = {int64_t(integer("data_epoch")), int64_t(integer("data_index"))};
  return s;
}

}  // namespace

fs::path checkpoint_model_file(const fs::path& run, int64_t step) {
  return checkpoint_dir(run) / (step_name(step) + ".safetensors");
}
fs::path checkpoint_state_file(const fs::path& run, int64_t step) {
  return checkpoint_dir(run) / (step_name(step) + ".state.safetensors");
}

std::vector<int64_t> checkpoint_steps(const fs::path& run) {
  std::vector<int64_t> steps;
  if (!fs::is_directory(checkpoint_dir(run))) return steps;
  // The exact names only: a temporary file of a killed write (".step_….state.safetensors.tmp.…",
  // or an older version's "step_….state.safetensors.tmp.<pid>") is never a checkpoint.
  static const std::regex state_name(R"(step_(\d{8,18})\.state\.safetensors)");
  for (const auto& e : fs::directory_iterator(checkpoint_dir(run))) {
    const std::string name = e.path().filename().string();
    std::smatch m;
    if (!std::regex_match(name, m, state_name) || !e.is_regular_file()) continue;
    const int64_t step = std::stoll(m[1].str());
    if (checkpoint_state_file(run, step).filename() == name && fs::is_regular_file(checkpoint_model_file(run, step)))
      steps.push_back(step);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

std::optional<fs::path> latest_checkpoint(const fs::path& run) {
  const auto steps = checkpoint_steps(run);
  if (steps.empty()) return std::nullopt;
  return checkpoint_model_file(run, steps.back());
}

void save_lm_checkpoint(const nn::Module& model, const optim::NamedTensors& optimizer, const LmLoopState& s,
                        const fs::path& run, int64_t keep) {
  fs::create_directories(checkpoint_dir(run));
  {
    FaultWriteScope fault("checkpoint-model", s.step);
    model.save(checkpoint_model_file(run, s.step).string(), {{"step", std::to_string(s.step)}});
  }
  fault_point("checkpoint", s.step);  // the model file without its state: an incomplete checkpoint
  {
    FaultWriteScope fault("checkpoint-state", s.step);
    safetensors::save(checkpoint_state_file(run, s.step).string(), optimizer,
                      to_metadata(s));  // last: marks it complete
  }
  const std::vector<int64_t> steps = checkpoint_steps(run);
  for (size_t i = 0; i + size_t(keep) < steps.size(); ++i) {
    fs::remove(checkpoint_state_file(run, steps[i]));
    fs::remove(checkpoint_model_file(run, steps[i]));
  }
}

std::optional<LmCheckpoint> load_latest_lm_checkpoint(const fs::path& run, const Device& device) {
  const auto steps = checkpoint_steps(run);
  if (steps.empty()) return std::nullopt;
  const fs::path path = checkpoint_state_file(run, steps.back());
  safetensors::Metadata meta;
  auto tensors = safetensors::load(path.string(), device, &meta);
  LmCheckpoint c{from_metadata(meta, path.string()), {}, checkpoint_model_file(run, steps.back()), path};
  check<IOError>(c.state.step == steps.back(), path.string(), ": metadata 'step' is ", c.state.step,
                 " but the file is the checkpoint of step ", steps.back());
  for (auto& [name, t] : tensors) c.optimizer.emplace_back(name, t);
  return c;
}

void remove_checkpoints(const fs::path& run) { fs::remove_all(checkpoint_dir(run)); }

}  // namespace qkv::loops
