// Writes, for every attention variant the sharing table allows (each row, its (+) form and its
// GQA-2 / MQA forms where it has them), one safetensors file holding a small encoder's weights,
// a batch, and what qkvlab computes from them: logits, loss, every parameter's gradient and the
// parameters after one AdamW step. check_encoder.py rebuilds each model in PyTorch from the
// same file and compares.
//
//   parity_dump OUT_DIR
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "nn/models/encoder.h"
#include "nn/variant.h"
#include "train/optim/adam.h"

using namespace qkv;

namespace {

// Every variant of every row of the sharing table, 2D scores with 10 channels.
std::vector<nn::Variant> variants() {
  std::vector<nn::Variant> out;
  for (const nn::SharingPattern& p : nn::sharing_table()) {
    out.push_back({p.id, 0, false});
    if (nn::has_pos2d_form(p.id)) out.push_back({p.id, 0, true});
    if (nn::has_head_sharing_forms(p.id)) out.insert(out.end(), {{p.id, 2, false}, {p.id, 1, false}});
  }
  return out;
}

void dump(const nn::Variant& v, int index, const std::string& dir) {
  const int64_t pos2d = v.pos2d ? 10 : 0;
  nn::EncoderConfig c;
  c.vocab = 10;
  c.classes = 10;
  c.layers = 2;
  c.ffn_hidden = 64;
  c.dropout = 0;
  c.pre_norm = index % 2 == 1;  // both block layouts get covered
  c.activation = index % 3 == 2 ? nn::Activation::gelu : nn::Activation::relu;
  c.attention.d_model = 32;
  c.attention.heads = 4;
  c.attention.kv_heads = v.kv_heads;
  c.attention.sharing = v.sharing;
  c.attention.pos2d = pos2d;
  Generator gen(100 + uint64_t(index));
  nn::Encoder model(c, &gen);
  // Larger-than-default pos2d weights, so the 2D scores visibly matter.
  if (pos2d) {
    NoGradGuard ng;
    for (auto& b : model.blocks) b->attn.pos2d_weight.copy_(randn({pos2d}, {}, &gen) * 0.5);
  }
  const int64_t B = 3, T = 12;
  Tensor ids = cast(uniform({B, T}, 0, 10, DType::f64, &gen), DType::i64);
  Tensor targets = cast(uniform({B, T}, 0, 10, DType::f64, &gen), DType::i64);

  std::vector<std::pair<std::string, Tensor>> out;
  for (auto& [name, p] : model.named_parameters()) out.emplace_back("param." + name, p.detach().clone());
  Tensor logits = model.forward(ids);
  Tensor loss = cross_entropy(logits.reshape({-1, 10}), targets.reshape({-1}));
  loss.backward();
  optim::AdamOptions o;
  o.lr = 1e-2;
  o.weight_decay = 0.1;
  optim::AdamW opt(model.named_parameters(), o);
  opt.step();
  out.emplace_back("ids", ids);
  out.emplace_back("targets", targets);
  out.emplace_back("logits", logits.detach());
  out.emplace_back("loss", loss.detach());
  for (auto& [name, p] : model.named_parameters()) {
    out.emplace_back("grad." + name, p.grad());
    out.emplace_back("after." + name, p.detach());
  }
  const nn::SharingPattern& row = nn::sharing_pattern(v.sharing);
  const nlohmann::json slots = {row.slot[0], row.slot[1], row.slot[2]};
  const nlohmann::json config = {
      {"variant", nn::variant_name(v)},
      {"vocab", c.vocab},
      {"classes", c.classes},
      {"layers", c.layers},
      {"ffn_hidden", c.ffn_hidden},
      {"d_model", 32},
      {"heads", 4},
      {"kv_heads", v.kv_heads},
      {"slots", slots},
      {"pos2d", pos2d},
      {"pre_norm", c.pre_norm},
      {"activation", c.activation == nn::Activation::gelu ? "gelu" : "relu"},
      {"dropout", 0.0},
      {"mlp_head", true},
      {"adamw",
       {{"lr", o.lr}, {"beta1", o.beta1}, {"beta2", o.beta2}, {"eps", o.eps}, {"weight_decay", o.weight_decay}}}};
  safetensors::save(dir + "/case_" + std::to_string(index) + ".safetensors", out, {{"config", config.dump()}});
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: parity_dump OUT_DIR\n");
    return 2;
  }
  try {
    std::filesystem::create_directories(argv[1]);
    int i = 0;
    for (const nn::Variant& v : variants()) dump(v, i++, argv[1]);
    std::printf("parity_dump: wrote %d cases to %s\n", i, argv[1]);
  } catch (const Error& e) {
    std::fprintf(stderr, "parity_dump: %s\n", e.what());
    return 1;
  }
  return 0;
}
