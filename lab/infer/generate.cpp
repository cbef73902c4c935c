#include "lab/infer/generate.h"

#include <algorithm>
#include <cmath>

#include "autograd/grad_mode.h"

namespace qkv::infer {

namespace {
template <class T> int64_t count_nonfinite(const Tensor& t) {
  int64_t n = 0;
  for (T x : t.to_vector<T>()) n += !std::isfinite(x);
  return n;
}
}  // namespace

void check_finite_weights(const nn::Module& model, const std::string& file) {
  for (const auto& [name, t] : model.state_dict()) {
    if (!is_floating(t.dtype())) continue;
    // float64 is read as is; narrower types widen to float32 exactly.
    const int64_t bad = t.dtype() == DType::f64 ? count_nonfinite<double>(t) : count_nonfinite<float>(t);
    check<IOError>(bad == 0, file, ": tensor '", name, "' has ", bad, " of ", t.numel(),
                   " values NaN or inf (a checkpoint of a run that diverged?); refusing to use it");
  }
}

int64_t sample_token(const Tensor& logits, const SamplingOptions& o, Generator& gen) {
  check<ValueError>(o.temperature >= 0 && std::isfinite(o.temperature), "sampling: temperature must be >= 0, got ",
                    o.temperature);
  check<ValueError>(o.top_k >= 0, "sampling: top-k must be >= 0, got ", o.top_k);
  Tensor l = logits.contiguous().to(DType::f32).cpu();
  const float* x = l.data<float>();
  const int64_t V = o.vocab_limit > 0 ? std::min(o.vocab_limit, l.numel()) : l.numel();
  if (o.temperature == 0) return int64_t(std::max_element(x, x + V) - x);
  std::vector<int64_t> ids(static_cast<size_t>(V));
  for (int64_t i = 0; i < V; ++i) ids[size_t(i)] = i;
  int64_t keep = o.top_k > 0 ? std::min(o.top_k, V) : V;
  if (keep < V)
    std::partial_sort(ids.begin(), ids.begin() + keep, ids.end(), [&](int64_t a, int64_t b) { return x[a] > x[b]; });
  ids.resize(size_t(keep));
  double top = -INFINITY;
  for (int64_t i : ids) top = std::max(top, double(x[i]));
  std::vector<double> p(ids.size());
  double total = 0;
  for (size_t i = 0; i < ids.size(); ++i) total += p[i] = std::exp((double(x[ids[i]]) - top) / o.temperature);
  const double u = uniform({1}, 0.0, 1.0, DType::f64, &gen).item<double>() * total;
  double acc = 0;
  for (size_t i = 0; i < ids.size(); ++i)
    if ((acc += p[i]) > u) return ids[i];
  return ids.back();
}

std::vector<int64_t> generate(const nn::GPT& model, const std::vector<int64_t>& prompt, int64_t max_new,
                              const SamplingOptions& o, int64_t stop_token, const std::function<void(int64_t)>& emit) {
  const int64_t context = model.config().context;
  check<ValueError>(!prompt.empty(), "generate: the prompt has no tokens");
  check<ValueError>(int64_t(prompt.size()) < context, "generate: the prompt is ", prompt.size(),
                    " tokens; the model's context is ", context, " (shorten the prompt)");
  NoGradGuard no_grad;
  Generator gen(o.seed);
  const Device device = model.wte.weight.device();
  nn::KVCache cache = model.make_cache(1);
  Tensor logits = model.forward_cached(from_vector(prompt, {1, int64_t(prompt.size())}).to(device), cache);
  std::vector<int64_t> out;
  while (int64_t(out.size()) < max_new) {
    const int64_t next = sample_token(logits.select(1, logits.size(1) - 1).select(0, 0), o, gen);
    out.push_back(next);
    if (emit) emit(next);
    if (next == stop_token || cache.length() >= context) break;
    logits = model.forward_cached(from_vector(std::vector<int64_t>{next}, {1, 1}).to(device), cache);
  }
  return out;
}

}  // namespace qkv::infer
