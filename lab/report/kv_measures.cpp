#include "lab/report/kv_measures.h"

#include <Eigen/Eigenvalues>
#include <algorithm>
#include <cmath>
#include <map>

#include "autograd/grad_mode.h"
#include "nn/attention.h"
#include "nn/variant.h"
#include "tensor/format.h"

namespace qkv::report {

using nn::Role;
using Matrix = Eigen::MatrixXd;
using RowMajorF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

namespace {

constexpr std::array<std::array<Role, 2>, 3> kPairRoles{{{Role::k, Role::v}, {Role::q, Role::k}, {Role::q, Role::v}}};

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

Matrix to_matrix(const Tensor& w) {
  const std::vector<double> v = w.to(DType::f32).cpu().to_vector<double>();
  return Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(v.data(), w.size(0),
                                                                                                  w.size(1));
}

// One attention layer's running sums over the inputs it saw.
struct LayerSums {
  const nn::Attention* attention = nullptr;
  std::array<double, 3> cos{};  // token cosines, by KvPair
  Matrix xtx;                   // sum of x^T x over the tokens
  Eigen::VectorXd x;            // sum of x
  int64_t tokens = 0;
  double diagonal = 0, uniform = 0;  // sums of P[t, t] and of uniform attention's, over heads and queries
  int64_t queries = 0;               // (head, query) pairs summed

  // The diagonal of every head's attention probabilities, one sequence at a time (a [H, T, T]
  // map at a time), read on the device.
  void add_diagonal(const nn::Attention& a, const Tensor& input) {
    const int64_t T = input.size(1), H = a.config().heads;
    std::vector<int64_t> on_diagonal;
    for (int64_t t = 0; t < T; ++t) on_diagonal.push_back(t * (T + 1));
    const Tensor index = from_vector(on_diagonal, {T}, input.device());
    for (int64_t b = 0; b < input.size(0); ++b) {
      const Tensor p = a.probabilities(input.slice(0, b, b + 1)).reshape({H, T * T});
      for (float v : index_select(p, 1, index).to(DType::f32).cpu().to_vector<float>()) diagonal += v;
      for (int64_t t = 0; t < T; ++t) uniform += double(H) / double(a.config().causal ? t + 1 : T);
      queries += H * T;
    }
  }

  void add(const nn::Attention& a, const Tensor& input) {
    const nn::AttentionConfig& c = a.config();
    const nn::SharingPattern& p = c.pattern();
    const int64_t d = input.size(-1), n = input.numel() / d;
    const Tensor flat = input.reshape({n, d});
    std::array<std::vector<float>, 3> y;  // by the first role of each projection
    std::array<int64_t, 3> width{};
    for (Role r : nn::kRoles) {
      width[size_t(r)] = a.projection(r).out_features();
      if (first_role(p, r) == r) y[size_t(r)] = a.projection(r).forward(flat).to(DType::f32).cpu().to_vector<float>();
    }
    for (KvPair pair : kKvPairs) {
      const auto [ra, rb] = kPairRoles[size_t(pair)];
      if (p.ties(ra, rb)) continue;
      const auto &ya = y[size_t(first_role(p, ra))], &yb = y[size_t(first_role(p, rb))];
      const int64_t wa = width[size_t(ra)], wb = width[size_t(rb)];
      for (int64_t t = 0; t < n; ++t)
        cos[size_t(pair)] += token_cosine(ya.data() + t * wa, wa, yb.data() + t * wb, wb, c.head_dim());
    }
    if (input.dim() == 3) add_diagonal(a, input);
    const std::vector<float> xs = flat.to(DType::f32).cpu().to_vector<float>();
    const Matrix X = Eigen::Map<const RowMajorF>(xs.data(), n, d).cast<double>();
    if (tokens == 0) {
      xtx = Matrix::Zero(d, d);
      x = Eigen::VectorXd::Zero(d);
    }
    xtx.noalias() += X.transpose() * X;
    x += X.colwise().sum().transpose();
    tokens += n;
  }

  LayerKv measure() const {
    const nn::SharingPattern& p = attention->config().pattern();
    const Matrix cov = xtx - x * x.transpose() / double(tokens);  // the centred inputs' X~^T X~
    std::array<Matrix, 3> w, wc;                                  // W and W C by role
    for (Role r : nn::kRoles) {
      w[size_t(r)] = to_matrix(attention->projection(r).weight);
      wc[size_t(r)] = w[size_t(r)] * cov;
    }
    LayerKv layer;
    layer.diagonal = queries > 0 ? diagonal / double(queries) : NAN;
    layer.diagonal_uniform = queries > 0 ? uniform / double(queries) : NAN;
    for (KvPair pair : kKvPairs) {
      const auto [ra, rb] = kPairRoles[size_t(pair)];
      const bool tied = p.ties(ra, rb);
      const size_t a = size_t(ra), b = size_t(rb);
      layer.cos[size_t(pair)] = {tied ? 1.0 : cos[size_t(pair)] / double(tokens), tied};
      const double cross = (wc[b] * w[a].transpose()).squaredNorm();
      const double self = (wc[a] * w[a].transpose()).norm() * (wc[b] * w[b].transpose()).norm();
      layer.cka[size_t(pair)] = {tied ? 1.0 : (self > 0 ? cross / self : NAN), tied};
      layer.weight_cos[size_t(pair)] = {
          tied ? 1.0 : weight_cosine(attention->projection(ra).weight, attention->projection(rb).weight), tied};
    }
    for (Role r : nn::kRoles) {
      ProjectionRank& pr = layer.rank[size_t(r)];
      const Tensor& weight = attention->projection(r).weight;
      pr.max_rank = std::min(weight.size(0), weight.size(1));
      pr.tied = std::count_if(nn::kRoles.begin(), nn::kRoles.end(), [&](Role o) { return p.ties(o, r); }) > 1;
      pr.slot = std::string(p.slot[size_t(r)]);
      const Role first = first_role(p, r);
      pr.erank = first != r ? layer.rank[size_t(first)].erank : effective_rank(weight.cpu());
    }
    return layer;
  }
};

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
  const Matrix m = to_matrix(matrix);
  // Singular values as square roots of the smaller Gram matrix's eigenvalues: in double this is
  // far more precise than the entropy needs, and a fraction of an SVD's compile time.
  const Matrix gram = m.rows() >= m.cols() ? Matrix(m.transpose() * m) : Matrix(m * m.transpose());
  const Eigen::SelfAdjointEigenSolver<Matrix> eig(gram, Eigen::EigenvaluesOnly);
  std::vector<double> s;
  for (double lambda : eig.eigenvalues()) s.push_back(std::sqrt(std::max(lambda, 0.0)));
  return effective_rank_of(s);
}

double weight_cosine(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return NAN;
  const std::vector<double> x = a.to(DType::f32).cpu().to_vector<double>(),
                            y = b.to(DType::f32).cpu().to_vector<double>();
  double dot = 0, nx = 0, ny = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    dot += x[i] * y[i];
    nx += x[i] * x[i];
    ny += y[i] * y[i];
  }
  return dot / std::max(std::sqrt(nx * ny), 1e-12);
}

const char* pair_label(KvPair p) {
  static constexpr std::array<const char*, 3> names{"cos(K, V)", "cos(Q, K)", "cos(Q, V)"};
  return names[size_t(p)];
}
const char* pair_key(KvPair p) {
  static constexpr std::array<const char*, 3> keys{"cos_kv", "cos_qk", "cos_qv"};
  return keys[size_t(p)];
}
const char* pair_names(KvPair p) {
  static constexpr std::array<const char*, 3> names{"K, V", "Q, K", "Q, V"};
  return names[size_t(p)];
}

LayerKv KvAnalysis::overall() const {
  LayerKv m;
  if (layers.empty()) return m;
  m = layers.front();
  m.diagonal = m.diagonal_uniform = 0;
  for (size_t i = 0; i < 3; ++i) {
    m.cos[i].mean = m.cka[i].mean = m.weight_cos[i].mean = m.rank[i].erank = 0;
    for (const LayerKv& l : layers) {
      m.cos[i].mean += l.cos[i].mean / double(layers.size());
      m.cka[i].mean += l.cka[i].mean / double(layers.size());
      m.weight_cos[i].mean += l.weight_cos[i].mean / double(layers.size());
      m.rank[i].erank += l.rank[i].erank / double(layers.size());
    }
  }
  for (const LayerKv& l : layers) {
    m.diagonal += l.diagonal / double(layers.size());
    m.diagonal_uniform += l.diagonal_uniform / double(layers.size());
  }
  return m;
}

KvAnalysis analyze_attention(const std::function<void()>& feed) {
  NoGradGuard no_grad;
  std::vector<LayerSums> layers;
  std::map<const nn::Attention*, size_t> index;
  {
    nn::AttentionInputProbe probe([&](const nn::Attention& a, const Tensor& x) {
      check<ValueError>(!a.is_training(), "kv analysis: the model is in training mode (dropout on); call eval()");
      auto [it, fresh] = index.emplace(&a, layers.size());
      if (fresh) layers.push_back({&a, {}, {}, {}, 0, 0, 0, 0});
      layers[it->second].add(a, x);
    });
    feed();
  }
  check<ValueError>(!layers.empty(), "kv analysis: the model ran no attention layer on the batches fed");
  KvAnalysis out;
  const nn::AttentionConfig& c = layers.front().attention->config();
  out.label = nn::variant_name({c.sharing, c.kv_heads, c.pos2d > 0});
  out.d_model = c.d_model;
  out.tokens = layers.front().tokens;
  for (const LayerSums& l : layers) out.layers.push_back(l.measure());
  return out;
}

KvAnalysis analyze_gpt(const nn::GPT& model, const std::vector<Tensor>& batches) {
  check<ValueError>(!batches.empty(), "kv analysis: no token batches to feed the model");
  check<ValueError>(!model.is_training(), "kv analysis: the model is in training mode (dropout on); call eval()");
  const nn::GPTConfig& c = model.config();
  const Device device = model.wte.weight.device();
  for (const Tensor& batch : batches)
    check<ShapeError>(batch.dim() == 2 && batch.size(1) >= 1 && batch.size(1) <= c.context,
                      "kv analysis: expected token ids [batch, len] with len <= the context ", c.context, ", got ",
                      shape_str(batch.shape()));
  KvAnalysis out = analyze_attention([&] {
    for (const Tensor& batch : batches) model.forward(batch.to(DType::i64).to(device));
  });
  out.family = "gpt";
  out.inputs = "validation tokens";
  return out;
}

}  // namespace qkv::report
