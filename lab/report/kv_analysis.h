// Why K=V works (PAPER.md, end of "Language modeling"): the measures of kv_measures.h for
// trained runs of any family, reported beside the numbers a source gives (the paper's weight
// cosines and effective ranks, the authors' later CKA), each with its definition; and the
// validation tokens a language model is analysed on.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "lab/report/kv_measures.h"
#include "lab/report/plot.h"

namespace qkv::report {

// The first `tokens` tokens of the split `split` of a prepared token folder, in order, as
// packed windows of `context` tokens (the last window cut short), `batch` windows per tensor.
// Fewer when the split is shorter; ValueError when it holds no full window.
std::vector<Tensor> validation_batches(const std::filesystem::path& token_folder, const std::string& split,
                                       int64_t context, int64_t tokens, int64_t batch);

// The four measures' means over layers beside the sources' numbers, their definitions, then one
// per-layer table per run (markdown).
std::string kv_markdown(const std::vector<KvAnalysis>& runs);
// One row per run, layer (0.. and "mean") and quantity; written atomically.
void write_kv_csv(const std::vector<KvAnalysis>& runs, const std::filesystem::path& file);
// Per layer: weight cosine, CKA and token cosine (a line per run and pair) and effective rank
// (per run and projection).
Figure kv_figure(const std::vector<KvAnalysis>& runs);

}  // namespace qkv::report
