#include "lab/experiment/result.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>

#include "io/json_read.h"
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
  if (!r.scale.empty()) j["scale"] = r.scale;
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
    j.update({{"protocol", std::string(enum_name(c->protocol))},
              {"tested_epoch", c->tested_epoch},
              {"validations", curve_json(c->validations)}});
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
    if (l->model)
      j["model"] = {{"layers", l->model->layers}, {"d_model", l->model->d_model}, {"heads", l->model->heads},
                    {"ffn", l->model->ffn},       {"context", l->model->context}, {"vocab", l->model->vocab},
                    {"block", l->model->block}};
    if (l->train_loss) j["train_loss"] = *l->train_loss;
  }
  if (r.images) j.update({{"train_examples", r.images->train_examples}, {"test_examples", r.images->test_examples}});
  if (r.sets) j.update({{"dataset", r.sets->dataset}, {"features", r.sets->features}, {"chance", r.sets->chance}});
  if (r.sets && r.sets->image_size) j["resnet_image_size"] = *r.sets->image_size;
  if (r.sets && r.sets->pretrained) j["resnet_pretrained"] = *r.sets->pretrained;
  if (r.precision)
    j["precision"] = {{"requested", loops::precision_name(r.precision->requested)},
                      {"used", loops::precision_name(r.precision->used)}};
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
    for (size_t i = 0; i < c->validations.size(); ++i)
      check<IOError>(c->validations[i].epoch > (i ? c->validations[i - 1].epoch : 0.0), where, ": validations[", i,
                     "]: field 'epoch' is ", c->validations[i].epoch, ", expected an epoch after the one before");
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
    if (const auto& m = l->model) {
      check_at_least(m->layers, 1, where, "model.layers");
      check_at_least(m->d_model, 1, where, "model.d_model");
      check_at_least(m->heads, 1, where, "model.heads");
      check_at_least(m->ffn, 1, where, "model.ffn");
      check_at_least(m->context, 1, where, "model.context");
      check_at_least(m->vocab, 1, where, "model.vocab");
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
  if (j.contains("scale")) r.scale = f.text("scale");  // older rows: not recorded
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
    LmResult& l = std::get<LmResult>(r.metrics);
    if (j.contains("model")) {  // older rows have no shape
      const JsonFields m(f.object("model"), cat(where, ": model"));
      l.model = LmShape{m.integer("layers"), m.integer("d_model"), m.integer("heads"),
                        m.integer("ffn"),    m.integer("context"), m.integer("vocab")};
      if (f.object("model").contains("block")) l.model->block = m.text("block");  // older rows: the GPT's
    }
    l.train_loss = f.optional_number("train_loss");
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
    ClassificationResult& c = std::get<ClassificationResult>(r.metrics);
    if (j.contains("protocol")) {  // older rows: holdout_best
      const std::string protocol = f.text("protocol");
      const auto p = enum_from_name<Protocol>(protocol);
      check<IOError>(p.has_value(), where, ": field 'protocol' is '", protocol, "', expected ",
                     Codec<Protocol>::type());
      c.protocol = *p;
    }
    c.tested_epoch = f.optional_number("tested_epoch").value_or(double(c.best_epoch));
    if (j.contains("validations")) c.validations = curve<loops::ValRecord>(f, "validations");
  }
  if (r.kind == TaskKind::vision) r.images = ImageCounts{f.integer("train_examples"), f.integer("test_examples")};
  if (r.kind == TaskKind::anomaly) {
    r.sets = SetSource{f.text("dataset"), f.text("features"), f.number("chance")};
    r.sets->image_size = f.optional_integer("resnet_image_size");  // older rows: none
    if (r.sets->image_size) check_at_least(*r.sets->image_size, 0, where, "resnet_image_size");
    if (j.contains("resnet_pretrained")) {
      check<IOError>(j.at("resnet_pretrained").is_boolean(), where,
                     ": field 'resnet_pretrained' is not true or false, expected whether the ResNet34 was pretrained");
      r.sets->pretrained = j.at("resnet_pretrained").get<bool>();
    }
  }
  if (j.contains("precision")) {  // older rows: none
    const JsonFields p(f.object("precision"), cat(where, ": precision"));
    auto precision = [&](const char* key) {
      const std::string name = p.text(key);
      const auto v = enum_from_name<loops::Precision>(name);
      check<IOError>(v.has_value(), where, ": field 'precision.", key, "' is '", name, "', expected ",
                     Codec<loops::Precision>::type());
      return *v;
    };
    r.precision = loops::PrecisionChoice{precision("requested"), precision("used")};
  }
  check_counts(r, where);
  return r;
}

ResultRow read_result_file(const std::filesystem::path& file) {
  std::error_code ec;
  check<IOError>(std::filesystem::exists(file, ec), file.string(), ": no result (the run has not finished)");
  return result_from_json(read_json_file(file, "a run's result.json", kMaxResultBytes), file.string());
}

std::optional<double> last_interval_train_loss(const std::vector<loops::MetricsRecord>& records) {
  const auto evals = loops::records_of<loops::EvalRecord>(records);
  if (evals.empty()) return std::nullopt;
  const int64_t from = evals.size() > 1 ? evals[evals.size() - 2].step : 0, to = evals.back().step;
  double sum = 0;
  int64_t steps = 0, prev = 0;
  for (const auto& s : loops::records_of<loops::LmStepRecord>(records)) {
    if (s.step > from && s.step <= to && std::isfinite(s.loss)) {
      sum += s.loss * double(s.step - std::max(prev, from));
      steps += s.step - std::max(prev, from);
    }
    prev = s.step;
  }
  if (steps <= 0) return std::nullopt;
  return sum / double(steps);
}

std::string summary(const ResultRow& r) {
  if (r.diverged) return cat("diverged at step ", r.diverged->step, ": ", r.diverged->reason);
  char buf[64];
  if (const LmResult* l = r.lm()) std::snprintf(buf, sizeof buf, "val ppl %.2f", l->val_ppl);
  else std::snprintf(buf, sizeof buf, "test accuracy %.4f", r.classification()->test_accuracy);
  return buf;
}

}  // namespace qkv::experiment
