// The conversion to K=V, per layer and per KV head h, in row-vector form (activations are rows,
// weights nn.Linear's [out, in]). x~ = [x, 1] is the attention input with a one appended, so a
// projection with its bias is one matrix: k = x~ K~^T with K~ = [W_k,h | b_k,h] (dh x (d+1)),
// v = x~ V~^T, q_i = x~ Q~_i^T for the query heads i of h's group G.
//
// The converted layer computes one u = x~ U^T per KV head. Attention sees K only through the
// scores q_i k^T and V only through the outputs, o_i W_o,i^T with o_i = sum_j p_ij v_j and W_o,i
// the d x dh column block of W_o for head i. So any maps A, C (dh x dh) with k ~ u A, v ~ u C
// can be folded into the neighbours exactly:
//   q_i k^T ~ q_i A^T u^T       ->  Q~_i' = A Q~_i            (W_q,i' = A W_q,i, b_q,i' = b_q,i A^T)
//   o_i W_o,i^T ~ (p u) C W_o,i^T  ->  W_o,i' = W_o,i C^T         (softmax rows sum to 1, so the
//                                                               bias part of u passes through)
// copy-k and average take U = K~ or (K~ + V~)/2 and A = C = I (so they serve rotary positions,
// which svd's folded A does not: RoPE turns the keys after A).
//
// svd: on calibration inputs X~ (n x (d+1)), Y = X~ [K~^T | V~^T] (n x 2dh) and Y ~ u [A | C]
// has rank dh, so the best such Y is a rank-dh approximation. What matters is not Y itself:
// a key error e costs q_i e^T in the scores and a value error w costs w W_o,i^T in the outputs,
// so the K half is weighted by S_k = (sum_i E[q_i^T q_i])^(1/2) and the V half by
// S_v = (sum_i W_o,i^T W_o,i)^(1/2), each then scaled to unit norm (scores and outputs count
// alike): D = diag(S_k / a_k, S_v / a_v), Y_w = Y D. The best rank-dh Y_w is Y_w W W^T, W the
// top dh eigenvectors of Y_w^T Y_w = D P G P^T D (Eckart-Young), with P = [K~; V~] and
// G = X~^T X~ (all from G: no activations kept). Its shared projection is u = Y D W, so
// U = W^T D P. Given U, the best maps are least squares, which a right weighting does not move:
// A = (U G U^T)^-1 U G K~^T, C = (U G U^T)^-1 U G V~^T. (U is first rotated towards the keys,
// orthogonal Procrustes, and scaled to their norm, so W_kv looks like a W_k for fine-tuning.)
// When V = K M^T exactly (W_v,h = M W_k,h and b_v,h = M b_k,h, M invertible), Y has rank dh and
// the converted model computes what the source does.
#include "lab/infer/convert.h"

#include <Eigen/Cholesky>
#include <Eigen/Eigenvalues>
#include <Eigen/SVD>
#include <cmath>
#include <map>

#include "autograd/grad_mode.h"

namespace qkv::infer {

namespace {

using Mat = Eigen::MatrixXd;
using nn::Role;

std::string variant_text(const nn::GPTConfig& c) {
  return nn::variant_name({c.attention.sharing, c.attention.kv_heads, false, c.attention.v_rank, c.attention.linear});
}

// A Linear as [W | b] (out x (in + 1)).
Mat augmented(const nn::Linear& l) {
  const int64_t out = l.out_features(), in = l.in_features();
  const std::vector<double> w = l.weight.to_vector<double>();
  Mat m(out, in + 1);
  for (int64_t r = 0; r < out; ++r)
    for (int64_t c = 0; c < in; ++c) m(r, c) = w[size_t(r * in + c)];
  if (l.bias.defined()) {
    const std::vector<double> b = l.bias.to_vector<double>();
    for (int64_t r = 0; r < out; ++r) m(r, in) = b[size_t(r)];
  } else {
    m.col(in).setZero();
  }
  return m;
}

// Writes [W | b] back into a Linear of that shape.
void assign(nn::Linear& l, const Mat& m) {
  const int64_t out = l.out_features(), in = l.in_features();
  std::vector<float> w(static_cast<size_t>(out * in));
  std::vector<float> b(static_cast<size_t>(out));
  for (int64_t r = 0; r < out; ++r) {
    for (int64_t c = 0; c < in; ++c) w[size_t(r * in + c)] = float(m(r, c));
    b[size_t(r)] = float(m(r, in));
  }
  NoGradGuard no_grad;
  l.weight.copy_(from_vector(w, l.weight.shape()));
  if (l.bias.defined()) l.bias.copy_(from_vector(b, l.bias.shape()));
}

// The symmetric square root of a positive semi-definite matrix, its small eigenvalues raised to
// a floor relative to the largest (so that the weighting stays invertible).
Mat sqrt_psd(const Mat& m) {
  const Eigen::SelfAdjointEigenSolver<Mat> eig(m);
  const double floor = std::max(eig.eigenvalues().maxCoeff(), 1e-300) * 1e-8;
  const Eigen::VectorXd s = eig.eigenvalues().cwiseMax(floor).cwiseSqrt();
  return eig.eigenvectors() * s.asDiagonal() * eig.eigenvectors().transpose();
}

// One KV head's fit: the shared projection U (dh x (d+1)) and the maps A, C (dh x dh).
struct HeadFit {
  Mat u, a, c;
};

// The svd fit of P = [K~; V~] (2dh x (d+1)) under the weighting D.
HeadFit fit_svd(const Mat& p, const Mat& d_w, const Mat& g, int64_t dh) {
  const Mat gram = d_w * p * g * p.transpose() * d_w;
  const Eigen::SelfAdjointEigenSolver<Mat> eig(gram);  // eigenvalues ascending
  const Mat top = eig.eigenvectors().rightCols(dh);    // 2dh x dh
  Mat u = top.transpose() * d_w * p;                   // dh x (d+1)
  const Mat k = p.topRows(dh), v = p.bottomRows(dh);
  // Rotate u towards the keys (u R ~ k) and give it their norm.
  const Eigen::JacobiSVD<Mat> svd(u * g * k.transpose(), Eigen::ComputeFullU | Eigen::ComputeFullV);
  u = (svd.matrixU() * svd.matrixV().transpose()).transpose() * u;
  const double uu = (u * g * u.transpose()).trace(), kk = (k * g * k.transpose()).trace();
  if (uu > 0 && kk > 0) u *= std::sqrt(kk / uu);
  const Eigen::LDLT<Mat> ugu((u * g * u.transpose()).eval());
  return {u, ugu.solve(u * g * k.transpose()), ugu.solve(u * g * v.transpose())};
}

}  // namespace

std::string convert_method_names() {
  std::string s;
  for (const auto& [name, m] : experiment::EnumNames<ConvertMethod>::values)
    s += (s.empty() ? "" : ", ") + std::string(name);
  return s;
}

ConvertMethod parse_convert_method(const std::string& name, const std::string& what) {
  const auto m = experiment::enum_from_name<ConvertMethod>(name);
  check<ValueError>(m.has_value(), what, ": unknown method '", name, "'; expected one of ", convert_method_names());
  return *m;
}

nn::Variant shared_kv_target(const nn::GPTConfig& source) {
  const nn::AttentionConfig& a = source.attention;
  check<ValueError>(a.sharing == nn::Sharing::qkv && !a.linear, "convert: the source is ", variant_text(source),
                    "; only softmax models whose Q, K and V have projections of their own (QKV, GQA-g, MQA) are ",
                    "converted (the per-head maps fold through softmax scores, not through a feature map)");
  return {nn::Sharing::q_kv, a.kv_heads, false};
}

double Conversion::mean_error() const {
  if (layer_error.empty()) return NAN;
  double s = 0;
  for (double e : layer_error) s += e;
  return s / double(layer_error.size());
}

Calibration calibrate(nn::GPT& source, const std::vector<Tensor>& batches) {
  NoGradGuard no_grad;
  source.eval();
  const int64_t d = source.config().d_model(), L = source.config().layers;
  Calibration cal;
  cal.gram.assign(size_t(L), Mat::Zero(d + 1, d + 1));
  const Device device = source.wte.weight.device();
  for (const Tensor& ids : batches) {
    check<ShapeError>(ids.dim() == 2, "convert: calibration batches are token ids [batch, len], got ",
                      shape_str(ids.shape()));
    const int64_t n = ids.numel();
    Tensor x = source.embed(ids.to(device), 0);
    for (int64_t l = 0; l < L; ++l) {
      const nn::GPTBlock& b = *source.blocks[size_t(l)];
      const std::vector<double> v = b.ln1.forward(x).to_vector<double>();
      const Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>> m(v.data(), n, d);
      Mat& g = cal.gram[size_t(l)];
      g.topLeftCorner(d, d).noalias() += m.transpose() * m;
      const Eigen::VectorXd sums = m.colwise().sum().transpose();
      g.topRightCorner(d, 1) += sums;
      g.bottomLeftCorner(1, d) += sums.transpose();
      g(d, d) += double(n);
      if (l + 1 < L) x = b.forward(x);
    }
    cal.tokens += n;
  }
  return cal;
}

Conversion convert_to_shared_kv(const nn::GPT& source, ConvertMethod method, const Calibration& cal) {
  const nn::GPTConfig& sc = source.config();
  const nn::Variant target = shared_kv_target(sc);
  check<ValueError>(method != ConvertMethod::svd || !cal.empty(),
                    "convert: the svd method needs calibration activations (calibration batches of training tokens)");
  // svd folds a map A of each head's keys into W_q; rotary positions turn the keys after it, and
  // a rotation does not commute with A, so the folded map would not stand for it.
  check<ValueError>(
      method != ConvertMethod::svd || !sc.attention.rope,
      "convert: --method svd folds a map of the keys into W_q, which rotary positions would turn apart; a "
      "model with rotary positions (model.kind llama) converts by --method copy-k or average");
  check<ValueError>(cal.empty() || int64_t(cal.gram.size()) == sc.layers, "convert: calibration of ", cal.gram.size(),
                    " layers for a model of ", sc.layers);
  nn::GPTConfig tc = sc;
  tc.attention.sharing = target.sharing;
  Conversion out;
  out.model = std::make_unique<nn::GPT>(tc);
  {
    std::map<std::string, Tensor> state;
    for (auto& [name, t] : source.state_dict()) state.emplace(name, t.to(kCPU));
    out.model->load_state_dict(state, /*strict=*/false);  // everything but the K=V projection, set below
  }
  const int64_t d = sc.d_model(), H = sc.attention.heads, Hk = sc.attention.kv_head_count();
  const int64_t dh = sc.attention.head_dim(), group = H / Hk;
  for (int64_t l = 0; l < sc.layers; ++l) {
    const nn::Attention& sa = source.blocks[size_t(l)]->attn;
    nn::Attention& ta = out.model->blocks[size_t(l)]->attn;
    const Mat q = augmented(sa.projection(Role::q)), k = augmented(sa.projection(Role::k));
    const Mat v = augmented(sa.projection(Role::v)), o = augmented(sa.o);
    Mat q_new = q, o_new = o, kv(Hk * dh, d + 1);
    double err = 0, total = 0;
    for (int64_t h = 0; h < Hk; ++h) {
      Mat p(2 * dh, d + 1);
      p << k.middleRows(h * dh, dh), v.middleRows(h * dh, dh);
      Mat d_w;  // the weighting D (2dh x 2dh), when calibrated
      if (!cal.empty()) {
        const Mat& g = cal.gram[size_t(l)];
        Mat mq = Mat::Zero(dh, dh), mo = Mat::Zero(dh, dh);
        for (int64_t i = h * group; i < (h + 1) * group; ++i) {
          const Mat qi = q.middleRows(i * dh, dh);
          mq += qi * g * qi.transpose();
          const Mat oi = o.block(0, i * dh, d, dh);
          mo += oi.transpose() * oi;
        }
        d_w = Mat::Zero(2 * dh, 2 * dh);
        const Mat sk = sqrt_psd(mq), sv = sqrt_psd(mo);
        const double nk =
            std::sqrt(std::max((sk * p.topRows(dh) * g * p.topRows(dh).transpose() * sk).trace(), 1e-300));
        const double nv =
            std::sqrt(std::max((sv * p.bottomRows(dh) * g * p.bottomRows(dh).transpose() * sv).trace(), 1e-300));
        d_w.topLeftCorner(dh, dh) = sk / nk;
        d_w.bottomRightCorner(dh, dh) = sv / nv;
      }
      HeadFit f;
      switch (method) {
        case ConvertMethod::copy_k: f = {p.topRows(dh), Mat::Identity(dh, dh), Mat::Identity(dh, dh)}; break;
        case ConvertMethod::average:
          f = {(p.topRows(dh) + p.bottomRows(dh)) / 2, Mat::Identity(dh, dh), Mat::Identity(dh, dh)};
          break;
        case ConvertMethod::svd: f = fit_svd(p, d_w, cal.gram[size_t(l)], dh); break;
      }
      kv.middleRows(h * dh, dh) = f.u;
      for (int64_t i = h * group; i < (h + 1) * group; ++i) {
        q_new.middleRows(i * dh, dh) = f.a * q.middleRows(i * dh, dh);
        o_new.block(0, i * dh, d, dh) = o.block(0, i * dh, d, dh) * f.c.transpose();
      }
      if (!cal.empty()) {  // what the converted head gives for [K | V]: u [A | C] = x~ (B)^T
        const Mat& g = cal.gram[size_t(l)];
        Mat b(2 * dh, d + 1);
        b << f.a.transpose() * f.u, f.c.transpose() * f.u;
        const Mat e = d_w * (p - b);
        err += (e * g * e.transpose()).trace();
        total += (d_w * p * g * p.transpose() * d_w).trace();
      }
    }
    assign(ta.projection(Role::q), q_new);
    assign(ta.projection(Role::k), kv);  // the one projection serving K and V
    assign(ta.o, o_new);
    if (!cal.empty()) out.layer_error.push_back(total > 0 ? std::max(err, 0.0) / total : 0.0);
  }
  return out;
}

}  // namespace qkv::infer
