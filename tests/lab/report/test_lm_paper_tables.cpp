// The paper's language-model tables: the shipped Table 4 and Table 9 load with their model
// shapes, a run's shape chooses the table (300M -> 4, 1.2B -> 9, another -> none, with the line
// saying so), Table 9's changes vs QKV are computed from its perplexities, the training-perplexity
// column, the result rows' shape and training loss (older rows without them still read), and the
// sequence-length ablation from runs at two contexts.
#include <doctest/doctest.h>

#include <cmath>

#include "lab/report/context_ablation.h"
#include "lab/report/lm_pareto.h"
#include "lab/report/lm_table.h"
#include "lab/report/table.h"
#include "tests/support/error_checks.h"
#include "tests/support/test_support.h"

using namespace qkv;
using namespace qkv::experiment;

namespace {

const std::string kPaper = std::string(QKV_SOURCE_DIR) + "/experiments/paper";
const LmShape k300m{20, 1024, 16, 4096, 2048, 50304}, k1b{22, 2048, 32, 8192, 2048, 50304};
const LmShape kSmall{4, 128, 4, 512, 64, 50304};

ResultRow lm_run(const std::string& experiment, const std::string& variant, double val_loss,
                 std::optional<LmShape> shape, std::optional<double> train_loss = std::nullopt, int seed = 0) {
  ResultRow r;
  r.experiment = experiment;
  r.kind = TaskKind::lm;
  r.task = "lm";
  r.variant = variant;
  r.seed = seed;
  r.run = cat(variant, "/seed", seed);
  r.params = 2000;
  LmResult l;
  l.val_loss = l.best_val_loss = val_loss;
  l.val_ppl = std::exp(val_loss);
  l.tokens_per_s = 50;
  l.kv_cache_bytes_per_token_bf16 = variant == "QKV" ? 4096 : 2048;
  l.kv_cache_reduction = variant == "QKV" ? 0.0 : 0.5;
  l.evals = {{10, val_loss, std::exp(val_loss)}};
  l.model = shape;
  l.train_loss = train_loss;
  r.metrics = l;
  return r;
}

}  // namespace

TEST_CASE("lm paper tables: Table 4 and Table 9 load with their shapes, and a run's shape chooses one") {
  const auto papers = report::load_paper_tables(kPaper);
  const report::PaperTable* t4 = report::paper_table_for(papers, k300m);
  const report::PaperTable* t9 = report::paper_table_for(papers, k1b);
  REQUIRE(t4 != nullptr);
  REQUIRE(t9 != nullptr);
  CHECK(t4->number == 4);
  CHECK(t9->number == 9);
  CHECK(report::is_lm_table(*t9));
  CHECK(t9->model_size == "1.2B");
  CHECK(t9->variants == std::vector<std::string>{"QKV", "Q-K=V", "GQA-8", "MQA", "Q-GQA-8", "Q-MQA"});
  CHECK(t9->at("QKV", "val_ppl") == doctest::Approx(5.004));
  CHECK(t9->at("Q-MQA", "val_ppl") == doctest::Approx(5.212));
  CHECK(t9->at("QKV", "kv_bytes_per_token") == doctest::Approx(180224));
  CHECK(!t9->at("Q-K=V", "dppl"));  // computed, not stored
  CHECK(t4->at("MQA", "val_ppl") == doctest::Approx(5.19));
  CHECK(t4->at("Q=K=V", "train_ppl") == doctest::Approx(7.23));
  CHECK(!t9->at("QKV", "train_ppl"));

  // Anything else, or a row without a recorded shape: no paper table.
  LmShape other = k300m;
  other.context = 512;
  CHECK(report::paper_table_for(papers, other) == nullptr);
  CHECK(report::paper_table_for(papers, kSmall) == nullptr);
  CHECK(report::paper_table_for(papers, std::nullopt) == nullptr);
  test::check_contains(report::no_paper_note(papers, kSmall),
                       {"no paper numbers: the paper trained 300M (Table 4) and 1.2B (Table 9) GPT-2-style models",
                        "these runs are 4 layers, d_model 128, 4 heads, FFN 512, context 64, vocab 50304"});
  test::check_contains(report::no_paper_note(papers, std::nullopt), {"do not record the model shape"});
}

TEST_CASE("lm paper tables: the paper's changes, the training perplexity, and runs of two shapes") {
  const auto papers = report::load_paper_tables(kPaper);
  const report::PaperTable* t9 = report::paper_table_for(papers, k1b);
  REQUIRE(t9 != nullptr);
  const std::vector<ResultRow> rows = {lm_run("gpt-1.2b", "QKV", 2.0, k1b, 2.5),
                                       lm_run("gpt-1.2b", "Q-K=V", 2.1, k1b, 2.25)};
  const auto tables = report::build_lm_tables(rows, t9);
  REQUIRE(tables.size() == 1);
  REQUIRE(tables[0].rows.size() == 2);
  CHECK(tables[0].rows[1].train_ppl == doctest::Approx(std::exp(2.25)));
  const std::string md = report::lm_markdown(tables[0], t9);
  const double ours = std::exp(2.1) / std::exp(2.0) - 1, theirs = 5.128 / 5.004 - 1;
  char delta[64];
  std::snprintf(delta, sizeof delta, "%+.1f%% [%+.1f%%]", 100 * ours, 100 * theirs);
  char train[32];
  std::snprintf(train, sizeof train, "| %.2f [–] |", std::exp(2.25));
  test::check_contains(md, {"Table 9", "1.2B numbers in brackets", "train PPL", "exp of the mean training loss",
                            "the paper gives none", delta, train, "| 4,096 [180,224] |",
                            "22 layers, d_model 2048, 32 heads, FFN 8192, context 2048"});
  // Table 4 prints the paper's training perplexity in brackets beside ours.
  const report::PaperTable* t4 = report::paper_table_for(papers, k300m);
  REQUIRE(t4 != nullptr);
  const auto t4_tables = report::build_lm_tables({lm_run("gpt-300m", "Q=K=V", 2.1, k300m, 2.0)}, t4);
  const std::string md4 = report::lm_markdown(t4_tables[0], t4);
  std::snprintf(train, sizeof train, "| %.2f [7.23] |", std::exp(2.0));
  test::check_contains(md4, {"Table 4", train});
  CHECK(md4.find("the paper gives none") == std::string::npos);
  test::check_contains(report::lm_csv(t4_tables, t4), {",train_ppl,paper_train_ppl\n", ",7.23\n"});
  // No training loss recorded: a dash, and no paper brackets without a paper.
  const auto plain = report::build_lm_tables({lm_run("x", "QKV", 2.0, kSmall)}, nullptr);
  CHECK(std::isnan(plain[0].rows[0].train_ppl));
  const std::string note = report::no_paper_note(papers, kSmall);
  const std::string md2 = report::lm_markdown(plain[0], nullptr, note);
  test::check_contains(md2, {note, "| – | 0.00M |"});
  CHECK(md2.find("[") == std::string::npos);

  // One experiment at two contexts: a table per shape, labelled by what differs.
  LmShape c512 = k300m;
  c512.context = 512;
  const auto split =
      report::build_lm_tables({lm_run("abl", "QKV", 2.0, c512), lm_run("abl", "QKV", 1.9, k300m)}, nullptr);
  REQUIRE(split.size() == 2);
  CHECK(split[0].label == "abl (context 512)");
  CHECK(split[1].label == "abl (context 2048)");
  const report::PaperTable* chosen = report::paper_table_for(papers, split[1].shape);
  REQUIRE(chosen != nullptr);
  CHECK(chosen->number == 4);
}

TEST_CASE("lm paper tables: a paper model shape with a bad or missing key is named") {
  test::TempDir dir;
  const std::string head = "table: 9\ntasks: [lm]\nrows:\n  QKV: {val_ppl: 5.0}\n";
  const std::string bad = dir.write("bad.yaml", head +
                                                    "model: {size: 1.2B, layers: 22, d_model: 2048, heads: 32, "
                                                    "ffn: 8192, context: 2048, vocab: many}\n");
  test::check_contains(test::error_of<IOError>([&] { report::load_paper_table(bad); }),
                       {"bad.yaml", "model.vocab is not an integer"});
  const std::string typo = dir.write("typo.yaml", head + "model: {size: 1.2B, layer: 22}\n");
  test::check_contains(test::error_of<IOError>([&] { report::load_paper_table(typo); }),
                       {"typo.yaml", "model.layer is not a shape key"});
  const std::string none = dir.write("none.yaml", head);
  test::check_contains(test::error_of<IOError>([&] { report::load_paper_table(none); }),
                       {"none.yaml", "needs 'model:"});
}

TEST_CASE("lm result rows: the model shape and training loss round-trip, and older rows read without them") {
  const ResultRow r = lm_run("gpt-300m", "QKV", 2.0, k300m, 2.2);
  const nlohmann::json j = to_json(r);
  CHECK(j.at("model").at("ffn") == 4096);
  CHECK(result_from_json(j, "x") == r);
  nlohmann::json old = j;
  old.erase("model");
  old.erase("train_loss");
  const ResultRow o = result_from_json(old, "x");
  CHECK(!o.lm()->model);
  CHECK(!o.lm()->train_loss);
  nlohmann::json broken = j;
  broken["model"]["heads"] = 0;
  test::check_contains(test::error_of<IOError>([&] { result_from_json(broken, "r.json"); }),
                       {"r.json", "model.heads", "expected at least 1"});
  broken = j;
  broken["model"].erase("context");
  test::check_contains(test::error_of<IOError>([&] { result_from_json(broken, "r.json"); }),
                       {"r.json: model", "'context' is missing"});

  // The training loss of the last validation interval, each record weighted by its steps.
  using loops::EvalRecord;
  auto step = [](int64_t s, double loss) {
    loops::LmStepRecord r;
    r.step = s;
    r.loss = loss;
    return r;
  };
  const std::vector<loops::MetricsRecord> records = {step(10, 9.0), EvalRecord{10, 8.0, 0}, step(20, 4.0),
                                                     step(40, 1.0), EvalRecord{40, 3.0, 0}, step(50, 7.0)};
  CHECK(*last_interval_train_loss(records) == doctest::Approx((4.0 * 10 + 1.0 * 20) / 30));
  CHECK(!last_interval_train_loss({step(10, 9.0)}));           // no validation
  CHECK(!last_interval_train_loss({EvalRecord{10, 8.0, 0}}));  // no training record
}

TEST_CASE("context ablation: the Q-K=V gap per context from the runs, the paper's beside it") {
  LmShape c512 = k300m;
  c512.context = 512;
  const std::vector<ResultRow> rows = {lm_run("context-ablation", "QKV", 2.0, c512),
                                       lm_run("context-ablation", "Q-K=V", 2.1, c512),
                                       lm_run("context-ablation", "QKV", 1.8, k300m),
                                       lm_run("context-ablation", "Q-K=V", 1.82, k300m),
                                       lm_run("context-ablation", "QKV", 1.6, k300m, std::nullopt, 1),
                                       lm_run("gpt-300m", "QKV", 1.0, k300m),  // one context only: no ablation
                                       lm_run("gpt-300m", "Q-K=V", 1.1, k300m)};
  const report::PaperAblation paper = report::load_paper_ablation(kPaper + "/ablation-context.yaml");
  CHECK(paper.gap.at(512) == doctest::Approx(0.054));
  CHECK(paper.gap.at(2048) == doctest::Approx(0.022));
  const auto all = report::build_context_ablations(rows, &paper);
  REQUIRE(all.size() == 1);
  const report::ContextAblation& a = all[0];
  CHECK(a.experiment == "context-ablation");
  REQUIRE(a.rows.size() == 2);
  CHECK(a.rows[0].context == 512);
  CHECK(*a.rows[0].gap == doctest::Approx(std::exp(2.1) / std::exp(2.0) - 1));
  CHECK(*a.rows[0].paper_gap == doctest::Approx(0.054));
  const double qkv2048 = (std::exp(1.8) + std::exp(1.6)) / 2;
  CHECK(a.rows[1].baseline_runs == 2);
  CHECK(*a.rows[1].gap == doctest::Approx(std::exp(1.82) / qkv2048 - 1));
  const std::string md = report::ablation_markdown(a, &paper);
  char line[96];
  std::snprintf(line, sizeof line, "| 512 | %.2f (1) | %.2f (1) | %+.1f%% [+5.4%%] |", std::exp(2.0), std::exp(2.1),
                100 * *a.rows[0].gap);
  test::check_contains(md, {line, "[+2.2%]", "gap = PPL(Q-K=V) / PPL(QKV) - 1"});
  test::check_contains(report::ablation_csv(all, &paper), {"context-ablation,512,QKV,", ",0.054\n"});

  // The context also comes from the grid point of a row without a shape.
  ResultRow old = lm_run("e", "QKV", 2.0, std::nullopt);
  old.point = {{"model.context", "256"}};
  CHECK(report::run_context(old) == 256);
  test::TempDir dir;
  const std::string bad = dir.write("a.yaml", "gap: {short: 0.05}\n");
  test::check_contains(test::error_of<IOError>([&] { report::load_paper_ablation(bad); }), {"a.yaml", "gap.short"});
}

TEST_CASE("lm pareto figure: each variant at its cache reduction and perplexity change, ours and the paper's") {
  const auto papers = report::load_paper_tables(kPaper);
  const report::PaperTable* t4 = report::paper_table_for(papers, k300m);
  REQUIRE(t4 != nullptr);
  const auto tables =
      report::build_lm_tables({lm_run("gpt-300m", "QKV", 2.0, k300m), lm_run("gpt-300m", "MQA", 2.05, k300m)}, t4);
  const report::Figure f = report::lm_pareto_figure(tables, t4);
  REQUIRE(f.lines.size() == 2);
  const report::LinePanel& ours = f.lines[0];
  REQUIRE(ours.series.size() == 2);
  CHECK(ours.series[0].label == "QKV");
  CHECK(ours.series[0].x == std::vector<double>{0.0});
  CHECK(ours.series[0].y == std::vector<double>{0.0});
  CHECK(ours.series[1].label == "MQA");
  CHECK(ours.series[1].x[0] == doctest::Approx(100 * tables[0].rows[1].cache_reduction));
  CHECK(ours.series[1].y[0] == doctest::Approx(100 * (std::exp(2.05) / std::exp(2.0) - 1)));
  // The paper's: every Table 4 row with a cache reduction, MQA at 93.8% and +1.5%.
  const report::LinePanel& theirs = f.lines[1];
  CHECK(theirs.series.size() == 8);
  const auto mqa =
      std::find_if(theirs.series.begin(), theirs.series.end(), [](const auto& s) { return s.label == "MQA"; });
  REQUIRE(mqa != theirs.series.end());
  CHECK(mqa->x[0] == doctest::Approx(93.8));
  CHECK(mqa->y[0] == doctest::Approx(1.5));
  // Without a QKV row there is nothing to compare against.
  CHECK(report::lm_pareto_figure(report::build_lm_tables({lm_run("x", "MQA", 2.0, k300m)}, t4), t4).lines.empty());
}
