#include "lab/report/kv_analysis.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>

#include "io/atomic_file.h"
#include "nn/variant.h"
#include "tensor/format.h"
#include "train/data/tokens/token_batches.h"

namespace qkv::report {

namespace fs = std::filesystem;
using nn::Role;

namespace {

// PAPER.md, end of "Language modeling": measured in trained QKV models, the matrices not
// stated; the sources describe the cosines as between the flattened projection weights.
constexpr std::array<double, 3> kPaperCos{0.73, 0.42, 0.31};  // by KvPair
constexpr double kPaperRankA = 687, kPaperRankB = 702, kPaperWidth = 1024;
// The authors' later measure: linear CKA of K and V on a 300M model.
constexpr double kLaterCkaKv = 0.70;

std::string fixed(double v, int digits) {
  if (std::isnan(v)) return "–";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace

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
std::string diagonal_cell(const LayerKv& l) {
  return cat(fixed(l.diagonal, 3), " (uniform ", fixed(l.diagonal_uniform, 3), ")");
}

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
  std::string s = "# Why K=V works: how alike the projections are, by four measures\n\n";
  s += "| measure | pair | a source's number |";
  for (const auto& n : names) s += cat(" ", n, " |");
  s += "\n|---|---|---|";
  for (size_t i = 0; i < runs.size(); ++i) s += "---|";
  s += "\n";
  std::vector<LayerKv> overall;
  for (const auto& r : runs) overall.push_back(r.overall());
  using Measure = std::array<PairCosine, 3> LayerKv::*;
  auto rows = [&](const char* measure, Measure m, const std::function<std::string(KvPair)>& source) {
    for (KvPair pair : kKvPairs) {
      s += cat("| ", measure, " | ", pair_names(pair), " | ", source(pair), " |");
      for (const auto& o : overall) s += cat(" ", cos_cell((o.*m)[size_t(pair)]), " |");
      s += "\n";
    }
  };
  rows("weight cosine", &LayerKv::weight_cos,
       [](KvPair p) { return cat(fixed(kPaperCos[size_t(p)], 2), " (paper, trained QKV)"); });
  rows("linear CKA", &LayerKv::cka, [](KvPair p) {
    return p == KvPair::kv ? cat(fixed(kLaterCkaKv, 2), " (the authors' later measure, 300M)") : std::string("–");
  });
  rows("token cosine", &LayerKv::cos, [](KvPair) { return std::string("–"); });
  s += "| diagonal mass | P[t, t] | – |";
  for (const auto& o : overall) s += cat(" ", diagonal_cell(o), " |");
  s += "\n";
  s += cat("| effective rank | the paper's pair * | ", fixed(kPaperRankA, 0), " vs ", fixed(kPaperRankB, 0), " of ",
           fixed(kPaperWidth, 0), " (", fixed(kPaperRankA / kPaperWidth, 2), " vs ",
           fixed(kPaperRankB / kPaperWidth, 2), ") |");
  for (const auto& o : overall) {
    const ProjectionRank &k = o.rank[size_t(Role::k)], &v = o.rank[size_t(Role::v)];
    s += cat(" W_k vs W_v: ", fixed(k.erank, 1), " vs ", fixed(v.erank, 1), " of ", k.max_rank, " (",
             fixed(k.erank / double(k.max_rank), 2), " vs ", fixed(v.erank / double(v.max_rank), 2), ") |");
  }
  s += "\n";
  for (Role r : nn::kRoles) {
    s += cat("| effective rank | ", role_weight(r), " | – |");
    for (const auto& o : overall) s += cat(" ", rank_cell(o.rank[size_t(r)], true), " |");
    s += "\n";
  }
  s += "\nOurs: the mean over layers of ";
  for (size_t i = 0; i < runs.size(); ++i)
    s += cat(i ? "; " : "", names[i], " = ", runs[i].run, " (", runs[i].family, ", ", runs[i].checkpoint, ", ",
             with_commas(runs[i].tokens), " ", runs[i].inputs, ")");
  s += ".\n\n"
       "Weight cosine: cos(vec W_a, vec W_b), the projection weights flattened; defined where their shapes match "
       "(with fewer KV heads than query heads, only K vs V). The sources describe the paper's 0.73 / 0.42 / 0.31 "
       "as such a cosine.\n\n"
       "Linear CKA (Kornblith et al. 2019): ||Yb~^T Ya~||_F^2 / (||Ya~^T Ya~||_F ||Yb~^T Yb~||_F) over the "
       "projection outputs Y = X W^T + b on each layer's attention inputs X, centred over the inputs, in float64. "
       "The authors later reported 0.70 for K vs V on a 300M model.\n\n"
       "Token cosine: per input, the cosine between its A and B projection outputs (d-wide, after the bias), "
       "averaged over the inputs (a zero vector counts as 0); K and V are repeated over their query heads' group "
       "before meeting Q. No source gives this one; between untied projections it stays near 0.\n\n"
       "Diagonal mass: the attention probability a query gives its own position, P[t, t], averaged over the "
       "sequences, heads and positions, beside uniform attention's (1/T, or 1/(t+1) when causal). Q=K makes the "
       "raw scores symmetric, which the paper says makes attention diagonal-dominant.\n\n"
       "Effective rank (Roy & Vetterli 2007): exp(-sum_i p_i ln p_i), p_i = s_i / sum_j s_j over the singular "
       "values s of the projection's weight (square roots of its Gram matrix's eigenvalues, float64); out of "
       "min(rows, cols), the fraction in brackets.\n\n"
       "Tied roles (one projection) are the same tensor: 1 (tied).\n\n"
       "* The paper gives two effective ranks, 687 vs 702 of 1024, without saying which matrices they are; ours "
       "shows W_k vs W_v as one reading, and every matrix in the rows below it.\n";
  for (size_t i = 0; i < runs.size(); ++i) {
    const KvAnalysis& r = runs[i];
    s += cat("\n## ", names[i], " per layer\n\n| layer |");
    for (const char* m : {"weight cos", "CKA", "token cos"})
      for (KvPair pair : kKvPairs) s += cat(" ", m, " ", pair_names(pair), " |");
    s += " diagonal mass |";
    for (Role role : nn::kRoles) {
      s += cat(" erank ", role_weight(role));
      if (!r.layers.empty()) s += cat(" (of ", r.layers.front().rank[size_t(role)].max_rank, ")");
      s += " |";
    }
    s += "\n|---|";
    for (int c = 0; c < 13; ++c) s += "---|";
    s += "\n";
    auto row = [&](const std::string& name, const LayerKv& l) {
      s += cat("| ", name, " |");
      for (Measure m : {&LayerKv::weight_cos, &LayerKv::cka, &LayerKv::cos})
        for (KvPair pair : kKvPairs) s += cat(" ", cos_cell((l.*m)[size_t(pair)]), " |");
      s += cat(" ", diagonal_cell(l), " |");
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
    os << "run,variant,family,checkpoint,tokens,layer,quantity,value,tied,max_rank\n";
    for (const KvAnalysis& r : runs) {
      const std::string head = cat(csv_field(r.run), ",", csv_field(r.label), ",", r.family, ",",
                                   csv_field(r.checkpoint), ",", r.tokens, ",");
      auto rows = [&](const std::string& layer, const LayerKv& l) {
        const std::array<std::pair<const char*, const std::array<PairCosine, 3>*>, 3> measures{
            {{"cos", &l.cos}, {"cka", &l.cka}, {"wcos", &l.weight_cos}}};
        for (const auto& [prefix, values] : measures)
          for (KvPair pair : kKvPairs) {
            const PairCosine& c = (*values)[size_t(pair)];
            os << head << layer << "," << prefix << std::string(pair_key(pair)).substr(3) << ","
               << (std::isnan(c.mean) ? std::string() : fixed(c.mean, 6)) << "," << (c.tied ? 1 : 0) << ",\n";
          }
        os << head << layer << ",diag," << fixed(l.diagonal, 6) << ",0,\n";
        os << head << layer << ",diag_uniform," << fixed(l.diagonal_uniform, 6) << ",0,\n";
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
  f.title = "Why K=V works: projection similarity and effective rank per layer";
  f.columns = 2;
  using Measure = std::array<PairCosine, 3> LayerKv::*;
  auto similarity = [&](const char* title, const char* axis, Measure m) {
    LinePanel panel{title, {"layer", false, {}, {}}, {axis, false, {}, {}}, {}};
    for (size_t i = 0; i < runs.size(); ++i) {
      const std::string prefix = runs.size() > 1 ? names[i] + " " : "";
      for (KvPair pair : kKvPairs) {
        Series s{cat(prefix, pair_names(pair)), {}, {}};
        for (size_t l = 0; l < runs[i].layers.size(); ++l) {
          s.x.push_back(double(l));
          s.y.push_back((runs[i].layers[l].*m)[size_t(pair)].mean);
        }
        if (!runs[i].layers.empty() && (runs[i].layers.front().*m)[size_t(pair)].tied) s.label += " (tied)";
        panel.series.push_back(std::move(s));
      }
    }
    return panel;
  };
  LinePanel rank{"effective rank of the projection weights",
                 {"layer", false, {}, {}},
                 {"effective rank", false, {}, {}},
                 {}};
  const std::string prefix_sep = runs.size() > 1 ? " " : "";
  for (size_t i = 0; i < runs.size(); ++i) {
    const std::string prefix = runs.size() > 1 ? names[i] : "";
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
  f.lines = {similarity("cosine of the flattened weights", "weight cosine", &LayerKv::weight_cos),
             similarity("linear CKA of the projection outputs", "CKA", &LayerKv::cka),
             similarity("mean per-token cosine of the projection outputs", "cosine", &LayerKv::cos), std::move(rank)};
  return f;
}

}  // namespace qkv::report
