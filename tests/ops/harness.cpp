#include "tests/ops/harness.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string>

#include "autograd/autograd.h"
#include "autograd/dispatch.h"
#include "tensor/view.h"

namespace qkv::test {

using autograd::call_op;
using autograd::OpId;
using autograd::op_info;

bool small_samples_only() {
  static const bool small = [] {
    const char* v = std::getenv("QKV_HARNESS_SMALL");
    return v != nullptr && std::string(v) == "1";
  }();
  return small;
}

// ---- Ref ------------------------------------------------------------------------------------

namespace {
int64_t linear_index(const Shape& shape, const std::vector<int64_t>& idx) {
  int64_t off = 0;
  for (size_t d = 0; d < shape.size(); ++d) off = off * shape[d] + idx[d];
  return off;
}
}  // namespace

double& Ref::at(const std::vector<int64_t>& idx) { return v[size_t(linear_index(shape, idx))]; }
double Ref::at(const std::vector<int64_t>& idx) const { return v[size_t(linear_index(shape, idx))]; }

double Ref::bcast(const std::vector<int64_t>& out_idx) const {
  std::vector<int64_t> idx(shape.size());
  const size_t lead = out_idx.size() - shape.size();
  for (size_t d = 0; d < shape.size(); ++d) idx[d] = shape[d] == 1 ? 0 : out_idx[lead + d];
  return at(idx);
}

void for_each_index(const Shape& shape, const std::function<void(const std::vector<int64_t>&)>& f) {
  if (numel(shape) == 0) return;
  std::vector<int64_t> idx(shape.size(), 0);
  while (true) {
    f(idx);
    int64_t d = int64_t(shape.size()) - 1;
    for (; d >= 0; --d) {
      if (++idx[size_t(d)] < shape[size_t(d)]) break;
      idx[size_t(d)] = 0;
    }
    if (d < 0) return;
  }
}

Ref ref_of(const Tensor& t) {
  Ref r(t.shape());
  r.v = t.to_vector<double>();
  return r;
}

Shape broadcast(const Shape& a, const Shape& b) { return broadcast_shapes(a, b, "reference"); }

// ---- inputs -----------------------------------------------------------------------------------

namespace {

bool is_float_kind(const InputSpec& s) {
  return s.kind == Kind::real || s.kind == Kind::positive || s.kind == Kind::away0;
}

Tensor make_input(const InputSpec& s, DType float_dtype, Generator& gen) {
  if (s.undefined) return Tensor();
  const int64_t n = numel(s.shape);
  std::vector<double> u = rand({n}, DType::f64, &gen).to_vector<double>();
  std::vector<double> z = randn({n}, DType::f64, &gen).to_vector<double>();
  std::vector<double> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) {
    switch (s.kind) {
      case Kind::real: v[i] = z[i]; break;
      case Kind::positive: v[i] = 0.5 + 1.5 * u[i]; break;
      case Kind::away0: v[i] = z[i] + (z[i] >= 0 ? 0.2 : -0.2); break;
      case Kind::index: v[i] = std::floor(u[i] * double(s.high)); break;
      case Kind::mask: v[i] = u[i] < 0.5 ? 1 : 0; break;
      case Kind::int8: v[i] = std::floor(u[i] * 255.0) - 127.0; break;
      case Kind::scale: v[i] = 0.005 + 0.015 * u[i]; break;
    }
  }
  Tensor t = from_vector(v, s.shape);
  if (s.kind == Kind::index) return raw::to(t, s.int_dtype, kCPU);
  if (s.kind == Kind::mask) return raw::to(t, DType::b8, kCPU);
  if (s.kind == Kind::int8) return raw::to(t, DType::i8, kCPU);
  if (s.kind == Kind::scale) return raw::to(t, DType::f32, kCPU);
  return raw::to(t, float_dtype, kCPU);
}

// The same values in a non-contiguous layout: every other element of a wider buffer, and for
// 2+ dims also transposed in memory.
Tensor noncontiguous(const Tensor& t) {
  if (!t.defined() || t.dim() == 0 || t.numel() == 0) return t;
  const int64_t nd = t.dim();
  std::vector<int64_t> perm(static_cast<size_t>(nd));
  for (int64_t i = 0; i < nd; ++i) perm[size_t(i)] = i;
  if (nd >= 2) std::swap(perm[size_t(nd - 1)], perm[size_t(nd - 2)]);
  Shape mem = t.shape();
  if (nd >= 2) std::swap(mem[size_t(nd - 1)], mem[size_t(nd - 2)]);
  mem.back() *= 2;
  Tensor buf = empty(mem, {t.dtype(), t.device()});
  Tensor v = raw::permute(raw::slice(buf, -1, 0, mem.back(), 2), perm);
  raw::copy(v, t);
  return v;
}

std::vector<Tensor> to_device(const std::vector<Tensor>& in, Device d) {
  std::vector<Tensor> out;
  for (const Tensor& t : in) out.push_back(t.defined() ? raw::to(t, t.dtype(), d) : Tensor());
  return out;
}

Attrs for_dtype(Attrs a, DType dt, Device dev) {
  if (auto* r = std::get_if<RandomAttrs>(&a)) {
    r->dtype = dt;
    r->device = dev;
  }
  return a;
}

struct Context {
  const char* op;
  const Sample& sample;
  std::string what;
  std::string str() const { return cat(op, " [", sample.label, "] ", what); }
};

// Checks |got - want| <= atol + rtol |want| elementwise; reports the first bad element.
void expect_close(const Tensor& got, const Ref& want, double rtol, double atol, const Context& ctx) {
  INFO(ctx.str());
  REQUIRE_MESSAGE(got.shape() == want.shape, "shape ", shape_str(got.shape()), " vs expected ", shape_str(want.shape));
  std::vector<double> g = got.to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) {
    const double w = want.v[i];
    const bool both_nan = std::isnan(g[i]) && std::isnan(w);
    const bool ok = both_nan || g[i] == w || std::abs(g[i] - w) <= atol + rtol * std::abs(w);
    if (!ok) {
      FAIL_CHECK("element ", i, ": got ", g[i], ", expected ", w);
      return;
    }
  }
}

double tolerance(DType dt, const OpCase& c) { return dt == DType::f64 ? 1e-9 : c.f32_tolerance; }

// sum_k <out_k, w_k> over the floating outputs the backward differentiates (output 0).
double weighted(const Tensor& out, const std::vector<double>& w) {
  std::vector<double> o = out.to_vector<double>();
  double s = 0;
  for (size_t i = 0; i < o.size(); ++i) s += o[i] * w[i];
  return s;
}

std::vector<Tensor> analytic_grads(OpId op, const Sample& s, std::vector<Tensor> in, const Tensor& weights) {
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i].defined() && is_floating(in[i].dtype()) && s.inputs[i].differentiable) {
      in[i] = in[i].detach();
      in[i].set_requires_grad();
    }
  Tensor out = call_op(op, in, s.attrs)[0];
  Tensor loss = sum(out * raw::to(weights, out.dtype(), out.device()));
  std::vector<Tensor> grads(in.size());
  if (!loss.requires_grad()) return grads;
  loss.backward();
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i].defined() && in[i].requires_grad()) grads[i] = in[i].grad();
  return grads;
}

// A copy of every input, so that each call of an op that writes inputs starts from the sample.
std::vector<Tensor> fresh(const std::vector<Tensor>& in) {
  std::vector<Tensor> out;
  for (const Tensor& t : in) {
    if (!t.defined()) {
      out.push_back(t);
      continue;
    }
    Tensor c = empty(t.shape(), {t.dtype(), t.device()});
    raw::copy(c, t);
    out.push_back(c);
  }
  return out;
}

// What a call left to compare: its outputs, then its written inputs in input order (undefined
// where a written input was left out).
struct Result {
  Tensor t;
  std::string what;
};
std::vector<Result> results(const autograd::OpInfo& info, const std::vector<Tensor>& out,
                            const std::vector<Tensor>& in) {
  std::vector<Result> r;
  for (size_t k = 0; k < out.size(); ++k) r.push_back({out[k], cat("output ", k)});
  for (size_t i = 0; i < in.size(); ++i)
    if (info.is_written(i)) r.push_back({in[i], cat("written input ", i)});
  return r;
}

void expect_results(const std::vector<Result>& got, const std::vector<Ref>& want, double tol, const char* op,
                    const Sample& s, const std::string& prefix) {
  for (size_t k = 0; k < want.size(); ++k) {
    if (!got[k].t.defined()) continue;
    // An output the op always stores in float32 (an int8 row's scale) holds float32 precision
    // also when its inputs are float64.
    const double t = got[k].t.dtype() == DType::f32 ? std::max(tol, 1e-6) : tol;
    expect_close(got[k].t, want[k], t, t, {op, s, prefix + got[k].what});
  }
}

// Each written input made non-contiguous in turn must be refused (kernels write them as flat
// arrays). Returns how many were tried: 0-dim and one-element tensors are always contiguous.
int expect_noncontiguous_writes_refused(OpId op, const Sample& s, const std::vector<Tensor>& in, const Attrs& attrs) {
  const auto& info = op_info(op);
  int tried = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!info.is_written(i)) continue;
    std::vector<Tensor> bad = fresh(in);
    bad[i] = noncontiguous(bad[i]);
    if (!bad[i].defined() || bad[i].is_contiguous()) continue;
    bool refused = false;
    try {
      NoGradGuard ng;
      call_op(op, bad, attrs);
    } catch (const ValueError& e) {
      refused = std::string(e.what()).find(cat("input ", i, " (")) != std::string::npos &&
                std::string(e.what()).find("must be contiguous") != std::string::npos;
    }
    CHECK_MESSAGE(refused, info.name, " [", s.label, "]: a non-contiguous written input ", i, " was not refused");
    ++tried;
  }
  return tried;
}

// Step 4 of the harness (harness.h) for one sample in one 16-bit dtype.
void check_low_precision(OpId op, const OpCase& c, const Sample& s, DType low, uint64_t seed, CaseReport& report) {
  const auto& info = op_info(op);
  Generator gen(seed);
  std::vector<Tensor> in;
  for (const InputSpec& spec : s.inputs) in.push_back(make_input(spec, low, gen));
  const Attrs attrs = for_dtype(s.attrs, low, kCPU);
  std::vector<Ref> refs_in;
  for (const Tensor& t : in) refs_in.push_back(t.defined() ? ref_of(t) : Ref());
  const std::vector<Ref> want = c.reference(refs_in, attrs);
  const double tol = c.low_tolerance, grad_tol = 4 * c.low_tolerance;
  const std::string tag = cat(dtype_name(low), " ");
  std::vector<Tensor> got;
  {
    NoGradGuard ng;
    got = call_op(op, in, attrs);
  }
  REQUIRE(got.size() >= want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    const DType dt = got[k].dtype();
    const bool dtype_ok = op == OpId::cast || !is_floating(dt) || dt == low || dt == DType::f32;
    CHECK_MESSAGE(dtype_ok, std::string(info.name), " [", s.label, "] output ", k, " of ", std::string(dtype_name(low)),
                  " inputs is ", std::string(dtype_name(dt)));
  }
  expect_results(results(info, got, in), want, tol, info.name, s, tag);
  ++report.low_checks;

  const bool differentiable = info.backward != nullptr && c.gradcheck && is_floating(got[0].dtype());
  const bool grads_here = differentiable && low == DType::bf16 && s.numeric_grad;
  Tensor weights;
  std::vector<Tensor> low_grads;
  if (differentiable) {
    weights = raw::to(randn(got[0].shape(), {DType::f64, kCPU}, &gen), got[0].dtype(), kCPU);
    if (grads_here || cuda_available()) low_grads = analytic_grads(op, s, in, weights);
  }
  if (grads_here) {  // float64 gradients at the same (rounded) points
    std::vector<Tensor> wide;
    for (const Tensor& t : in) wide.push_back(t.defined() && is_floating(t.dtype()) ? raw::to(t, DType::f64, kCPU) : t);
    const std::vector<Tensor> exact = analytic_grads(op, s, wide, raw::to(weights, DType::f64, kCPU));
    for (size_t i = 0; i < in.size(); ++i) {
      if (!exact[i].defined()) continue;
      REQUIRE_MESSAGE(low_grads[i].defined(), info.name, " [", s.label, "]: no ", tag, "gradient for input ", i);
      CHECK(low_grads[i].dtype() == low);
      expect_close(low_grads[i], ref_of(exact[i]), grad_tol, grad_tol, {info.name, s, cat(tag, "gradient ", i)});
    }
  }

  if (cuda_available() && info.cuda) {
    const Device gpu("cuda:0");
    const std::vector<Tensor> gin = to_device(in, gpu);
    std::vector<Tensor> gout;
    {
      NoGradGuard ng;
      gout = call_op(op, gin, for_dtype(s.attrs, low, gpu));
    }
    std::vector<Ref> cpu_values;
    for (size_t k = 0; k < want.size(); ++k) cpu_values.push_back(ref_of(got[k]));
    expect_results(results(info, gout, gin), cpu_values, tol, info.name, s, tag + "CUDA ");
    if (differentiable) {
      const std::vector<Tensor> gg = analytic_grads(op, s, gin, weights);
      for (size_t i = 0; i < gg.size(); ++i)
        if (low_grads[i].defined())
          expect_close(gg[i], ref_of(low_grads[i]), grad_tol, grad_tol, {info.name, s, cat(tag, "CUDA gradient ", i)});
    }
  }
}

}  // namespace

std::string CaseReport::line(const char* op) const {
  std::ostringstream os;
  os << op << std::string(std::max<size_t>(1, 24 - std::string(op).size()), ' ') << samples
     << " samples: " << forward_checks << " forward, " << noncontig_checks << " non-contiguous, ";
  if (inplace_refusals > 0) os << inplace_refusals << " in-place refusals, ";
  os << grad_checks << " gradient, ";
  if (low_checks > 0) os << low_checks << " bf16/f16, ";
  if (cuda_skipped) os << (cuda_available() ? "CUDA skipped (no CUDA kernel yet)" : "CUDA skipped (no GPU visible)");
  else os << cuda_checks << " CUDA-vs-CPU";
  return os.str();
}

CaseReport run_case(OpId op, const OpCase& c) {
  const auto& info = op_info(op);
  CaseReport report;
  const bool differentiable = info.backward != nullptr && c.gradcheck;
  uint64_t seed = 1234;
  for (const Sample& s : c.samples) {
    if (!s.numeric_grad && !s.small_run && small_samples_only()) continue;
    ++report.samples;
    bool has_float = info.arity == 0;
    for (const InputSpec& in : s.inputs) has_float |= !in.undefined && is_float_kind(in);
    const std::vector<DType> dtypes = has_float ? c.float_dtypes : std::vector<DType>{DType::f64};
    for (DType dt : dtypes) {
      Generator gen(seed++);
      std::vector<Tensor> in;
      for (const InputSpec& spec : s.inputs) in.push_back(make_input(spec, dt, gen));
      const Attrs attrs = for_dtype(s.attrs, dt, kCPU);
      std::vector<Ref> refs_in;
      for (const Tensor& t : in) refs_in.push_back(t.defined() ? ref_of(t) : Ref());
      const std::vector<Ref> want = c.reference(refs_in, attrs);
      const double tol = tolerance(dt, c);
      const bool writes = info.writes != 0;
      const std::vector<Tensor> cpu_in = writes ? fresh(in) : in;  // `in` keeps the sample's values
      std::vector<Tensor> got;
      {
        NoGradGuard ng;
        got = call_op(op, cpu_in, attrs);
      }
      const std::vector<Result> cpu_results = results(info, got, cpu_in);
      if (writes) REQUIRE(want.size() == cpu_results.size());
      else REQUIRE(got.size() >= want.size());
      expect_results(cpu_results, want, tol, info.name, s, cat(dtype_name(dt), " "));
      ++report.forward_checks;

      if (!in.empty()) {
        std::vector<Tensor> strided = writes ? fresh(in) : in;
        for (size_t i = 0; i < strided.size(); ++i)
          if (!info.is_written(i)) strided[i] = noncontiguous(strided[i]);
        std::vector<Tensor> got2;
        {
          NoGradGuard ng;
          got2 = call_op(op, strided, attrs);
        }
        expect_results(results(info, got2, strided), want, tol, info.name, s, cat(dtype_name(dt), " non-contiguous "));
        ++report.noncontig_checks;
        if (writes) report.inplace_refusals += expect_noncontiguous_writes_refused(op, s, in, attrs);
      }

      // Gradients are checked where the op's output is float64 (central differences need it).
      const bool float_out = !got.empty() && (got[0].dtype() == DType::f32 || got[0].dtype() == DType::f64);
      const Tensor weights =
          differentiable ? randn(got[0].shape(), {float_out ? got[0].dtype() : DType::f64, kCPU}, &gen) : Tensor();
      const bool grad_here = differentiable && got[0].dtype() == DType::f64 && s.numeric_grad;
      std::vector<Tensor> cpu_grads;
      if (grad_here || (differentiable && float_out && cuda_available()))
        cpu_grads = analytic_grads(op, s, in, weights);
      if (grad_here) {
        const std::vector<double> w = weights.to_vector<double>();
        const double eps = 1e-6;
        for (size_t i = 0; i < in.size(); ++i) {
          if (!cpu_grads[i].defined()) continue;
          std::vector<double> x = in[i].to_vector<double>();
          Ref numeric(in[i].shape());
          for (size_t e = 0; e < x.size(); ++e) {
            auto eval = [&](double delta) {
              std::vector<double> xe = x;
              xe[e] += delta;
              std::vector<Tensor> pin = in;
              pin[i] = from_vector(xe, in[i].shape());
              NoGradGuard ng;
              return weighted(call_op(op, pin, attrs)[0], w);
            };
            numeric.v[e] = (eval(eps) - eval(-eps)) / (2 * eps);
          }
          expect_close(cpu_grads[i], numeric, 1e-4, 1e-5, {info.name, s, cat("gradient of input ", i)});
        }
        ++report.grad_checks;
      }

      if (cuda_available() && info.cuda) {
        report.cuda_skipped = false;
        const Device gpu("cuda:0");
        std::vector<Tensor> gin = to_device(in, gpu);
        const Attrs gattrs = for_dtype(s.attrs, dt, gpu);
        const double ctol = dt == DType::f32 && c.cuda_f32_tolerance > 0 ? c.cuda_f32_tolerance : tol;
        std::vector<Tensor> gout;
        {
          NoGradGuard ng;
          gout = call_op(op, gin, gattrs);
        }
        std::vector<Ref> cpu_values;
        for (size_t k = 0; k < want.size(); ++k)
          cpu_values.push_back(cpu_results[k].t.defined() ? ref_of(cpu_results[k].t) : Ref());
        expect_results(results(info, gout, gin), cpu_values, ctol, info.name, s, cat(dtype_name(dt), " CUDA "));
        if (differentiable && float_out) {
          std::vector<Tensor> gg = analytic_grads(op, s, gin, weights);
          for (size_t i = 0; i < gg.size(); ++i)
            if (cpu_grads[i].defined())
              expect_close(gg[i], ref_of(cpu_grads[i]), ctol, ctol,
                           {info.name, s, cat(dtype_name(dt), " CUDA gradient ", i)});
        }
        ++report.cuda_checks;
      }
    }
    if (has_float && info.writes == 0)
      for (DType low : {DType::bf16, DType::f16})
        if (info.dtypes.contains(low)) check_low_precision(op, c, s, low, seed++, report);
  }
  return report;
}

}  // namespace qkv::test
