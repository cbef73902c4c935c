// The study behind `qkvlab analyze`: why K=V works, measured on trained runs of any family
// (report/kv_measures.h: weight cosine, linear CKA, token cosine, effective rank per attention
// layer). A language model is fed the first tokens of its validation split; a synthetic
// encoder, a ViT or a set transformer its run's test split (the sets as the run drew them),
// through the weights the run tested (checkpoint.safetensors). Prints the tables and writes
// analysis.md, analysis.csv and a figure.
#pragma once
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "lab/report/kv_measures.h"
#include "tensor/device.h"

namespace qkv::studies {

struct KvStudyOptions {
  std::vector<std::string> runs;  // run folders of `qkvlab run`
  std::string out;                // output folder; empty: <first run>/analysis
  std::string data_root;          // overrides the runs' data.root
  std::string token_data;         // language models: the prepared token folder to read
  int64_t tokens = 8192;          // attention inputs fed per run (tokens, patches or set elements)
  Device device = kCPU;
};

// One run folder measured; IOError / ValueError naming the folder and what is missing.
report::KvAnalysis analyze_run(const std::filesystem::path& folder, const KvStudyOptions& o, std::FILE* log = stderr);
// Every run, the markdown on `out`, the files under o.out; returns the analyses.
std::vector<report::KvAnalysis> run_kv_study(const KvStudyOptions& o, std::FILE* out = stdout, std::FILE* log = stderr);

}  // namespace qkv::studies
