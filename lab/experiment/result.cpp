#include "lab/experiment/result.h"

#include <cstdio>
#include <fstream>

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
  if (const ClassificationResult* c = r.classification()) {
    j.update({{"test_accuracy", c->test_accuracy},
              {"test_loss", c->test_loss},
              {"best_val_accuracy", c->best_val_accuracy},
              {"best_epoch", c->best_epoch},
              {"steps", c->steps},
              {"seconds", c->seconds},
              {"steps_per_second", c->steps_per_second},
              {"data_wait_fraction", c->data_wait_fraction},
              {"epochs", curve_json(c->epochs)}});
  }
  if (const LmResult* l = r.lm()) {
    j.update({{"val_loss", l->val_loss},
              {"val_ppl", l->val_ppl},
              {"best_val_loss", l->best_val_loss},
              {"steps", l->steps},
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
  r.seed = int(f.integer("seed"));
  for (const auto& [key, value] : f.object("point").items()) {
    check<IOError>(value.is_string(), where, ": field 'point.", key, "' is ", value.dump(), ", expected a string");
    r.point.emplace_back(key, value.get<std::string>());
  }
  r.params = f.integer("params");
  if (r.kind == TaskKind::lm) {
    r.metrics = LmResult{f.number("val_loss"),
                         f.number("val_ppl"),
                         f.number("best_val_loss"),
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
    r.metrics = ClassificationResult{f.number("test_accuracy"),
                                     f.number("test_loss"),
                                     f.number("best_val_accuracy"),
                                     f.integer("best_epoch"),
                                     f.integer("steps"),
                                     f.number("seconds"),
                                     f.number("steps_per_second"),
                                     f.number("data_wait_fraction"),
                                     curve<loops::EpochRecord>(f, "epochs")};
  }
  if (r.kind == TaskKind::vision) r.images = ImageCounts{f.integer("train_examples"), f.integer("test_examples")};
  if (r.kind == TaskKind::anomaly) r.sets = SetSource{f.text("dataset"), f.text("features"), f.number("chance")};
  return r;
}

ResultRow read_result_file(const std::filesystem::path& file) {
  std::ifstream in(file);
  check<IOError>(bool(in), file.string(), ": no result (the run has not finished)");
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  check<IOError>(!j.is_discarded(), file.string(), ": not valid JSON (a damaged result file)");
  return result_from_json(j, file.string());
}

std::string summary(const ResultRow& r) {
  char buf[64];
  if (const LmResult* l = r.lm()) std::snprintf(buf, sizeof buf, "val ppl %.2f", l->val_ppl);
  else std::snprintf(buf, sizeof buf, "test accuracy %.4f", r.classification()->test_accuracy);
  return buf;
}

}  // namespace qkv::experiment
