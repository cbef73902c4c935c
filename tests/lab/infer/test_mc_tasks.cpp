// The downstream multiple-choice tasks (train/data/mc_tasks.h, lab/infer/mc_scorer.h): each standard JSONL
// layout becomes lm-evaluation-harness's prompts, bad lines are named by file, line and field,
// few-shot prompts never show the question itself, and the batched, padded and truncated
// log-likelihoods equal a direct computation on one sequence at a time.
#include <doctest/doctest.h>

#include <cmath>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "lab/infer/mc_scorer.h"
#include "tests/support/byte_tokenizer.h"
#include "tests/support/error_checks.h"
#include "tests/support/test_support.h"

using namespace qkv;
using namespace qkv::infer;
using namespace qkv::data;

namespace {

std::unique_ptr<nn::GPT> byte_gpt(int64_t context = 32) {
  nn::GPTConfig c;
  c.vocab = 257;
  c.context = context;
  c.layers = 2;
  c.dropout = 0;
  c.attention.d_model = 16;
  c.attention.heads = 2;
  Generator gen(5);
  auto m = std::make_unique<nn::GPT>(c, &gen);
  m->eval();
  return m;
}

// sum log p(continuation | eot + context), one sequence, no batching, no padding.
double direct(const nn::GPT& model, const std::string& context, const std::string& continuation) {
  std::vector<int64_t> ids = {test::kByteEot};
  for (unsigned char ch : context) ids.push_back(ch);
  for (unsigned char ch : continuation) ids.push_back(ch);
  const int64_t room = model.config().context + 1;
  if (int64_t(ids.size()) > room) ids.erase(ids.begin(), ids.end() - room);
  NoGradGuard no_grad;
  const std::vector<int64_t> in(ids.begin(), ids.end() - 1);
  const std::vector<float> lp =
      log_softmax(model.forward(from_vector(in, {1, int64_t(in.size())})), -1).to_vector<float>();
  double sum = 0;
  for (size_t t = ids.size() - 1 - continuation.size(); t + 1 < ids.size(); ++t)
    sum += lp[t * 257 + size_t(ids[t + 1])];
  return sum;
}

}  // namespace

TEST_CASE("downstream tasks: each layout becomes the harness's prompts") {
  const McItem arc = mc_item_from_json(
      McTask::arc_easy,
      R"({"question": "Which is a gas?", "choices": {"text": ["ice", "steam"], "label": ["A", "B"]}, "answerKey": "B"})",
      "arc:1");
  CHECK(arc.contexts ==
        std::vector<std::string>{"Question: Which is a gas?\nAnswer:", "Question: Which is a gas?\nAnswer:"});
  CHECK(arc.continuations == std::vector<std::string>{" ice", " steam"});
  CHECK(arc.gold == 1);
  const McItem ai2 = mc_item_from_json(
      McTask::arc_challenge,
      R"({"question": {"stem": "Q?", "choices": [{"text": "a", "label": "1"}, {"text": "b", "label": "2"}]}, "answerKey": "1"})",
      "arc:2");
  CHECK((ai2.gold == 0 && ai2.continuations[1] == " b" && ai2.contexts[0] == "Question: Q?\nAnswer:"));

  const McItem hs = mc_item_from_json(
      McTask::hellaswag,
      R"({"activity_label": "Baking", "ctx_a": "A man mixes flour.", "ctx_b": "HE then", "endings": ["bakes [header] it.", " eats  it"], "label": "1"})",
      "hs:1");
  CHECK(hs.contexts[0] == "Baking: A man mixes flour. He then");
  CHECK(hs.continuations == std::vector<std::string>{" bakes it.", " eats it"});
  CHECK(hs.gold == 1);

  const McItem piqa =
      mc_item_from_json(McTask::piqa, R"({"goal": "Open a jar", "sol1": "twist", "sol2": "eat", "label": 0})", "p:1");
  CHECK((piqa.contexts[1] == "Question: Open a jar\nAnswer:" && piqa.continuations[0] == " twist" && piqa.gold == 0));

  const McItem w = mc_item_from_json(
      McTask::winogrande,
      R"({"sentence": "The cup did not fit in the box because _ was too big.", "option1": "the cup", "option2": "the box", "answer": "1"})",
      "w:1");
  CHECK(w.contexts == std::vector<std::string>{"The cup did not fit in the box because the cup",
                                               "The cup did not fit in the box because the box"});
  CHECK(w.continuations[0] == " was too big.");
  CHECK(w.gold == 0);
  CHECK(w.solved() == "The cup did not fit in the box because the cup was too big.");
}

TEST_CASE("downstream tasks: a bad line names the file, the line and the field") {
  test::TempDir dir("mc-bad");
  const std::string file = (dir.path / "piqa.jsonl").string();
  test::write_file(file,
                   "{\"goal\": \"g\", \"sol1\": \"a\", \"sol2\": \"b\", \"label\": 1}\n\n"
                   "{\"goal\": \"g\", \"sol1\": \"a\", \"label\": 1}\n");
  test::check_contains(test::error_of<IOError>([&] { read_mc_items(McTask::piqa, file); }),
                       {file + ":3", "'sol2' is missing"});
  test::write_file(file, "{\"goal\": \"g\", \"sol1\": \"a\", \"sol2\": \"b\", \"label\": 2}\n");
  test::check_contains(test::error_of<IOError>([&] { read_mc_items(McTask::piqa, file); }),
                       {file + ":1", "'label' is 2, expected 0 to 1"});
  test::write_file(file, "{\"goal\": \"g\", \"sol1\": \"a\", \"sol2\": \"b\", \"label\": \"99999999999999999999\"}\n");
  test::check_contains(test::error_of<IOError>([&] { read_mc_items(McTask::piqa, file); }),
                       {file + ":1", "'label'", "expected 0 to 1"});
  test::write_file(file, "{\"goal\": 1e999}\n");  // too large for a double
  test::check_contains(test::error_of<IOError>([&] { read_mc_items(McTask::piqa, file); }), {file + ":1", "not JSON"});
  test::write_file(file, "not json\n");
  test::check_contains(test::error_of<IOError>([&] { read_mc_items(McTask::piqa, file); }), {file + ":1", "not JSON"});
  test::check_contains(test::error_of<IOError>([&] {
                         mc_item_from_json(McTask::winogrande,
                                           R"({"sentence": "no blank", "option1": "a", "option2": "b", "answer": "1"})",
                                           "w.jsonl:4");
                       }),
                       {"w.jsonl:4", "no '_'"});
  test::check_contains(test::error_of<ValueError>([] { parse_mc_task("mmlu"); }), {"'mmlu'", "winogrande"});
}

TEST_CASE("downstream scoring: few-shot prompts, and log-likelihoods equal a direct computation") {
  std::vector<McItem> pool;
  for (int i = 0; i < 6; ++i)
    pool.push_back(
        mc_item_from_json(McTask::piqa,
                          "{\"goal\": \"g" + std::to_string(i) + "\", \"sol1\": \"a\", \"sol2\": \"b\", \"label\": 0}",
                          "p"));
  const std::string p3 = fewshot_prefix(pool, true, 3, 5, 1234);
  CHECK(p3.find("g3") == std::string::npos);  // never the question itself
  for (int i : {0, 1, 2, 4, 5})
    CHECK(p3.find("Question: g" + std::to_string(i) + "\nAnswer: a\n\n") != std::string::npos);
  CHECK(fewshot_prefix(pool, true, 3, 2, 1234) == fewshot_prefix(pool, true, 3, 2, 1234));
  CHECK(fewshot_prefix(pool, true, 3, 0, 1234).empty());
  test::check_contains(test::error_of<ValueError>([&] { fewshot_prefix(pool, true, 0, 6, 1); }), {"6 shots", "has 5"});

  test::TempDir dir("mc-score");
  const data::Gpt2Tokenizer tok = data::Gpt2Tokenizer::load(test::byte_tokenizer(dir.path / "tok"));
  const auto model = byte_gpt();
  // Different lengths in one batch (padding), trailing whitespace moved, and a request longer than
  // the context (truncated from the left).
  const std::vector<std::pair<std::string, std::string>> requests = {{"Question: x\nAnswer:", " yes"},
                                                                     {"ab ", "cd"},
                                                                     {std::string(40, 'q'), " tail"}};
  const std::vector<double> batched = loglikelihoods(*model, tok, requests, 3);
  REQUIRE(batched.size() == 3);
  CHECK(batched[0] == doctest::Approx(direct(*model, "Question: x\nAnswer:", " yes")).epsilon(1e-5));
  CHECK(batched[1] == doctest::Approx(direct(*model, "ab", " cd")).epsilon(1e-5));
  CHECK(batched[2] == doctest::Approx(direct(*model, std::string(40, 'q'), " tail")).epsilon(1e-5));
  CHECK(loglikelihoods(*model, tok, requests, 1) == batched);

  // acc is the share of questions whose gold choice is the most likely one.
  McScoreOptions o;
  o.shots = 1;
  const McScore s = score_mc(*model, tok, McTask::piqa, pool, pool, true, o);
  int right = 0;
  for (size_t i = 0; i < pool.size(); ++i) {
    const std::string prefix = fewshot_prefix(pool, true, int64_t(i), 1, o.seed);
    const double a = direct(*model, prefix + pool[i].contexts[0], pool[i].continuations[0]);
    const double b = direct(*model, prefix + pool[i].contexts[1], pool[i].continuations[1]);
    right += a >= b;  // gold is the first choice
  }
  CHECK(s.items == 6);
  CHECK(s.acc == doctest::Approx(right / 6.0));
  CHECK((s.acc_norm >= 0 && s.acc_norm <= 1));
}
