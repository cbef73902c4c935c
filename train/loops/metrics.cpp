#include "train/loops/metrics.h"

#include <fstream>

#include "io/input_file.h"
#include "io/json_read.h"
#include "tensor/error.h"
#include "train/loops/json_fields.h"

namespace qkv::loops {

namespace {

struct ToJson {
  nlohmann::json operator()(const StepRecord& r) const {
    return {{"record", "step"}, {"epoch", r.epoch},         {"step", r.step},        {"loss", r.loss},
            {"lr", r.lr},       {"grad_norm", r.grad_norm}, {"it_per_s", r.it_per_s}};
  }
  nlohmann::json operator()(const EpochRecord& r) const {
    nlohmann::json j = {{"record", "epoch"},
                        {"epoch", r.epoch},
                        {"train_loss", r.train_loss},
                        {"val_loss", r.val_loss},
                        {"val_accuracy", r.val_accuracy}};
    if (r.test_loss) j["test_loss"] = *r.test_loss;
    if (r.test_accuracy) j["test_accuracy"] = *r.test_accuracy;
    return j;
  }
  nlohmann::json operator()(const ValRecord& r) const {
    return {{"record", "val"},
            {"epoch", r.epoch},
            {"step", r.step},
            {"val_loss", r.val_loss},
            {"val_accuracy", r.val_accuracy}};
  }
  nlohmann::json operator()(const TestRecord& r) const {
    return {{"record", "test"},
            {"best_epoch", r.best_epoch},
            {"best_val_accuracy", r.best_val_accuracy},
            {"test_accuracy", r.test_accuracy},
            {"test_loss", r.test_loss},
            {"seconds", r.seconds},
            {"data_wait_seconds", r.data_wait_seconds}};
  }
  nlohmann::json operator()(const LmStepRecord& r) const {
    nlohmann::json j{{"record", "lm_step"},
                     {"step", r.step},
                     {"loss", r.loss},
                     {"lr", r.lr},
                     {"grad_norm", r.grad_norm},
                     {"skipped", r.skipped},
                     {"tokens_per_s", r.tokens_per_s}};
    if (r.mfu) j["mfu"] = *r.mfu;
    return j;
  }
  nlohmann::json operator()(const EvalRecord& r) const {
    return {{"record", "eval"}, {"step", r.step}, {"val_loss", r.val_loss}, {"val_ppl", r.val_ppl}};
  }
  nlohmann::json operator()(const NonfiniteRecord& r) const {
    nlohmann::json j{{"record", "nonfinite"}, {"step", r.step}};
    if (r.epoch) j["epoch"] = *r.epoch;
    j.update({{"loss", r.loss}, {"grad_norm", r.grad_norm}, {"action", r.action}, {"consecutive", r.consecutive}});
    return j;
  }
};

}  // namespace

nlohmann::json to_json(const MetricsRecord& r) { return std::visit(ToJson{}, r); }

MetricsRecord metrics_record_from_json(const nlohmann::json& j, const std::string& where) {
  const JsonFields f(j, where);
  const std::string kind = f.text("record");
  if (kind == "step")
    return StepRecord{f.integer("epoch"), f.integer("step"),     f.number("loss"),
                      f.number("lr"),     f.number("grad_norm"), f.number("it_per_s")};
  if (kind == "epoch")
    return EpochRecord{f.integer("epoch"),       f.number("train_loss"),         f.number("val_loss"),
                       f.number("val_accuracy"), f.optional_number("test_loss"), f.optional_number("test_accuracy")};
  if (kind == "val")
    return ValRecord{f.number("epoch"), f.integer("step"), f.number("val_loss"), f.number("val_accuracy")};
  if (kind == "test")
    return TestRecord{f.integer("best_epoch"), f.number("best_val_accuracy"), f.number("test_accuracy"),
                      f.number("test_loss"),   f.number("seconds"),           f.number("data_wait_seconds")};
  if (kind == "lm_step")
    return LmStepRecord{f.integer("step"),     f.integer("skipped"),     f.number("loss"),        f.number("lr"),
                        f.number("grad_norm"), f.number("tokens_per_s"), f.optional_number("mfu")};
  if (kind == "eval") return EvalRecord{f.integer("step"), f.number("val_loss"), f.number("val_ppl")};
  if (kind == "nonfinite") {
    NonfiniteRecord r{f.integer("step"), f.optional_integer("epoch"), f.number("loss"), f.number("grad_norm"),
                      f.text("action"),  f.integer("consecutive")};
    check<IOError>(r.action == "skip" || r.action == "stop", where, ": field 'action' is '", r.action,
                   "', expected skip or stop");
    return r;
  }
  throw IOError(
      cat(where, ": field 'record' is '", kind, "', expected step, epoch, test, lm_step, eval, nonfinite or val"));
}

std::vector<MetricsRecord> read_metrics(const std::filesystem::path& file) {
  std::vector<MetricsRecord> out;
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return out;
  require_regular_file(file, "a run's metrics.jsonl");
  std::ifstream in(file);
  if (!in) return out;
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    const std::string where = cat(file.string(), ":", n);
    const nlohmann::json j = parse_json(line, where);
    check<IOError>(j.is_object(), where, ": not a JSON object (a damaged metrics line)");
    out.push_back(metrics_record_from_json(j, where));
  }
  return out;
}

}  // namespace qkv::loops
