// How alike a trained model's Q, K and V projections are, per attention layer, by four measures
// side by side (none of them is known to be the paper's own; kv_analysis.h prints each with the
// source's number where a source gives one):
//
//   weight cosine  cos(vec W_a, vec W_b) of the flattened projection weights; defined when the
//                  shapes match (under GQA/MQA only cos(K, V))
//   linear CKA     Kornblith et al. 2019 over the outputs Y = X W^T + b on the layer's attention
//                  inputs X: ||Yb~^T Ya~||_F^2 / (||Ya~^T Ya~||_F ||Yb~^T Yb~||_F), Y~ centred over
//                  the tokens; from the inputs' centred covariance C = X~^T X~ alone, since
//                  Yb~^T Ya~ = W_b C W_a^T (the biases cancel), in float64
//   token cosine   per token, the cosine between its A and B outputs (d-wide, after the bias),
//                  averaged over the tokens (a zero vector counts as 0, as PyTorch's
//                  cosine_similarity with eps 1e-8); with fewer KV heads than query heads, K and V
//                  are repeated over their query heads' group before meeting Q
//   diagonal mass  the attention probability a query gives its own position, P[t, t], averaged
//                  over sequences, heads and positions, beside uniform attention's (1/T, or
//                  1/(t+1) when causal): Q=K makes scores symmetric and attention lean on the
//                  diagonal
//   effective rank (Roy & Vetterli 2007) exp(H(p)), p_i = s_i / sum_j s_j over the singular
//                  values s of each weight (square roots of its smaller Gram matrix's eigenvalues,
//                  in float64); n for an orthogonal n x n matrix, 1 for rank one
//
// Roles served by one projection (Q-K=V's K and V) are the same tensor: every similarity is 1,
// marked tied. A layer is an nn::Attention the model's forward runs (nn::AttentionInputProbe),
// in the order they first run, so language models, encoders, ViTs and set transformers alike.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "nn/models/gpt.h"

namespace qkv::report {

// Roy & Vetterli's effective rank of the singular values `s` (non-negative); 0 when all are 0.
double effective_rank_of(const std::vector<double>& s);
// The same of a 2-D tensor.
double effective_rank(const Tensor& matrix);
// Cosine of the two tensors flattened; NaN when their shapes differ.
double weight_cosine(const Tensor& a, const Tensor& b);

enum class KvPair : uint8_t { kv, qk, qv };
inline constexpr std::array<KvPair, 3> kKvPairs{KvPair::kv, KvPair::qk, KvPair::qv};
const char* pair_label(KvPair p);  // "cos(K, V)"
const char* pair_key(KvPair p);    // "cos_kv"
const char* pair_names(KvPair p);  // "K, V"

struct PairCosine {
  double mean = 0;    // the measure's value (NaN: not defined for this pair)
  bool tied = false;  // both roles are one projection: mean is 1
};
struct ProjectionRank {
  double erank = 0;
  int64_t max_rank = 0;  // min(rows, cols) of the weight
  bool tied = false;     // the weight serves another role too
  std::string slot;      // the projection's module name: "q", "kv", ...
};
struct LayerKv {
  std::array<PairCosine, 3> cos;              // token cosine, by KvPair
  std::array<PairCosine, 3> cka;              // linear CKA of the outputs
  std::array<PairCosine, 3> weight_cos;       // cosine of the flattened weights
  std::array<ProjectionRank, 3> rank;         // by nn::Role
  double diagonal = 0, diagonal_uniform = 0;  // diagonal mass, and uniform attention's
};

struct KvAnalysis {
  std::string label;  // the variant: "QKV", "Q-K=V", ...
  std::string run;    // the run folder
  std::string checkpoint;
  std::string family;  // the model: "gpt", "encoder", "vit", "set_transformer"
  std::string inputs;  // what was fed: "validation tokens", "test images", ...
  int64_t tokens = 0;  // attention inputs (tokens, patches, set elements) per layer
  int64_t d_model = 0;
  std::vector<LayerKv> layers;
  LayerKv overall() const;  // the mean over layers (NaN where a layer has none)
};

// Runs `feed` (which runs the model's forward on its batches) without grad and measures every
// attention layer those forwards run. The model must be in eval mode (no dropout). ValueError
// when no attention ran.
KvAnalysis analyze_attention(const std::function<void()>& feed);
// A language model over token batches (ids [B, T], T <= its context).
KvAnalysis analyze_gpt(const nn::GPT& model, const std::vector<Tensor>& batches);

}  // namespace qkv::report
