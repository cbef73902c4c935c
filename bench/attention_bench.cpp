#include "bench/attention_bench.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <sstream>

#include "autograd/autograd.h"
#include "bench/kernel_timing.h"

#ifdef QKV_HAVE_CUDA
#include "kernels/cuda/attention/hopper/hopper_attention.h"
#endif

namespace qkv::bench {

namespace {

// The models' shapes ("all") and FlashAttention's benchmark shapes ("flash"). bench/torch_kernels.py
// holds the same tables.
std::vector<AttnCase> model_cases() {
  return {
      {"gpt2_small", 8, 12, 12, 1024, 1024, 64, true, false},     // GPT-2 small: d 768, 12 heads
      {"gpt_300m", 6, 16, 16, 2048, 2048, 64, true, false},       // experiments/lm/gpt-300m.yaml
      {"vit", 128, 4, 4, 64, 64, 16, false, false},               // ViT / encoder: d 64, 4 heads
      {"gpt2_kv_shared", 8, 12, 12, 1024, 1024, 64, true, true},  // K=V: k and v one tensor
      {"gpt2_gqa4", 8, 12, 3, 1024, 1024, 64, true, false},       // GQA: 4 query heads per KV head
  };
}
// Small shapes an emulated device runs in seconds ("small": bench_kernels on the emulated build),
// past the tiles' bounds, GQA and K=V at both head dims.
std::vector<AttnCase> small_cases() {
  return {
      {"small_gqa", 2, 4, 2, 80, 80, 64, true, false},
      {"small_kv", 1, 2, 2, 72, 72, 128, true, true},
  };
}
std::vector<AttnCase> flash_cases() {
  return {
      {"flash_t2048_d64", 8, 32, 32, 2048, 2048, 64, true, false},
      {"flash_t2048_d128", 8, 16, 16, 2048, 2048, 128, true, false},
      {"flash_t4096_d64", 4, 32, 32, 4096, 4096, 64, true, false},
      {"flash_t4096_d128", 4, 16, 16, 4096, 4096, 128, true, false},
  };
}

double fwd_flops(const AttnCase& c) {
  const double f = 4.0 * double(c.B) * double(c.H) * double(c.T) * double(c.S) * double(c.D);
  return c.causal ? f / 2 : f;
}

// Whether the default dispatch runs the Hopper kernels on these operands here: the dispatch's
// own answer (a compute capability 9.0 device, a build with sm_90a code, QKV_ATTENTION_KERNELS
// not asking for mma).
bool default_is_hopper(const Tensor& q, const Tensor& k, const Tensor& v) {
#ifdef QKV_HAVE_CUDA
  return q.device().is_cuda() && kernels::cuda::hopper_attention_supports(q, k, v);
#else
  (void)q, (void)k, (void)v;
  return false;
#endif
}

// QKV_ATTENTION_KERNELS for one path ("mma": set; "default": as the environment had it), restored
// when the guard ends.
class KernelPathGuard {
 public:
  explicit KernelPathGuard(const std::string& path) {
    if (const char* v = std::getenv("QKV_ATTENTION_KERNELS")) saved_ = v;
    if (path == "mma") setenv("QKV_ATTENTION_KERNELS", "mma", 1);
  }
  ~KernelPathGuard() {
    if (saved_) setenv("QKV_ATTENTION_KERNELS", saved_->c_str(), 1);
    else unsetenv("QKV_ATTENTION_KERNELS");
  }
  KernelPathGuard(const KernelPathGuard&) = delete;
  KernelPathGuard& operator=(const KernelPathGuard&) = delete;

 private:
  std::optional<std::string> saved_;
};

// The sampled check of one case on the current path: the last batch row's last KV head with its
// group of query heads and their last `rows` queries, forward and backward on the GPU against the
// same slice on the CPU in float32. dq of those rows is exact from the slice; so are dk and dv of
// the last `rows` keys when the mask is causal (T == S here: only the sampled queries reach them)
// or the slice holds every query.
void check_attention(const AttnCase& c, const std::string& label, Tensor q, Tensor k, Tensor v, const Tensor& dout,
                     DType dt) {
  const int64_t g = c.H / c.Hk, rows = std::min<int64_t>(64, c.T);
  auto q_slice = [&](const Tensor& t) {
    return t.narrow(0, c.B - 1, 1).narrow(1, c.H - g, g).narrow(2, c.T - rows, rows);
  };
  auto kv_slice = [&](const Tensor& t) { return t.narrow(0, c.B - 1, 1).narrow(1, c.Hk - 1, 1); };
  const Tensor out = attention(q, k, v, Tensor(), c.causal);
  out.backward(dout);
  auto cpu_leaf = [](const Tensor& t) {
    Tensor l = t.cpu().to(DType::f32).contiguous();
    l.set_requires_grad();
    return l;
  };
  const Tensor qs = cpu_leaf(q_slice(q.detach())), ks = cpu_leaf(kv_slice(k.detach()));
  const Tensor vs = c.kv_shared ? ks : cpu_leaf(kv_slice(v.detach()));
  const Tensor ref = attention(qs, ks, vs, Tensor(), c.causal);
  ref.backward(q_slice(dout).cpu().to(DType::f32));
  const double out_tol = dt == DType::f32 ? 1e-4 : 1e-2;
  // The backward rounds P and dS to the 16-bit type before its products: a looser bound than the
  // forward's (the op harness's is 1e-2 on short sequences against float64).
  const double grad_tol = dt == DType::f32 ? 1e-3 : 2e-2;
  const std::string what = cat(c.name, " (", label, ")");
  record_check(what + " out", relative_error(q_slice(out.detach()), ref.detach()), out_tol);
  record_check(what + " dq", relative_error(q_slice(q.grad()), qs.grad()), grad_tol);
  if (c.causal || rows == c.T) {
    auto last_keys = [&](const Tensor& t) { return t.narrow(2, c.S - rows, rows); };
    record_check(what + (c.kv_shared ? " dk=dv" : " dk"),
                 relative_error(last_keys(kv_slice(k.grad())), last_keys(ks.grad())), grad_tol);
    if (!c.kv_shared)
      record_check(what + " dv", relative_error(last_keys(kv_slice(v.grad())), last_keys(vs.grad())), grad_tol);
  }
  q.zero_grad();
  k.zero_grad();
  v.zero_grad();
}

}  // namespace

std::vector<AttnCase> select_attention_cases(const std::string& which, int64_t batch_div) {
  std::vector<AttnCase> known = model_cases(), out;
  for (const AttnCase& c : flash_cases()) known.push_back(c);
  for (const AttnCase& c : small_cases()) known.push_back(c);
  std::stringstream ss(which);
  for (std::string name; std::getline(ss, name, ',');) {
    std::vector<AttnCase> add;
    if (name == "all") add = model_cases();
    else if (name == "flash") add = flash_cases();
    else if (name == "small") add = small_cases();
    else if (name != "none") {
      auto it = std::find_if(known.begin(), known.end(), [&](const AttnCase& c) { return c.name == name; });
      if (it == known.end())
        throw ValueError(cat("--attention: no case or group '", name, "' (all, flash, small, none, or a case)"));
      add = {*it};
    }
    for (const AttnCase& c : add)
      if (std::none_of(out.begin(), out.end(), [&](const AttnCase& o) { return o.name == c.name; })) out.push_back(c);
  }
  for (auto& c : out) c.B = std::max<int64_t>(1, c.B / batch_div);
  return out;
}

std::string shape_str(const AttnCase& c) {
  std::ostringstream os;
  os << "B" << c.B << " H" << c.H << " Hk" << c.Hk << " T" << c.T << " S" << c.S << " D" << c.D
     << (c.causal ? " causal" : "") << (c.kv_shared ? " k=v" : "");
  return os.str();
}

std::vector<std::string> parse_kernel_paths(const std::string& list) {
  if (list == "default") return {"default"};
  if (list == "default,mma" || list == "mma,default") return {"default", "mma"};
  throw ValueError(cat("--attention-kernels '", list, "': expected default or default,mma"));
}

void bench_attention(const std::vector<AttnCase>& cases, const std::vector<std::string>& paths, int reps,
                     const Device& dev, DType dt, nlohmann::ordered_json& res, nlohmann::ordered_json& shapes,
                     nlohmann::ordered_json& kernels) {
  if (cases.empty()) return;
  std::printf("\nattention (%s, fused, forward and forward+backward, best of up to %d%s)\n", dtype_name(dt), reps,
              dev.is_cpu() ? "" : "; each checked against the CPU first");
  std::printf("%18s %9s %36s %10s %10s %12s %12s\n", "case", "kernels", "shape", "fwd ms", "fwd GF/s", "fwd+bwd ms",
              "fwd+bwd GF/s");
  for (const AttnCase& c : cases) {
    Generator g(11);
    const TensorOptions o{DType::f32, dev};
    Tensor q = randn({c.B, c.H, c.T, c.D}, o, &g).to(dt), k = randn({c.B, c.Hk, c.S, c.D}, o, &g).to(dt);
    Tensor v = c.kv_shared ? k : randn({c.B, c.Hk, c.S, c.D}, o, &g).to(dt);
    Tensor dout = randn({c.B, c.H, c.T, c.D}, o, &g).to(dt);
    q.set_requires_grad();
    k.set_requires_grad();
    if (!c.kv_shared) v.set_requires_grad();
    auto fwd = [&] {
      NoGradGuard no_grad;
      Tensor out = attention(q, k, v, Tensor(), c.causal);
    };
    auto fwdbwd = [&] {
      Tensor out = attention(q, k, v, Tensor(), c.causal);
      out.backward(dout);
      q.zero_grad();  // drop the gradients, so every run allocates them afresh as the first did
      k.zero_grad();
      v.zero_grad();
    };
    const bool hopper = default_is_hopper(q, k, v);
    shapes[c.name] = shape_str(c);
    kernels[c.name] = hopper ? "hopper" : dev.is_cuda() ? "mma.sync" : "cpu";
    for (const std::string& path : paths) {
      if (path == "mma" && !hopper) continue;  // the default already runs the mma.sync kernels here
      KernelPathGuard guard(path);
      const std::string label = path == "mma" ? "mma.sync" : kernels[c.name].get<std::string>();
      if (!dev.is_cpu()) check_attention(c, label, q, k, v, dout, dt);
      const double flops = fwd_flops(c);
      auto t = best_seconds({fwd, fwdbwd}, reps_for(3.5 * flops, reps, dev), dev);
      const double fwd_gf = flops / t[0] / 1e9, fb_gf = 3.5 * flops / t[1] / 1e9;
      std::printf("%18s %9s %36s %10.3f %10.1f %12.3f %12.1f\n", c.name.c_str(), label.c_str(), shape_str(c).c_str(),
                  1e3 * t[0], fwd_gf, 1e3 * t[1], fb_gf);
      const std::string key = cat("attention.", c.name, path == "default" ? "" : "@" + path, ".");
      res[key + "fwd_ms"] = 1e3 * t[0];
      res[key + "fwd_gflops"] = fwd_gf;
      res[key + "fwdbwd_ms"] = 1e3 * t[1];
      res[key + "fwdbwd_gflops"] = fb_gf;
    }
  }
}

}  // namespace qkv::bench
