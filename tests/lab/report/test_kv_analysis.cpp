// `qkvlab analyze`'s measurements (lab/report/kv_analysis.h): effective rank of matrices whose
// singular values are known, projection cosines on tiny GPTs with constructed weights, tied
// roles, a run folder read end to end, and the reports.
#include <doctest/doctest.h>

#include <cmath>
#include <memory>

#include "autograd/autograd.h"
#include "lab/experiment/experiment.h"
#include "lab/experiment/lm_run.h"
#include "lab/experiment/models.h"
#include "lab/experiment/run_dir.h"
#include "lab/report/kv_analysis.h"
#include "tests/support/test_support.h"
#include "tests/support/token_data.h"
#include "train/loops/lm_checkpoint.h"

using namespace qkv;
using namespace qkv::report;
using experiment::LmRunFiles;
using experiment::open_lm_run;
using experiment::run_output_root;
using nn::Role;

namespace {

std::unique_ptr<nn::GPT> tiny_gpt(nn::Sharing sharing, int64_t kv_heads = 0, uint64_t seed = 3) {
  nn::GPTConfig c;
  c.vocab = 31;
  c.context = 8;
  c.layers = 2;
  c.dropout = 0;
  c.attention.d_model = 16;
  c.attention.heads = 2;
  c.attention.kv_heads = kv_heads;
  c.attention.sharing = sharing;
  Generator gen(seed);
  auto model = std::make_unique<nn::GPT>(c, &gen);
  model->eval();
  return model;
}

std::vector<Tensor> token_batches() {
  std::vector<int64_t> a, b;
  for (int64_t i = 0; i < 16; ++i) a.push_back((7 * i + 2) % 31);
  for (int64_t i = 0; i < 5; ++i) b.push_back((11 * i + 5) % 31);
  return {from_vector(a, {2, 8}), from_vector(b, {1, 5})};
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) { return e.what(); }
  return "";
}

}  // namespace

TEST_CASE("kv analysis: effective rank of matrices with known singular values") {
  for (int64_t n : {1, 4, 9}) {
    std::vector<double> eye(size_t(n * n), 0.0);
    for (int64_t i = 0; i < n; ++i) eye[size_t(i * n + i)] = 1;
    CHECK(effective_rank(from_vector(eye, {n, n})) == doctest::Approx(double(n)).epsilon(1e-12));
  }
  // u v^T has one non-zero singular value.
  std::vector<double> outer;
  for (double u : {1.0, -2.0, 3.0})
    for (double v : {4.0, 5.0, -6.0, 7.0}) outer.push_back(u * v);
  CHECK(effective_rank(from_vector(outer, {3, 4}).to(DType::f32)) == doctest::Approx(1.0).epsilon(1e-6));

  const std::vector<double> s{4.0, 2.0, 1.0, 0.5};
  double total = 0, entropy = 0;
  for (double x : s) total += x;
  for (double x : s) entropy -= x / total * std::log(x / total);
  std::vector<double> diag(16, 0.0), wide(4 * 6, 0.0);
  for (size_t i = 0; i < 4; ++i) {
    diag[i * 4 + i] = s[i];
    wide[i * 6 + (5 - i)] = -s[i];  // signs and column order do not change singular values
  }
  CHECK(effective_rank(from_vector(diag, {4, 4})) == doctest::Approx(std::exp(entropy)).epsilon(1e-12));
  CHECK(effective_rank(from_vector(wide, {4, 6})) == doctest::Approx(std::exp(entropy)).epsilon(1e-12));
  CHECK(effective_rank_of(s) == doctest::Approx(std::exp(entropy)));
  CHECK(effective_rank_of({0.0, 0.0}) == 0);
  CHECK_THROWS_AS(effective_rank(zeros({2, 2, 2})), ShapeError);
  CHECK_THROWS_AS(effective_rank_of({1.0, -1.0}), ValueError);
}

TEST_CASE("kv analysis: W_v = W_k gives cosine 1 and W_v = -W_k gives -1 (untied)") {
  for (double sign : {1.0, -1.0}) {
    const auto m = tiny_gpt(nn::Sharing::qkv);
    for (auto& block : m->blocks) {
      NoGradGuard no_grad;
      nn::Linear &k = block->attn.projection(Role::k), &v = block->attn.projection(Role::v);
      k.bias.copy_(zeros(k.bias.shape()));
      v.weight.copy_(k.weight * sign);
      v.bias.copy_(zeros(v.bias.shape()));
    }
    const KvAnalysis a = analyze_gpt(*m, token_batches());
    REQUIRE(a.layers.size() == 2);
    CHECK(a.tokens == 21);
    for (const LayerKv& l : a.layers) {
      CHECK_FALSE(l.cos[size_t(KvPair::kv)].tied);
      CHECK(l.cos[size_t(KvPair::kv)].mean == doctest::Approx(sign).epsilon(1e-6));
      CHECK(std::abs(l.cos[size_t(KvPair::qk)].mean) < 0.99);
      // Same singular values, so the same effective rank, but two matrices: not tied.
      CHECK(l.rank[size_t(Role::v)].erank == doctest::Approx(l.rank[size_t(Role::k)].erank));
      CHECK_FALSE(l.rank[size_t(Role::v)].tied);
    }
    CHECK(a.overall().cos[size_t(KvPair::kv)].mean == doctest::Approx(sign).epsilon(1e-6));
  }
}

TEST_CASE("kv analysis: cos(Q K) and the diagonal mass of the first layer equal a direct computation") {
  const auto m = tiny_gpt(nn::Sharing::qkv, 0, 11);
  const std::vector<Tensor> batches = token_batches();
  double sum = 0, diagonal = 0, uniform = 0;
  int64_t n = 0, queries = 0;
  {
    NoGradGuard no_grad;
    for (const Tensor& ids : batches) {
      const Tensor x = m->embed(ids, 0);
      const Tensor a = m->blocks[0]->ln1.forward(x);
      const int64_t B = ids.size(0), T = ids.size(1);
      const auto p = m->blocks[0]->attn.probabilities(a).to_vector<double>();  // [B, 2 heads, T, T]
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < 2; ++h)
          for (int64_t t = 0; t < T; ++t, ++queries) {
            diagonal += p[size_t(((b * 2 + h) * T + t) * T + t)];
            uniform += 1.0 / double(t + 1);  // causal
          }
      const auto q = m->blocks[0]->attn.projection(Role::q).forward(a).to_vector<double>();
      const auto k = m->blocks[0]->attn.projection(Role::k).forward(a).to_vector<double>();
      for (int64_t t = 0; t < ids.numel(); ++t) {
        double dot = 0, nq = 0, nk = 0;
        for (int64_t i = 0; i < 16; ++i) {
          const double qi = q[size_t(t * 16 + i)], ki = k[size_t(t * 16 + i)];
          dot += qi * ki, nq += qi * qi, nk += ki * ki;
        }
        sum += dot / std::sqrt(nq * nk);
        ++n;
      }
    }
  }
  const KvAnalysis r = analyze_gpt(*m, batches);
  CHECK(r.layers[0].cos[size_t(KvPair::qk)].mean == doctest::Approx(sum / double(n)).epsilon(1e-5));
  CHECK(r.layers[0].diagonal == doctest::Approx(diagonal / double(queries)).epsilon(1e-5));
  CHECK(r.layers[0].diagonal_uniform == doctest::Approx(uniform / double(queries)).epsilon(1e-12));
  CHECK(r.layers[0].rank[size_t(Role::q)].max_rank == 16);
}

TEST_CASE("kv analysis: MQA's K is repeated over the query heads before meeting Q") {
  const auto m = tiny_gpt(nn::Sharing::qkv, 1);  // 2 query heads of 8, one KV head of 8
  for (auto& block : m->blocks) {
    NoGradGuard no_grad;
    nn::Linear &q = block->attn.projection(Role::q), &k = block->attn.projection(Role::k);
    REQUIRE(k.out_features() == 8);
    std::vector<float> w = k.weight.to_vector<float>(), b = k.bias.to_vector<float>();
    w.insert(w.end(), w.begin(), w.end());  // W_q = [W_k; W_k]: each query head sees its K
    b.insert(b.end(), b.begin(), b.end());
    q.weight.copy_(from_vector(w, {16, 16}));
    q.bias.copy_(from_vector(b, {16}));
  }
  const KvAnalysis a = analyze_gpt(*m, token_batches());
  CHECK(a.label == "MQA");
  for (const LayerKv& l : a.layers) {
    CHECK_FALSE(l.cos[size_t(KvPair::qk)].tied);
    CHECK(l.cos[size_t(KvPair::qk)].mean == doctest::Approx(1.0).epsilon(1e-6));
    CHECK(std::abs(l.cos[size_t(KvPair::kv)].mean) < 0.99);
    CHECK(l.rank[size_t(Role::k)].max_rank == 8);
    CHECK(l.rank[size_t(Role::q)].erank <= 8.0 + 1e-6);  // [W_k; W_k] has W_k's rank
  }
}

TEST_CASE("kv analysis: roles one projection serves are reported tied") {
  struct Case {
    nn::Sharing sharing;
    std::array<bool, 3> tied;  // kv, qk, qv
  };
  for (const Case& c : {Case{nn::Sharing::qkv, {false, false, false}}, Case{nn::Sharing::q_kv, {true, false, false}},
                        Case{nn::Sharing::qk_v, {false, true, false}}, Case{nn::Sharing::all, {true, true, true}}}) {
    CAPTURE(nn::sharing_name(c.sharing));
    const KvAnalysis a = analyze_gpt(*tiny_gpt(c.sharing), token_batches());
    CHECK(a.label == nn::sharing_name(c.sharing));
    for (const LayerKv& l : {a.layers[0], a.layers[1], a.overall()})
      for (KvPair p : kKvPairs) {
        CHECK(l.cos[size_t(p)].tied == c.tied[size_t(p)]);
        if (c.tied[size_t(p)]) CHECK(l.cos[size_t(p)].mean == 1.0);
      }
    for (const LayerKv& l : a.layers) {
      const ProjectionRank &k = l.rank[size_t(Role::k)], &v = l.rank[size_t(Role::v)];
      CHECK(k.tied == (c.tied[0] || c.tied[1]));
      if (c.tied[0]) CHECK(k.erank == v.erank);
      CHECK(k.erank > 1.0);
      CHECK(k.erank <= double(k.max_rank) + 1e-9);
    }
  }
  const std::string md = kv_markdown({analyze_gpt(*tiny_gpt(nn::Sharing::qkv), token_batches()),
                                      analyze_gpt(*tiny_gpt(nn::Sharing::q_kv), token_batches())});
  for (const char* s :
       {"| weight cosine | K, V | 0.73 (paper, trained QKV) |", "| weight cosine | Q, K | 0.42",
        "| weight cosine | Q, V | 0.31", "| linear CKA | K, V | 0.70 (the authors' later measure, 300M) |",
        "| linear CKA | Q, K | – |", "| token cosine | K, V | – |", "687 vs 702 of 1024", "1 (tied)",
        "## Q-K=V per layer", "Roy & Vetterli", "Kornblith"}) {
    CAPTURE(s);
    CHECK(md.find(s) != std::string::npos);
  }
}

TEST_CASE("kv analysis: a language-model run folder read end to end") {
  test::TempDir out("kv-analysis");
  const auto e = experiment::load_experiment(std::string(QKV_SOURCE_DIR) + "/experiments/lm/shakespeare.yaml", "",
                                             {"model.vocab=64", "model.context=16", "model.d_model=16", "model.heads=2",
                                              "model.layers=2", "sweep.variants=[Q-K=V]"});
  const experiment::Run& run = e.runs.at(0);
  const experiment::RunDir dir(out.path, run);
  CHECK(error_of([&] { open_lm_run(dir.path(), "analyze"); }).find(dir.path().string()) !=
        std::string::npos);  // no folder
  std::filesystem::create_directories(dir.path());
  CHECK(error_of([&] { open_lm_run(dir.path(), "analyze"); }).find("no config.yaml") != std::string::npos);
  dir.start(run.config);
  const std::string no_checkpoint = error_of([&] { open_lm_run(dir.path(), "analyze"); });
  CHECK(no_checkpoint.find("no checkpoint") != std::string::npos);
  CHECK(no_checkpoint.find(dir.path().string()) != std::string::npos);

  Generator gen(1);
  nn::GPT trained(experiment::gpt_config(run.config.as<experiment::LmConfig>(), run.variant), &gen);
  loops::LmLoopState state;
  state.step = 7;
  loops::save_lm_checkpoint(trained, {}, state, dir.path(), 1);
  const LmRunFiles f = open_lm_run(dir.path(), "analyze");
  CHECK(f.checkpoint.filename().string().find("step_00000007") == 0);
  REQUIRE(run_output_root(f).has_value());
  CHECK(std::filesystem::equivalent(*run_output_root(f), out.path));
  const auto moved = out.path / "moved";  // not <out>/<experiment>/<run id>: its tokens are not found
  std::filesystem::copy(dir.path(), moved, std::filesystem::copy_options::recursive);
  CHECK_FALSE(run_output_root(open_lm_run(moved, "analyze")).has_value());

  std::vector<int32_t> val;
  for (int32_t i = 0; i < 300; ++i) val.push_back(i % 60);
  test::write_dataset(*run_output_root(f) / "tokens" / "shakespeare", {{"train", {val}}, {"val", {val}}}, 64, 63);
  const auto folder = *run_output_root(f) / "tokens" / "shakespeare";
  const std::vector<Tensor> batches = validation_batches(folder, "val", 16, 100, 4);
  std::vector<int64_t> seen;
  for (const Tensor& b : batches) {
    CHECK(b.size(0) <= 4);
    for (int64_t id : b.to_vector<int64_t>()) seen.push_back(id);
  }
  REQUIRE(seen.size() == 100);
  for (size_t i = 0; i < seen.size(); ++i) CHECK(seen[i] == int64_t(i % 60));
  // More than the split holds: every whole window (a window needs context + 1 tokens).
  int64_t all = 0;
  for (const Tensor& b : validation_batches(folder, "val", 16, 1000000, 4)) all += b.numel();
  CHECK(all == (300 - 1) / 16 * 16);

  nn::GPT model(experiment::gpt_config(f.config, f.run.variant), &gen);
  model.load(f.checkpoint.string());
  model.eval();
  const KvAnalysis a = analyze_gpt(model, batches);
  CHECK(a.tokens == 100);
  CHECK(a.label == "Q-K=V");
  CHECK(a.layers.at(1).cos[size_t(KvPair::kv)].tied);
  trained.eval();
  const auto again = analyze_gpt(trained, batches);  // the checkpoint holds the trained weights
  CHECK(again.layers[1].cos[size_t(KvPair::qk)].mean == doctest::Approx(a.layers[1].cos[size_t(KvPair::qk)].mean));

  write_kv_csv({a}, out.path / "analysis.csv");
  const std::string csv = test::read_file(out.path / "analysis.csv");
  CHECK(csv.rfind("run,variant,family,checkpoint,tokens,layer,quantity,value,tied,max_rank\n", 0) == 0);
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 1 + 3 * 14);  // header; layers 0, 1 and the mean
  for (const char* q : {",mean,cos_kv,1.000000,1,", ",mean,cka_kv,1.000000,1,", ",mean,wcos_kv,1.000000,1,"})
    CHECK(csv.find(q) != std::string::npos);
  const Figure fig = kv_figure({a});
  REQUIRE(fig.lines.size() == 4);  // weight cosine, CKA, token cosine, effective rank
  CHECK(fig.lines[0].series.size() == 3);
  REQUIRE(fig.lines[3].series.size() == 2);  // W_q and the one K=V weight
  CHECK(fig.lines[3].series[1].label == "W_k=W_v");
  CHECK(fig.lines[3].series[1].y.size() == 2);
}

TEST_CASE("kv analysis: a run of another family is refused and named") {
  test::TempDir out("kv-analysis");
  const auto e = experiment::load_experiment(std::string(QKV_SOURCE_DIR) + "/experiments/synthetic/sort.yaml");
  const experiment::RunDir dir(out.path, e.runs.at(0));
  dir.start(e.runs.at(0).config);
  const std::string msg = error_of([&] { open_lm_run(dir.path(), "analyze"); });
  CHECK(msg.find("synthetic") != std::string::npos);
  CHECK(msg.find("only language-model runs") != std::string::npos);
  CHECK(msg.find(dir.path().string()) != std::string::npos);
}

TEST_CASE("kv analysis: weight cosine and linear CKA against their definitions") {
  // Weight cosine: flattened; the negation is -1; shapes that differ have none.
  const Tensor w = randn({8, 6}, {}, nullptr);
  CHECK(weight_cosine(w, w * 3.0) == doctest::Approx(1.0));
  CHECK(weight_cosine(w, -w) == doctest::Approx(-1.0));
  CHECK(std::isnan(weight_cosine(w, randn({4, 6}, {}, nullptr))));

  // CKA is invariant to an orthogonal map and to scale: W_v = 2 R W_k gives CKA(K, V) = 1 while
  // their weight cosine is not 1; a direct computation over the centred outputs agrees.
  for (int64_t kv : {0, 1}) {
    CAPTURE(kv);
    auto m = tiny_gpt(nn::Sharing::qkv, kv);
    nn::Attention& attn = m->blocks[0]->attn;
    const int64_t kw = attn.projection(Role::k).weight.size(0);
    // R: the rows reversed with alternating signs, an orthogonal map of the K outputs.
    std::vector<int64_t> reversed;
    std::vector<float> signs;
    for (int64_t i = 0; i < kw; ++i) {
      reversed.push_back(kw - 1 - i);
      signs.push_back(i % 2 ? -1.0f : 1.0f);
    }
    {
      NoGradGuard no_grad;
      const Tensor& wk = attn.projection(Role::k).weight;
      attn.projection(Role::v).weight.copy_(index_select(wk, 0, from_vector(reversed, {kw})) *
                                            from_vector(signs, {kw, 1}) * 2.0);
      attn.projection(Role::v).bias.copy_(randn({kw}, {}, nullptr));
    }
    const KvAnalysis a = analyze_gpt(*m, token_batches());
    CHECK(a.layers[0].cka[size_t(KvPair::kv)].mean == doctest::Approx(1.0).epsilon(1e-6));
    CHECK(a.layers[0].weight_cos[size_t(KvPair::kv)].mean < 0.9);
    CHECK(a.layers[0].cka[size_t(KvPair::qk)].mean < 0.999);
    CHECK(std::isnan(a.layers[0].weight_cos[size_t(KvPair::qk)].mean) == (kv == 1));  // MQA: K is narrower than Q
  }
}
