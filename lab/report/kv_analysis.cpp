#include "lab/report/kv_analysis.h"

#include <Eigen/Eigenvalues>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "autograd/grad_mode.h"
#include "io/atomic_file.h"
#include "nn/variant.h"
#include "tensor/format.h"
#include "train/data/tokens/token_batches.h"

namespace qkv::report {

namespace fs = std::filesystem;
using nn::Role;

namespace {

// PAPER.md, end of "Language modeling": measured in trained QKV models.
constexpr std::array<double, 3> kPaperCos{0.73, 0.42, 0.31};  // by KvPair
constexpr double kPaperRankA = 687, kPaperRankB = 702, kPaperWidth = 1024;

constexpr std::array<std::array<Role, 2>, 3> kPairRoles{{{Role::k, Role::v}, {Role::q, Role::k}, {Role::q, Role::v}}};

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// Cosine between a and b, each a row of heads of width dh; the one with fewer heads is repeated
// over contiguous groups of the other's heads, as attention pairs query heads with KV heads.
double token_cosine(const float* a, int64_t wa, const float* b, int64_t wb, int64_t dh) {
  if (wa < wb) return token_cosine(b, wb, a, wa, dh);
  const int64_t group = wa / wb;
  double dot = 0, na = 0, nb = 0;
  for (int64_t i = 0; i < wa; ++i) {
    const double x = a[i], y = b[(i / dh) / group * dh + i % dh];
    dot += x * y;
    na += x * x;
  }
  for (int64_t i = 0; i < wb; ++i) nb += double(b[i]) * double(b[i]);
  return dot / std::max(std::sqrt(na * double(group) * nb), 1e-8);
}

// The first role served by the projection that serves `r`.
Role first_role(const nn::SharingPattern& p, Role r) {
  for (Role o : nn::kRoles)
    if (p.ties(o, r)) return o;
  return r;
}

}  // namespace

double effective_rank_of(const std::vector<double>& s) {
  double total = 0;
  for (double x : s) {
    check<ValueError>(std::isfinite(x) && x >= 0, "effective rank: singular values must be finite and >= 0, got ", x);
    total += x;
  }
  if (total == 0) return 0;
  double entropy = 0;
  for (double x : s)
    if (x > 0) entropy -= x / total * std::log(x / total);
  return std::exp(entropy);
}

double effective_rank(const Tensor& matrix) {
  check<ShapeError>(matrix.dim() == 2, "effective rank: expected a matrix, got shape ", shape_str(matrix.shape()));
  const std::vector<double> v = matrix.to_vector<double>();
  const Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>> m(v.data(),
                                                                                                   matrix.size(0),
                                                                                                   matrix.size(1));
  // Singular values as square roots of the smaller Gram matrix's eigenvalues: in double this is
  // far more precise than the entropy needs, and a fraction of an SVD's compile time.
  const Eigen::MatrixXd gram =
      m.rows() >= m.cols() ? Eigen::MatrixXd(m.transpose() * m) : Eigen::MatrixXd(m * m.transpose());
  const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(gram, Eigen::EigenvaluesOnly);
  std::vector<double> s;
  for (double lambda : eig.eigenvalues()) s.push_back(std::sqrt(std::max(lambda, 0.0)));
  return effective_rank_of(s);
}

const char* pair_label(KvPair p) {
  static constexpr std::array<const char*, 3> names{"cos(K, V)", "cos(Q, K)", "cos(Q, V)"};
  return names[size_t(p)];
}
const char* pair_key(KvPair p) {
  static constexpr std::array<const char*, 3> keys{"cos_kv", "cos_qk", "cos_qv"};
  return keys[size_t(p)];
}

LayerKv KvAnalysis::overall() const {
  LayerKv m;
  if (layers.empty()) return m;
  m = layers.front();
  for (size_t i = 0; i < 3; ++i) {
    m.cos[i].mean = m.rank[i].erank = 0;
    for (const LayerKv& l : layers) {
      m.cos[i].mean += l.cos[i].mean / double(layers.size());
      m.rank[i].erank += l.rank[i].erank / double(layers.size());
    }
  }
  return m;
}

KvAnalysis analyze_gpt(const nn::GPT& model, const std::vector<Tensor>& batches) {
  check<ValueError>(!batches.empty(), "kv analysis: no token batches to feed the model");
  check<ValueError>(!model.is_training(), "kv analysis: the model is in training mode (dropout on); call eval()");
  NoGradGuard no_grad;
  const nn::GPTConfig& c = model.config();
  const nn::SharingPattern& p = c.attention.pattern();
  const int64_t dh = c.attention.head_dim();
  const Device device = model.wte.weight.device();
  KvAnalysis out;
  out.label = nn::variant_name({c.attention.sharing, c.attention.kv_heads, false});
  out.d_model = c.d_model();
  std::vector<std::array<double, 3>> sums(size_t(c.layers), {0, 0, 0});
  for (const Tensor& batch : batches) {
    check<ShapeError>(batch.dim() == 2 && batch.size(1) >= 1 && batch.size(1) <= c.context,
                      "kv analysis: expected token ids [batch, len] with len <= the context ", c.context, ", got ",
                      shape_str(batch.shape()));
    const Tensor ids = batch.to(DType::i64).to(device);
    const int64_t T = ids.size(1), n = ids.numel();
    Tensor x =
        model.wte.forward(ids) + model.wpe.forward(arange(0.0, double(T), 1.0, TensorOptions(DType::i64, device)));
    for (size_t l = 0; l < model.blocks.size(); ++l) {
      const nn::GPTBlock& b = *model.blocks[l];
      const Tensor a = b.ln1.forward(x);
      std::array<std::vector<float>, 3> y;  // by the first role of each projection
      std::array<int64_t, 3> width{};
      for (Role r : nn::kRoles) {
        width[size_t(r)] = b.attn.projection(r).out_features();
        if (first_role(p, r) == r)
          y[size_t(r)] = b.attn.projection(r).forward(a).to(DType::f32).cpu().to_vector<float>();
      }
      for (KvPair pair : kKvPairs) {
        const auto [ra, rb] = kPairRoles[size_t(pair)];
        if (p.ties(ra, rb)) continue;
        const auto &ya = y[size_t(first_role(p, ra))], &yb = y[size_t(first_role(p, rb))];
        const int64_t wa = width[size_t(ra)], wb = width[size_t(rb)];
        double s = 0;
        for (int64_t t = 0; t < n; ++t) s += token_cosine(ya.data() + t * wa, wa, yb.data() + t * wb, wb, dh);
        sums[l][size_t(pair)] += s;
      }
      x = b.forward(x);
    }
    out.tokens += n;
  }
  for (size_t l = 0; l < model.blocks.size(); ++l) {
    const nn::Attention& attn = model.blocks[l]->attn;
    LayerKv layer;
    for (KvPair pair : kKvPairs) {
      const auto [ra, rb] = kPairRoles[size_t(pair)];
      PairCosine& pc = layer.cos[size_t(pair)];
      pc.tied = p.ties(ra, rb);
      pc.mean = pc.tied ? 1.0 : sums[l][size_t(pair)] / double(out.tokens);
    }
    for (Role r : nn::kRoles) {
      ProjectionRank& pr = layer.rank[size_t(r)];
      const Tensor& w = attn.projection(r).weight;
      pr.max_rank = std::min(w.size(0), w.size(1));
      pr.tied = std::count_if(nn::kRoles.begin(), nn::kRoles.end(), [&](Role o) { return p.ties(o, r); }) > 1;
      pr.slot = std::string(p.slot[size_t(r)]);
      const Role first = first_role(p, r);
      pr.erank = first != r ? layer.rank[size_t(first)].erank : effective_rank(w.cpu());
    }
    out.layers.push_back(layer);
  }
  return out;
}

std::vector<Tensor> validation_batches(const fs::path& token_folder, const std::string& split, int64_t context,
                                       int64_t tokens, int64_t batch) {
  check<ValueError>(context > 0 && tokens > 0 && batch > 0, "kv analysis: context ", context, ", tokens ", tokens,
                    " and batch ", batch, " must be positive");
  data::TokenBatchOptions o;
  o.batch = 1;
  o.context = context;
  o.shuffle = false;
  data::TokenBatches source(token_folder, split, o);
  const int64_t windows = std::min((tokens + context - 1) / context, source.windows_per_epoch());
  tokens = std::min(tokens, windows * context);
  std::vector<Tensor> out;
  std::vector<int64_t> ids;
  const auto flush = [&](int64_t len) {
    if (!ids.empty()) out.push_back(from_vector(ids, {int64_t(ids.size()) / len, len}));
    ids.clear();
  };
  Tensor in, target;
  for (int64_t w = 0; w < windows; ++w) {
    source.next(in, target);
    const std::vector<int64_t> window = in.to_vector<int64_t>();
    const int64_t keep = std::min(context, tokens - w * context);
    if (keep < context) {  // the last window, cut short: a batch of its own
      flush(context);
      ids.assign(window.begin(), window.begin() + keep);
      flush(keep);
      break;
    }
    ids.insert(ids.end(), window.begin(), window.end());
    if (int64_t(ids.size()) == batch * context) flush(context);
  }
  flush(context);
  return out;
}

namespace {

const char* role_weight(Role r) {
  static constexpr std::array<const char*, 3> names{"W_q", "W_k", "W_v"};
  return names[size_t(r)];
}

std::string cos_cell(const PairCosine& c) { return c.tied ? "1 (tied)" : fixed(c.mean, 3); }

std::string rank_cell(const ProjectionRank& r, bool of) {
  std::string s = fixed(r.erank, 1);
  if (of) s += cat(" of ", r.max_rank, " (", fixed(r.erank / double(r.max_rank), 2), ")");
  if (r.tied) s += " (tied)";
  return s;
}

// A column or legend name per run: the variant, with the run's folder name where two share it.
std::vector<std::string> run_names(const std::vector<KvAnalysis>& runs) {
  std::map<std::string, int> count;
  for (const auto& r : runs) ++count[r.label];
  std::vector<std::string> names;
  for (const auto& r : runs) {
    const fs::path f = fs::path(r.run).lexically_normal();
    const std::string leaf = f.filename().empty() ? f.parent_path().filename().string() : f.filename().string();
    names.push_back(count[r.label] > 1 ? cat(r.label, " ", leaf) : r.label);
  }
  return names;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char ch : s) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return q + "\"";
}

}  // namespace

std::string kv_markdown(const std::vector<KvAnalysis>& runs) {
  const std::vector<std::string> names = run_names(runs);
  std::string s = "# Why K=V works: projection similarity and effective rank\n\n";
  s += "| measure | paper (trained QKV) |";
  for (const auto& n : names) s += cat(" ", n, " |");
  s += "\n|---|---|";
  for (size_t i = 0; i < runs.size(); ++i) s += "---|";
  s += "\n";
  std::vector<LayerKv> overall;
  for (const auto& r : runs) overall.push_back(r.overall());
  for (KvPair pair : kKvPairs) {
    s += cat("| ", pair_label(pair), " | ", fixed(kPaperCos[size_t(pair)], 2), " |");
    for (const auto& o : overall) s += cat(" ", cos_cell(o.cos[size_t(pair)]), " |");
    s += "\n";
  }
  s += cat("| effective rank, the paper's pair * | ", fixed(kPaperRankA, 0), " vs ", fixed(kPaperRankB, 0), " of ",
           fixed(kPaperWidth, 0), " (", fixed(kPaperRankA / kPaperWidth, 2), " vs ",
           fixed(kPaperRankB / kPaperWidth, 2), ") |");
  for (const auto& o : overall) {
    const ProjectionRank &k = o.rank[size_t(Role::k)], &v = o.rank[size_t(Role::v)];
    s += cat(" W_k vs W_v: ", fixed(k.erank, 1), " vs ", fixed(v.erank, 1), " of ", k.max_rank, " (",
             fixed(k.erank / double(k.max_rank), 2), " vs ", fixed(v.erank / double(v.max_rank), 2), ") |");
  }
  s += "\n";
  for (Role r : nn::kRoles) {
    s += cat("| effective rank ", role_weight(r), " | - |");
    for (const auto& o : overall) s += cat(" ", rank_cell(o.rank[size_t(r)], true), " |");
    s += "\n";
  }
  s += "\nOurs: the mean over layers of ";
  for (size_t i = 0; i < runs.size(); ++i)
    s += cat(i ? "; " : "", names[i], " = ", runs[i].run, " (", runs[i].checkpoint, ", ", with_commas(runs[i].tokens),
             " validation tokens)");
  s += ".\n\n"
       "cos(A, B): per layer, the outputs X W + b of the A and B projections on the block's attention input X "
       "(after ln1, before the head split), one d_model-wide vector per token; the cosine between a token's two "
       "vectors, averaged over the tokens (a zero vector counts as 0). With fewer KV heads than query heads, K and "
       "V are repeated over their group of query heads before meeting Q. Tied roles (one projection) are the same "
       "tensor: 1 (tied).\n\n"
       "Effective rank (Roy & Vetterli 2007): exp(-sum_i p_i ln p_i), p_i = s_i / sum_j s_j over the singular "
       "values s of the projection's weight (square roots of its Gram matrix's eigenvalues, float64); out of "
       "min(rows, cols), the fraction in brackets.\n\n"
       "* The paper gives two effective ranks, 687 vs 702 of 1024, without saying which matrices they are; ours "
       "shows W_k vs W_v as one reading, and every matrix in the rows below it.\n";
  for (size_t i = 0; i < runs.size(); ++i) {
    const KvAnalysis& r = runs[i];
    s += cat("\n## ", names[i], " per layer\n\n| layer |");
    for (KvPair pair : kKvPairs) s += cat(" ", pair_label(pair), " |");
    for (Role role : nn::kRoles) {
      s += cat(" erank ", role_weight(role));
      if (!r.layers.empty()) s += cat(" (of ", r.layers.front().rank[size_t(role)].max_rank, ")");
      s += " |";
    }
    s += "\n|---|---|---|---|---|---|---|\n";
    auto row = [&](const std::string& name, const LayerKv& l) {
      s += cat("| ", name, " |");
      for (KvPair pair : kKvPairs) s += cat(" ", cos_cell(l.cos[size_t(pair)]), " |");
      for (Role role : nn::kRoles) s += cat(" ", rank_cell(l.rank[size_t(role)], false), " |");
      s += "\n";
    };
    for (size_t l = 0; l < r.layers.size(); ++l) row(std::to_string(l), r.layers[l]);
    row("mean", r.overall());
  }
  return s;
}

void write_kv_csv(const std::vector<KvAnalysis>& runs, const fs::path& file) {
  write_file_atomically(file.string(), [&](std::ostream& os) {
    os << "run,variant,checkpoint,tokens,layer,quantity,value,tied,max_rank\n";
    for (const KvAnalysis& r : runs) {
      const std::string head =
          cat(csv_field(r.run), ",", csv_field(r.label), ",", csv_field(r.checkpoint), ",", r.tokens, ",");
      auto rows = [&](const std::string& layer, const LayerKv& l) {
        for (KvPair pair : kKvPairs) {
          const PairCosine& c = l.cos[size_t(pair)];
          os << head << layer << "," << pair_key(pair) << "," << fixed(c.mean, 6) << "," << (c.tied ? 1 : 0) << ",\n";
        }
        for (Role role : nn::kRoles) {
          const ProjectionRank& p = l.rank[size_t(role)];
          os << head << layer << ",erank_" << char(std::tolower(nn::role_name(role)[0])) << "," << fixed(p.erank, 6)
             << "," << (p.tied ? 1 : 0) << "," << p.max_rank << "\n";
        }
      };
      for (size_t l = 0; l < r.layers.size(); ++l) rows(std::to_string(l), r.layers[l]);
      rows("mean", r.overall());
    }
  });
}

Figure kv_figure(const std::vector<KvAnalysis>& runs) {
  const std::vector<std::string> names = run_names(runs);
  Figure f;
  f.title = "Why K=V works: projection cosine and effective rank per layer";
  f.columns = 2;
  LinePanel cos{"mean cosine between projection outputs", {"layer", false, {}, {}}, {"cosine", false, {}, {}}, {}};
  LinePanel rank{"effective rank of the projection weights",
                 {"layer", false, {}, {}},
                 {"effective rank", false, {}, {}},
                 {}};
  const std::string prefix_sep = runs.size() > 1 ? " " : "";
  for (size_t i = 0; i < runs.size(); ++i) {
    const std::string prefix = runs.size() > 1 ? names[i] : "";
    for (KvPair pair : kKvPairs) {
      Series s{cat(prefix, prefix_sep, pair_label(pair)), {}, {}};
      for (size_t l = 0; l < runs[i].layers.size(); ++l) {
        s.x.push_back(double(l));
        s.y.push_back(runs[i].layers[l].cos[size_t(pair)].mean);
      }
      if (!runs[i].layers.empty() && runs[i].layers.front().cos[size_t(pair)].tied) s.label += " (tied)";
      cos.series.push_back(std::move(s));
    }
    std::vector<std::string> slots;  // one line per projection, named by the roles it serves
    for (Role role : nn::kRoles) {
      if (runs[i].layers.empty()) break;
      const std::string& slot = runs[i].layers.front().rank[size_t(role)].slot;
      if (std::find(slots.begin(), slots.end(), slot) != slots.end()) continue;
      slots.push_back(slot);
      Series s{prefix + prefix_sep, {}, {}};
      for (Role other : nn::kRoles)
        if (runs[i].layers.front().rank[size_t(other)].slot == slot)
          s.label += cat(s.label.size() > prefix.size() + prefix_sep.size() ? "=" : "", role_weight(other));
      for (size_t l = 0; l < runs[i].layers.size(); ++l) {
        s.x.push_back(double(l));
        s.y.push_back(runs[i].layers[l].rank[size_t(role)].erank);
      }
      rank.series.push_back(std::move(s));
    }
  }
  f.lines = {std::move(cos), std::move(rank)};
  return f;
}

}  // namespace qkv::report
