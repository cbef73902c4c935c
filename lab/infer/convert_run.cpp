#include "lab/infer/convert_run.h"

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "io/folder_lock.h"
#include "io/json_read.h"
#include "lab/experiment/lm_run.h"
#include "lab/experiment/models.h"
#include "lab/experiment/run_dir.h"
#include "lab/infer/generate.h"
#include "lab/tasks/lm.h"
#include "train/loops/lm_checkpoint.h"
#include "train/loops/lm_loop.h"

namespace qkv::infer {

namespace fs = std::filesystem;
using experiment::LmConfig;

namespace {

data::TokenBatchOptions batch_options(const LmConfig& c, int64_t batch) {
  data::TokenBatchOptions o;
  o.batch = batch;
  o.context = c.model.context;
  o.sampling = data::parse_lm_sampling(std::string(experiment::enum_name(c.lm.sampling)));
  o.loss_on_padding = c.lm.loss_on_padding;
  return o;
}

// `count` batches of training windows in a shuffled order (the whole split, not its beginning).
std::vector<Tensor> calibration_batches(const fs::path& tokens, const LmConfig& c, int64_t count, uint64_t seed) {
  data::TokenBatchOptions o = batch_options(c, c.train.batch_size);
  o.seed = seed;
  data::TokenBatches train(tokens, "train", o);
  std::vector<Tensor> out;
  Tensor in, target;
  for (int64_t i = 0; i < count; ++i) {
    train.next(in, target);
    out.push_back(in);
  }
  return out;
}

// The validation loss as the run's training loop measures it: the first train.eval_batches
// batches of the val split, in order.
double validation_loss(nn::GPT& model, const fs::path& tokens, const LmConfig& c) {
  data::TokenBatchOptions o = batch_options(c, c.train.eval_batch_size);
  o.shuffle = false;
  data::TokenBatches val(tokens, "val", o);
  const int64_t batches = std::min<int64_t>(c.train.eval_batches, val.windows_per_epoch() / o.batch);
  check<ValueError>(batches >= 1, "convert: the validation split of ", tokens.string(),
                    " holds fewer than one batch of ", o.batch, " samples");
  return loops::evaluate_lm(model, val, batches);
}

nn::Variant checked_target(const nn::GPTConfig& source, const std::string& to, const fs::path& run) {
  const nn::Variant target = shared_kv_target(source);
  if (to.empty()) return target;
  const nn::Variant asked = nn::parse_variant(to);
  check<ValueError>(asked.sharing == nn::Sharing::q_kv && !asked.pos2d, "convert --to ", to,
                    ": not a K=V variant; the conversion gives Q-K=V, Q-GQA-g or Q-MQA (K and V one projection)");
  check<ValueError>(asked == target, "convert --to ", to, ": the source ", run.string(), " is ",
                    nn::variant_name({source.attention.sharing, source.attention.kv_heads, false}),
                    " and keeps its KV heads, so its K=V form is ", nn::variant_name(target));
  return target;
}

nlohmann::json number(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(); }

nlohmann::json to_json(const ConvertedRun& c, const ConvertRequest& r) {
  return {{"source",
           {{"run", fs::absolute(r.run).lexically_normal().string()},
            {"checkpoint", c.source_checkpoint.string()},
            {"variant", nn::variant_name(c.source_variant)},
            {"step", c.source_step}}},
          {"target", nn::variant_name(c.target_variant)},
          {"method", std::string(experiment::enum_name(r.method))},
          {"calibration",
           {{"token_folder", c.token_folder.string()},
            {"split", "train"},
            {"batches", c.calibration_batches},
            {"tokens", c.calibration_tokens},
            {"seed", r.calibration_seed}}},
          {"layer_error", c.layer_error},
          {"val_loss", {{"source", number(c.source_val_loss)}, {"converted", number(c.val_loss)}}},
          {"checkpoint", c.checkpoint.filename().string()}};
}

}  // namespace

ConvertedRun convert_run(const ConvertRequest& r) {
  const experiment::LmRunFiles f = experiment::open_lm_run(r.run, "convert");
  LmConfig c = f.config;
  if (!r.data_root.empty()) c.data.root = r.data_root;
  ConvertedRun out;
  out.source_variant = f.run.variant;
  Generator gen(0);
  nn::GPT source(experiment::gpt_config(c, f.run.variant), &gen);
  out.target_variant = checked_target(source.config(), r.to, r.run);
  check<ValueError>(r.calibration_batches >= 1 || r.method != ConvertMethod::svd,
                    "convert --calibration-batches: the svd method needs at least 1");
  std::error_code ec;
  check<IOError>(!fs::exists(r.out, ec) || (fs::is_directory(r.out) && fs::is_empty(r.out)), "convert --out ",
                 r.out.string(), ": already exists and is not an empty folder; give a new folder");

  source.load(f.checkpoint.string());
  check_finite_weights(source, f.checkpoint.string());
  out.source_checkpoint = fs::absolute(f.checkpoint).lexically_normal();
  out.source_step = loops::checkpoint_steps(f.folder).back();
  out.token_folder = fs::absolute(tasks::run_token_folder(f, c, r.token_data, "convert")).lexically_normal();

  Calibration cal;
  if (r.calibration_batches > 0)
    cal = calibrate(source, calibration_batches(out.token_folder, c, r.calibration_batches, r.calibration_seed));
  out.calibration_tokens = cal.tokens;
  out.calibration_batches = r.calibration_batches;
  Conversion conv = convert_to_shared_kv(source, r.method, cal);
  out.layer_error = conv.layer_error;
  if (r.evaluate) {
    out.source_val_loss = validation_loss(source, out.token_folder, c);
    out.val_loss = validation_loss(*conv.model, out.token_folder, c);
  }

  // The converted run's config: the target variant, the data as the prepared folder it is.
  LmConfig t = c;
  t.sweep.variants = {out.target_variant};
  t.lm.tokens = out.token_folder.string();
  t.lm.text.clear();
  t.lm.val_text.clear();
  t.model.init_from.clear();
  if (!r.name.empty()) t.name = r.name;
  const experiment::Config config{t};
  experiment::single_run(config, (r.out / "config.yaml").string());  // describes exactly one run

  const FolderLock lock(r.out, "converted model folder");
  loops::LmLoopState state;
  state.step = out.source_step;
  loops::save_lm_checkpoint(*conv.model, {}, state, r.out, 1);
  out.folder = r.out;
  out.checkpoint = *loops::latest_checkpoint(r.out);
  experiment::write_model_folder_files(r.out, config, "convert.json", to_json(out, r));
  return out;
}

ConvertedRun read_converted(const fs::path& folder) {
  const fs::path file = folder / "convert.json";
  const nlohmann::json j = read_json_file(file, "a converted model's convert.json", uint64_t(1) << 20);
  const auto field = [&](const nlohmann::json& at, const char* key, const std::string& name) -> const nlohmann::json& {
    check<IOError>(at.is_object() && at.contains(key), file.string(), ": missing field '", name, "'");
    return at[key];
  };
  const auto loss = [&](const char* key) {
    const nlohmann::json& v = field(field(j, "val_loss", "val_loss"), key, cat("val_loss.", key));
    check<IOError>(v.is_null() || v.is_number(), file.string(), ": field 'val_loss.", key, "' is not a number");
    return v.is_null() ? NAN : v.get<double>();
  };
  try {
    ConvertedRun c;
    c.folder = folder;
    c.source_variant =
        nn::parse_variant(field(field(j, "source", "source"), "variant", "source.variant").get<std::string>());
    c.target_variant = nn::parse_variant(field(j, "target", "target").get<std::string>());
    c.source_step = field(j["source"], "step", "source.step").get<int64_t>();
    c.source_checkpoint = field(j["source"], "checkpoint", "source.checkpoint").get<std::string>();
    c.token_folder =
        field(field(j, "calibration", "calibration"), "token_folder", "calibration.token_folder").get<std::string>();
    c.calibration_tokens = field(j["calibration"], "tokens", "calibration.tokens").get<int64_t>();
    c.calibration_batches = field(j["calibration"], "batches", "calibration.batches").get<int64_t>();
    c.layer_error = field(j, "layer_error", "layer_error").get<std::vector<double>>();
    c.checkpoint = folder / "checkpoints" / field(j, "checkpoint", "checkpoint").get<std::string>();
    c.source_val_loss = loss("source");
    c.val_loss = loss("converted");
    return c;
  } catch (const nlohmann::json::exception& e) {
    throw IOError(cat(file.string(), ": a field has the wrong type (", e.what(), ")"));
  } catch (const ValueError& e) { throw IOError(cat(file.string(), ": ", e.what())); }
}

}  // namespace qkv::infer
