#include "lab/report/model_reports.h"

#include <set>
#include <sstream>

#include "autograd/grad_mode.h"
#include "io/safetensors.h"
#include "lab/experiment/models.h"
#include "lab/report/number_text.h"
#include "nn/models/encoder.h"
#include "nn/models/set_transformer.h"
#include "nn/models/vit.h"
#include "tensor/format.h"

namespace qkv::report {

using namespace experiment;

namespace {

// A module of type M built from `config`, with a forward over `input`.
template <class M, class C> BuiltModel built(const C& config, Tensor input) {
  auto m = std::make_unique<M>(config);
  m->eval();
  M* raw = m.get();
  return {std::move(m), [raw, input] { raw->forward(input); }};
}

FamilyModel family_model(const Config& config, const nn::Variant& variant) {
  FamilyModel f;
  f.variant = nn::variant_name(variant);
  switch (config.kind()) {
    case TaskKind::synthetic: {
      const SyntheticConfig c = config.as<SyntheticConfig>();
      f.example = cat("one sequence of ", c.task.length, " tokens");
      f.build = [c, variant] {
        return built<nn::Encoder>(encoder_config(c, variant), zeros({1, c.task.length}, DType::i64));
      };
      break;
    }
    case TaskKind::vision: {
      const VisionConfig c = config.as<VisionConfig>();
      const int64_t side = c.data.image_size > 0 ? c.data.image_size : native_image_side(c.data.dataset);
      const ImageGeometry g = vision_geometry(c, side, side);
      const int64_t channels = native_image_channels(c.data.dataset);
      const nn::ViTConfig vit =
          vit_config(c, variant, g.padded_height, g.padded_width, channels, dataset_classes(c.data.dataset));
      f.example = cat("one ", g.padded_height, "x", g.padded_width, " image (", vit.patches() + 1, " tokens)");
      f.build = [vit, channels, g] {
        return built<nn::ViT>(vit, zeros({1, channels, g.padded_height, g.padded_width}));
      };
      break;
    }
    case TaskKind::anomaly: {
      const AnomalyConfig c = config.as<AnomalyConfig>();
      int64_t width = 512;  // a ResNet34's features
      if (c.data.features == FeatureSource::file)
        width = safetensors::read_header(c.data.features_file).tensors.at("train.features").shape.at(1);
      const nn::SetTransformerConfig set = set_transformer_config(c, variant, width);
      f.example = cat("one set of ", c.data.set_size, " elements of ", width, " features");
      f.build = [set, c, width] { return built<nn::SetTransformer>(set, zeros({1, c.data.set_size, width})); };
      break;
    }
    case TaskKind::lm: throw ValueError("a language-model file: its reports are lm_reports.h's");
  }
  return f;
}

}  // namespace

std::vector<FamilyModel> family_models(const Experiment& e) {
  check<ValueError>(e.config.kind() != TaskKind::lm, e.path,
                    ": a language-model experiment (its parameters and FLOPs come from the closed forms)");
  std::vector<FamilyModel> out;
  std::set<std::string> seen;
  for (const Run& run : e.runs)
    if (seen.insert(nn::variant_name(run.variant)).second) out.push_back(family_model(run.config, run.variant));
  return out;
}

autograd::MacCount example_macs(const FamilyModel& m) {
  NoGradGuard no_grad;
  BuiltModel model;
  autograd::trace_op_shapes([&] { model = m.build(); });  // no initialization kernels run either
  return autograd::count_macs(model.forward);
}

std::string family_params_report(const std::vector<FamilyModel>& models) {
  std::ostringstream s;
  s << "| variant | parameters | vs " << (models.empty() ? "" : models.front().variant) << " |\n|---|---:|---:|\n";
  double base = 0;
  for (const FamilyModel& m : models) {
    BuiltModel b;
    autograd::trace_op_shapes([&] { b = m.build(); });
    const int64_t n = b.module->num_parameters();
    if (base == 0) base = double(n);
    s << "| " << m.variant << " | " << with_commas(n) << " | " << percent_2dp(double(n) / base - 1) << " |\n";
  }
  return s.str();
}

std::string family_macs_report(const std::vector<FamilyModel>& models) {
  std::ostringstream s;
  s << "multiply-accumulates of one forward pass, batch 1"
    << (models.empty() ? std::string() : ", " + models.front().example)
    << ", counted from its op calls (MMACs)\n\n| variant | linear | matmul | attention | total | vs "
    << (models.empty() ? "" : models.front().variant) << " |\n|---|---:|---:|---:|---:|---:|\n";
  double base = 0;
  for (const FamilyModel& m : models) {
    const autograd::MacCount c = example_macs(m);
    auto op = [&](const char* name) {
      const auto it = c.by_op.find(name);
      return fmt("%.3f", double(it == c.by_op.end() ? 0 : it->second) / 1e6);
    };
    if (base == 0) base = double(c.total());
    s << "| " << m.variant << " | " << op("linear") << " | " << op("matmul") << " | " << op("attention") << " | "
      << fmt("%.3f", double(c.total()) / 1e6) << " | " << percent_2dp(double(c.total()) / base - 1) << " |\n";
  }
  return s.str();
}

}  // namespace qkv::report
