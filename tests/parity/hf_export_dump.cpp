// The qkvlab side of tests/parity/check_hf_export.py:
//   hf_export_dump export DIR        for each variant, DIR/<variant>/run (a GPT with random
//                                    weights), DIR/<variant>/hf (its hf-gpt2 export) and
//                                    DIR/<variant>/logits.safetensors ("ids" [2, 16], "logits"),
//                                    and DIR/variants.txt listing them; the same for the Llama
//                                    block (hf-llama) under DIR/llama-<variant>, listed in
//                                    DIR/llama_variants.txt
//   hf_export_dump import SRC OUT    imports the Hugging Face folder SRC into OUT/run and writes
//                                    OUT/logits.safetensors of the ids in SRC/ids.safetensors
#include <cstdio>
#include <fstream>

#include "io/safetensors.h"
#include "lab/infer/hf/export.h"
#include "lab/infer/hf/import.h"
#include "lab/infer/run_model.h"
#include "tests/support/lm_run_folder.h"

using namespace qkv;
namespace fs = std::filesystem;

namespace {

const char* const kVariants[] = {"QKV",   "Q=K-V", "Q-K=V",   "Q=K=V", "Q=V-K",
                                 "GQA-2", "MQA",   "Q-GQA-2", "Q-MQA", "Q-K=V+LR4"};

void write_logits(const fs::path& file, const nn::GPT& model, const Tensor& ids) {
  safetensors::save(file.string(), {{"ids", ids}, {"logits", model.forward(ids)}});
}

int export_all(const fs::path& dir) {
  std::ofstream list(dir / "variants.txt");
  std::vector<int64_t> v;
  for (int64_t i = 0; i < 32; ++i) v.push_back((i * 37 + 11) % 97);
  const Tensor ids = from_vector(v, {2, 16});
  for (const char* variant : kVariants) {
    const fs::path at = dir / variant;
    fs::remove_all(at);
    const auto model = test::write_lm_run(at / "run", variant);
    infer::ExportRequest e;
    e.run = at / "run";
    e.out = at / "hf";
    infer::export_hf(e);
    write_logits(at / "logits.safetensors", *model, ids);
    list << variant << "\n";
  }
  // The Llama block: a head dim of its own, biases, llama3 rotary scaling, an untied head.
  std::ofstream llama_list(dir / "llama_variants.txt");
  test::LmRunShape shape;
  shape.kind = "llama";
  shape.ffn_mult = 2.5;
  shape.extra =
      "head_dim: 12, attention_bias: true, mlp_bias: true, tie_embeddings: false, rope_theta: 300, rope_scaling: "
      "llama3, rope_factor: 4, rope_original_context: 8";
  for (const char* variant : kVariants) {
    const fs::path at = dir / (std::string("llama-") + variant);
    fs::remove_all(at);
    const auto model = test::write_lm_run(at / "run", variant, 1, shape);
    infer::ExportRequest e;
    e.format = infer::ExportFormat::hf_llama;
    e.run = at / "run";
    e.out = at / "hf";
    infer::export_hf(e);
    write_logits(at / "logits.safetensors", *model, ids);
    llama_list << variant << "\n";
  }
  return 0;
}

int import_one(const fs::path& source, const fs::path& out) {
  fs::remove_all(out);
  infer::ImportRequest r;
  r.source = source;
  r.out = out / "run";
  infer::import_hf(r);
  const experiment::LmRunFiles f = experiment::open_lm_run(r.out, "hf_export_dump");
  const auto model = infer::load_run_model(f, f.config, kCPU);
  write_logits(out / "logits.safetensors", *model, safetensors::load((source / "ids.safetensors").string()).at("ids"));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "export" && argc == 3) return export_all(argv[2]);
    if (mode == "import" && argc == 4) return import_one(argv[2], argv[3]);
    std::fprintf(stderr, "usage: hf_export_dump export DIR | hf_export_dump import SRC OUT\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hf_export_dump: %s\n", e.what());
    return 1;
  }
}
