// Test cases for the data-movement ops (concat, indexing, casts, copies) and the random ops.
#include "tensor/philox.h"
#include "tests/ops/references.h"

namespace qkv::test {

OpCase case_concat() {
  OpCase c;
  c.samples = {{"dim 0", {real({2, 3}), real({4, 3})}, DimAttrs{0}},
               {"dim 1, three inputs", {real({2, 1}), real({2, 3}), real({2, 2})}, DimAttrs{1}},
               {"middle dim 3-d", {real({2, 2, 3}), real({2, 1, 3})}, DimAttrs{1}},
               {"int64", {index({3}, 9), index({2}, 9)}, DimAttrs{0}}};
  c.reference = [](const std::vector<Ref>& in, const Attrs& attrs) {
    const int64_t dim = std::get<DimAttrs>(attrs).dim;
    Shape s = in[0].shape;
    s[size_t(dim)] = 0;
    for (const Ref& r : in) s[size_t(dim)] += r.shape[size_t(dim)];
    Ref out(s);
    for_each_index(s, [&](const std::vector<int64_t>& i) {
      int64_t j = i[size_t(dim)];
      for (const Ref& r : in) {
        if (j < r.shape[size_t(dim)]) {
          out.at(i) = r.at(with_coord(i, dim, j));
          return;
        }
        j -= r.shape[size_t(dim)];
      }
    });
    return std::vector<Ref>{out};
  };
  return c;
}

OpCase case_index_select() {
  OpCase c;
  c.samples = {{"dim 0", {real({5, 3}), index({4}, 5)}, DimAttrs{0}},
               {"dim 1, repeats", {real({2, 6, 2}), index({8}, 6)}, DimAttrs{1}},
               {"last dim int32", {real({3, 4}), index32({2}, 4)}, DimAttrs{1}}};
  c.reference = [](const std::vector<Ref>& in, const Attrs& attrs) {
    const int64_t dim = std::get<DimAttrs>(attrs).dim;
    Shape s = in[0].shape;
    s[size_t(dim)] = in[1].size();
    Ref out(s);
    for_each_index(s, [&](const std::vector<int64_t>& i) {
      out.at(i) = in[0].at(with_coord(i, dim, int64_t(in[1].v[size_t(i[size_t(dim)])])));
    });
    return std::vector<Ref>{out};
  };
  return c;
}

namespace {
// Inputs (base, index, src): base with src's slices added at index along dim.
std::vector<Ref> index_add_reference(const std::vector<Ref>& in, const Attrs& attrs) {
  const int64_t dim = std::get<DimAttrs>(attrs).dim;
  Ref out = in[0];
  for_each_index(in[2].shape, [&](const std::vector<int64_t>& i) {
    out.at(with_coord(i, dim, int64_t(in[1].v[size_t(i[size_t(dim)])]))) += in[2].at(i);
  });
  return {out};
}
}  // namespace

OpCase case_index_add() {
  OpCase c;
  c.samples = {{"dim 0, repeats", {real({4, 3}), index({6}, 4), real({6, 3})}, DimAttrs{0}},
               {"dim 1", {real({2, 5, 2}), index({3}, 5), real({2, 3, 2})}, DimAttrs{1}}};
  c.reference = index_add_reference;
  return c;
}

// The same, base updated in place (the embedding's gradient rows into its pending sum). The
// last sample is big enough for the CPU kernel to split its columns across threads.
OpCase case_index_accumulate() {
  OpCase c;
  c.samples = {{"dim 0, repeats", {real({4, 3}), index({6}, 4), real({6, 3})}, DimAttrs{0}},
               {"dim 1", {real({2, 5, 2}), index({3}, 5), real({2, 3, 2})}, DimAttrs{1}},
               {"embedding rows, int32", {real({50, 600}), index32({64}, 50), real({64, 600})}, DimAttrs{0}}};
  c.gradcheck = false;
  c.reference = index_add_reference;
  return c;
}

OpCase case_gather() {
  OpCase c;
  c.samples = {{"dim 1", {real({3, 5}), index({3, 4}, 5)}, DimAttrs{1}},
               {"dim 0, smaller index", {real({4, 3}), index({2, 2}, 4)}, DimAttrs{0}},
               {"3-d int32", {real({2, 3, 4}), index32({2, 3, 2}, 4)}, DimAttrs{2}}};
  c.reference = [](const std::vector<Ref>& in, const Attrs& attrs) {
    const int64_t dim = std::get<DimAttrs>(attrs).dim;
    Ref out(in[1].shape);
    for_each_index(out.shape, [&](const std::vector<int64_t>& i) {
      out.at(i) = in[0].at(with_coord(i, dim, int64_t(in[1].at(i))));
    });
    return std::vector<Ref>{out};
  };
  return c;
}

OpCase case_scatter_add() {
  OpCase c;
  c.samples = {{"dim 1, repeats", {real({3, 4}), index({3, 6}, 4), real({3, 6})}, DimAttrs{1}},
               {"dim 0, smaller index", {real({4, 3}), index({2, 2}, 4), real({2, 2})}, DimAttrs{0}}};
  c.reference = [](const std::vector<Ref>& in, const Attrs& attrs) {
    const int64_t dim = std::get<DimAttrs>(attrs).dim;
    Ref out = in[0];
    for_each_index(in[1].shape, [&](const std::vector<int64_t>& i) {
      out.at(with_coord(i, dim, int64_t(in[1].at(i)))) += in[2].at(i);
    });
    return std::vector<Ref>{out};
  };
  return c;
}

namespace {
// x rounded to a float format with `mantissa` stored bits, exponent range [min_exp, max_exp]
// (round to nearest, ties to even; overflow to infinity), computed with frexp/ldexp.
double round_to_format(double x, int mantissa, int min_exp, int max_exp) {
  if (x == 0 || !std::isfinite(x)) return x;
  int e;
  std::frexp(x, &e);                              // x = m 2^e, 0.5 <= |m| < 1
  const int exponent = std::max(e - 1, min_exp);  // subnormals share the smallest exponent
  const double quantum = std::ldexp(1.0, exponent - mantissa);
  const double r = std::nearbyint(x / quantum) * quantum;
  return std::abs(r) >= std::ldexp(1.0, max_exp + 1) ? std::copysign(INFINITY, x) : r;
}
}  // namespace

OpCase case_cast() {
  OpCase c;
  for (DType to : {DType::f64, DType::f32, DType::bf16, DType::f16, DType::i32, DType::i64, DType::b8, DType::u8})
    c.samples.push_back({cat("to ", dtype_name(to)), {real({3, 5})}, CastAttrs{to}});
  c.samples.push_back({"int64 to float32", {index({4}, 1000)}, CastAttrs{DType::f32}});
  c.reference = [](const std::vector<Ref>& in, const Attrs& attrs) {
    const DType to = std::get<CastAttrs>(attrs).dtype;
    auto conv = [to](double x) {
      switch (to) {
        case DType::f32: return double(float(x));
        case DType::bf16: return round_to_format(double(float(x)), 7, -126, 127);
        case DType::f16: return round_to_format(double(float(x)), 10, -14, 15);
        case DType::i32:
        case DType::i64: return std::trunc(x);
        case DType::u8: return double(uint8_t(int64_t(std::trunc(x))));
        case DType::b8: return x != 0 ? 1.0 : 0.0;
        default: return x;
      }
    };
    return std::vector<Ref>{map1(in[0], conv)};
  };
  return c;
}

OpCase case_copy() {
  OpCase c;
  c.samples = {{"2-d", {real({3, 4})}}, {"0-dim", {real({})}}, {"int64", {index({5}, 3)}}, {"bool", {mask({2, 3})}}};
  c.reference = [](const std::vector<Ref>& in, const Attrs&) { return std::vector<Ref>{in[0]}; };
  return c;
}

namespace {
OpCase random_case(RandomKind kind, double a, double b) {
  OpCase c;
  c.samples = {{"[7, 5] at offset 0", {}, RandomAttrs{kind, a, b, {7, 5}, DType::f32, kCPU, 11, 0}},
               {"[3] at offset 9", {}, RandomAttrs{kind, a, b, {3}, DType::f32, kCPU, 11, 9}}};
  c.reference = [](const std::vector<Ref>&, const Attrs& attrs) {
    const auto& r = std::get<RandomAttrs>(attrs);
    Ref out(r.shape);
    for (size_t i = 0; i < out.v.size(); ++i) {
      const uint32_t bits = philox::block(r.seed, r.offset + i / 4).v[i % 4];
      switch (r.kind) {
        case RandomKind::uniform: {
          const double u = r.dtype == DType::f32 ? double(bits >> 8) / 16777216.0 : double(bits) / 4294967296.0;
          out.v[i] = r.a + (r.b - r.a) * u;
          break;
        }
        case RandomKind::bernoulli: out.v[i] = double(bits) / 4294967296.0 < r.a ? 1 : 0; break;
        case RandomKind::normal: out.v[i] = r.a + r.b * philox::normal(r.seed, r.offset, i); break;
      }
    }
    return std::vector<Ref>{out};
  };
  c.gradcheck = false;
  return c;
}
}  // namespace

OpCase case_uniform() { return random_case(RandomKind::uniform, -2, 3); }
OpCase case_normal() { return random_case(RandomKind::normal, 1, 2); }
OpCase case_bernoulli() { return random_case(RandomKind::bernoulli, 0.3, 0); }

}  // namespace qkv::test
