// Why K=V works (PAPER.md, end of "Language modeling"): how alike a trained GPT's Q, K and V
// projections are, measured on real tokens, and how much of its width each projection weight
// uses.
//
// Cosine: per layer, the outputs X W + b of the Q, K and V projections on the block's attention
// input X (after ln1, before the head split), one d-wide vector per token; cos(A, B) is the
// cosine between a token's A and B vectors, averaged over the tokens (a zero vector counts as
// cosine 0, as PyTorch's cosine_similarity with eps 1e-8). With fewer KV heads than query heads
// (GQA, MQA), K and V are repeated over their query heads' group before meeting Q, as attention
// uses them. Roles served by one projection (Q-K=V's K and V) are the same tensor: cosine 1,
// marked tied. The overall value is the mean over layers.
//
// Effective rank (Roy & Vetterli 2007): exp(H(p)) with p_i = s_i / sum_j s_j over the singular
// values s of a weight matrix (square roots of its smaller Gram matrix's eigenvalues, in float64);
// n for an orthogonal n x n matrix, 1 for rank one.
#pragma once
#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "lab/experiment/lm_run.h"
#include "lab/experiment/sweep.h"
#include "lab/report/plot.h"
#include "nn/models/gpt.h"

namespace qkv::report {

// Roy & Vetterli's effective rank of the singular values `s` (non-negative); 0 when all are 0.
double effective_rank_of(const std::vector<double>& s);
// The same of a 2-D tensor.
double effective_rank(const Tensor& matrix);

enum class KvPair : uint8_t { kv, qk, qv };
inline constexpr std::array<KvPair, 3> kKvPairs{KvPair::kv, KvPair::qk, KvPair::qv};
const char* pair_label(KvPair p);  // "cos(K, V)"
const char* pair_key(KvPair p);    // "cos_kv"

struct PairCosine {
  double mean = 0;
  bool tied = false;  // both roles are one projection: mean is 1
};
struct ProjectionRank {
  double erank = 0;
  int64_t max_rank = 0;  // min(rows, cols) of the weight
  bool tied = false;     // the weight serves another role too
  std::string slot;      // the projection's module name: "q", "kv", ...
};
struct LayerKv {
  std::array<PairCosine, 3> cos;       // by KvPair
  std::array<ProjectionRank, 3> rank;  // by nn::Role
};

struct KvAnalysis {
  std::string label;  // the variant: "QKV", "Q-K=V", ...
  std::string run;    // the run folder
  std::string checkpoint;
  int64_t tokens = 0;  // validation tokens fed
  int64_t d_model = 0;
  std::vector<LayerKv> layers;
  LayerKv overall() const;  // the mean over layers
};

// Feeds `batches` (token ids [B, T], T <= context) through `model` without grad, in eval mode
// as it is, and measures every layer. ValueError for no batches.
KvAnalysis analyze_gpt(const nn::GPT& model, const std::vector<Tensor>& batches);

// The first `tokens` tokens of the split `split` of a prepared token folder, in order, as
// packed windows of `context` tokens (the last window cut short), `batch` windows per tensor.
// Fewer when the split is shorter; ValueError when it holds no full window.
std::vector<Tensor> validation_batches(const std::filesystem::path& token_folder, const std::string& split,
                                       int64_t context, int64_t tokens, int64_t batch);

// Summary against the paper's numbers, then one per-layer table per run (markdown).
std::string kv_markdown(const std::vector<KvAnalysis>& runs);
// One row per run, layer (0.. and "mean") and quantity; written atomically.
void write_kv_csv(const std::vector<KvAnalysis>& runs, const std::filesystem::path& file);
// Cosines per layer (a line per run and pair) and effective rank per layer (per run and role).
Figure kv_figure(const std::vector<KvAnalysis>& runs);

}  // namespace qkv::report
