#include "lab/experiment/result.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>

#include "tensor/json_read.h"
#include "train/loops/json_fields.h"

namespace qkv::experiment {

namespace {

using loops::JsonFields;

// The records of a result's curve ("epochs" or "evals"), each checked like a metrics line.
template <class R> std::vector<R> curve(const JsonFields& f, const char* key) {
  std::vector<R> out;
  const nlohmann::json& items = f.array(key);
  for (size_t i = 0; i < items.size(); ++i) {
    const loops::MetricsRecord r = loops::metrics_record_from_json(items[i], cat(f.where(), ": ", key, "[", i, "]"));
    const R* x = std::get_if<R>(&r);
    check<IOError>(x != nullptr, f.where(), ": ", key, "[", i, "] is a '", items[i].value("record", "?"),
                   "' record, expected ", key);
    out.push_back(*x);
  }
  return out;
}

template <class R> nlohmann::json curve_json(const std::vector<R>& records) {
  nlohmann::json out = nlohmann::json::array();
  for (const R& r : records) out.push_back(loops::to_json(r));
  return out;
}

}  // namespace

nlohmann::json to_json(const ResultRow& r) {
  nlohmann::json point = nlohmann::json::object();
  for (const auto& [k, v] : r.point) point[k] = v;
  nlohmann::json j = {{"experiment", r.experiment},
                      {"kind", std::string(enum_name(r.kind))},
                      {"task", r.task},
                      {"run", r.run},
                      {"variant", r.variant},
                      {"seed", r.seed},
                      {"point", point},
                      {"params", r.params}};
  j["status"] = r.diverged ? "diverged" : "complete";
  if (r.diverged) {
    nlohmann::json d{{"step", r.diverged->step}, {"reason", r.diverged->reason}};
    if (r.diverged->epoch > 0) d["epoch"] = r.diverged->epoch;
    j["divergence"] = d;
  }
  if (const ClassificationResult* c = r.classification()) {
    if (!r.diverged) j.update({{"test_accuracy", c->test_accuracy}, {"test_loss", c->test_loss}});
    j.update({{"best_val_accuracy", c->best_val_accuracy},
              {"best_epoch", c->best_epoch},
              {"steps", c->steps},
              {"seconds", c->seconds},
              {"steps_per_second", c->steps_per_second},
              {"data_wait_fraction", c->data_wait_fraction},
              {"epochs", curve_json(c->epochs)},
              {"skipped_steps", c->skipped_steps}});
  }
  if (const LmResult* l = r.lm()) {
    if (!r.diverged)
      j.update({{"val_loss", l->val_loss}, {"val_ppl", l->val_ppl}, {"best_val_loss", l->best_val_loss}});
    j.update({{"steps", l->steps},
              {"skipped_steps", l->skipped_steps},
              {"resumed_from", l->resumed_from},
              {"tokens_per_s", l->tokens_per_s},
              {"mfu", l->mfu},
              {"peak_flops", l->peak_flops},
              {"seconds", l->seconds},
              {"kv_cache_bytes_per_token_bf16", l->kv_cache_bytes_per_token_bf16},
              {"kv_cache_reduction", l->kv_cache_reduction},
              {"evals", curve_json(l->evals)}});
  }
  if (r.images) j.update({{"train_examples", r.images->train_examples}, {"test_examples", r.images->test_examples}});
  if (r.sets) j.update({{"dataset", r.sets->dataset}, {"features", r.sets->features}, {"chance", r.sets->chance}});
  return j;
}

namespace {

void check_at_least(int64_t value, int64_t lo, const std::string& where, const std::string& field) {
  check<IOError>(value >= lo, where, ": field '", field, "' is ", value, ", expected at least ", lo);
}

// Counts and positions a table or figure indexes by: epochs numbered from 1 upwards, a best
// epoch among them, validations at increasing steps, no negative counts.
void check_counts(const ResultRow& r, const std::string& where) {
  check<IOError>(!r.run.empty(), where, ": field 'run' is empty, expected the run's id");
  check_at_least(r.params, 0, where, "params");
  if (const ClassificationResult* c = r.classification()) {
    check_at_least(c->steps, 0, where, "steps");
    check_at_least(c->skipped_steps, 0, where, "skipped_steps");
    int64_t last = 0;
    for (size_t i = 0; i < c->epochs.size(); ++i) {
      check<IOError>(c->epochs[i].epoch > last, where, ": epochs[", i, "]: field 'epoch' is ", c->epochs[i].epoch,
                     ", expected an epoch number after ", last);
      last = c->epochs[i].epoch;
    }
    check<IOError>(c->best_epoch >= 0 && c->best_epoch <= last, where, ": field 'best_epoch' is ", c->best_epoch,
                   ", expected one of the recorded epochs (0..", last, ")");
  }
  if (const LmResult* l = r.lm()) {
    check_at_least(l->steps, 0, where, "steps");
    check_at_least(l->skipped_steps, 0, where, "skipped_steps");
    check_at_least(l->resumed_from, 0, where, "resumed_from");
    check_at_least(l->kv_cache_bytes_per_token_bf16, 0, where, "kv_cache_bytes_per_token_bf16");
    int64_t last = -1;
    for (size_t i = 0; i < l->evals.size(); ++i) {
      check<IOError>(l->evals[i].step > last, where, ": evals[", i, "]: field 'step' is ", l->evals[i].step,
                     ", expected a step after ", last);
      last = l->evals[i].step;
    }
  }
  if (r.images) {
    check_at_least(r.images->train_examples, 0, where, "train_examples");
    check_at_least(r.images->test_examples, 0, where, "test_examples");
  }
}

}  // namespace

ResultRow result_from_json(const nlohmann::json& j, const std::string& where) {
  const JsonFields f(j, where);
  ResultRow r;
  r.experiment = f.text("experiment");
  const std::string kind = f.text("kind");
  const auto k = enum_from_name<TaskKind>(kind);
  check<IOError>(k.has_value(), where, ": field 'kind' is '", kind, "', expected ", Codec<TaskKind>::type());
  r.kind = *k;
  r.task = f.text("task");
  r.run = f.text("run");
  r.variant = f.text("variant");
  const int64_t seed = f.integer("seed");
  check<IOError>(seed >= 0 && seed <= INT32_MAX, where, ": field 'seed' is ", seed, ", expected 0..", INT32_MAX);
  r.seed = int(seed);
  for (const auto& [key, value] : f.object("point").items()) {
    check<IOError>(value.is_string(), where, ": field 'point.", key, "' is ", value.dump(), ", expected a string");
    r.point.emplace_back(key, value.get<std::string>());
  }
  r.params = f.integer("params");
  const std::string status = j.contains("status") ? f.text("status") : "complete";  // older rows: complete
  check<IOError>(status == "complete" || status == "diverged", where, ": field 'status' is '", status,
                 "', expected complete or diverged");
  if (status == "diverged") {
    const JsonFields d(f.object("divergence"), cat(where, ": divergence"));
    r.diverged = loops::Divergence{d.integer("step"), d.optional_integer("epoch").value_or(0), d.text("reason")};
  }
  // The final metrics: a diverged run has none (NaN here).
  auto final_metric = [&](const char* key) { return r.diverged ? NAN : f.number(key); };
  if (r.kind == TaskKind::lm) {
    r.metrics = LmResult{final_metric("val_loss"),
                         final_metric("val_ppl"),
                         final_metric("best_val_loss"),
                         f.integer("steps"),
                         f.integer("skipped_steps"),
                         f.integer("resumed_from"),
                         f.number("tokens_per_s"),
                         f.number("mfu"),
                         f.number("peak_flops"),
                         f.number("seconds"),
                         f.integer("kv_cache_bytes_per_token_bf16"),
                         f.number("kv_cache_reduction"),
                         curve<loops::EvalRecord>(f, "evals")};
  } else {
    r.metrics = ClassificationResult{final_metric("test_accuracy"),
                                     final_metric("test_loss"),
                                     f.number("best_val_accuracy"),
                                     f.integer("best_epoch"),
                                     f.integer("steps"),
                                     f.number("seconds"),
                                     f.number("steps_per_second"),
                                     f.number("data_wait_fraction"),
                                     curve<loops::EpochRecord>(f, "epochs"),
                                     f.optional_integer("skipped_steps").value_or(0)};  // older rows: none
  }
  if (r.kind == TaskKind::vision) r.images = ImageCounts{f.integer("train_examples"), f.integer("test_examples")};
  if (r.kind == TaskKind::anomaly) r.sets = SetSource{f.text("dataset"), f.text("features"), f.number("chance")};
  check_counts(r, where);
  return r;
}

ResultRow read_result_file(const std::filesystem::path& file) {
  std::error_code ec;
  check<IOError>(std::filesystem::exists(file, ec), file.string(), ": no result (the run has not finished)");
  return result_from_json(read_json_file(file, "a run's result.json", kMaxResultBytes), file.string());
}

std::string summary(const ResultRow& r) {
  if (r.diverged) return cat("diverged at step ", r.diverged->step, ": ", r.diverged->reason);
  char buf[64];
  if (const LmResult* l = r.lm()) std::snprintf(buf, sizeof buf, "val ppl %.2f", l->val_ppl);
  else std::snprintf(buf, sizeof buf, "test accuracy %.4f", r.classification()->test_accuracy);
  return buf;
}

}  // namespace qkv::experiment
