// The sharing table (nn/sharing.h) and the variant names built on it (nn/variant.h), as
// properties every row must have: a row added to the table is tested here without a new test.
#include <doctest/doctest.h>

#include <set>

#include "nn/attention.h"
#include "nn/variant.h"

using namespace qkv;
using namespace qkv::nn;

namespace {

AttentionConfig config(Sharing s, int64_t kv_heads = 0) {
  AttentionConfig c;
  c.d_model = 16;
  c.heads = 4;
  c.kv_heads = kv_heads;
  c.sharing = s;
  return c;
}

double max_abs_diff(const Tensor& a, const Tensor& b) { return amax(abs(a - b)).item<float>(); }

}  // namespace

TEST_CASE("sharing table: each row builds one projection per slot, named after it") {
  for (const SharingPattern& p : sharing_table()) {
    CAPTURE(p.name);
    Attention a(config(p.id));
    std::set<std::string> names;
    for (const auto& [name, t] : a.named_parameters()) names.insert(name);
    std::set<std::string> expected{"o.weight", "o.bias"};
    for (int i = 0; i < p.slot_count(); ++i) {
      expected.insert(std::string(p.slot_name(i)) + ".weight");
      expected.insert(std::string(p.slot_name(i)) + ".bias");
    }
    CHECK(names == expected);
    const int64_t d = 16;
    CHECK(a.num_parameters() == p.projection_width(d, d) * (d + 1) + d * (d + 1));
  }
}

TEST_CASE("sharing table: tied roles are one tensor handle, untied roles are not") {
  Tensor x = randn({2, 5, 16});
  for (const SharingPattern& p : sharing_table()) {
    CAPTURE(p.name);
    Attention a(config(p.id));
    const Attention::Heads h = a.project(x);
    const Tensor* role[3] = {&h.q, &h.k, &h.v};
    for (Role r : kRoles)
      for (Role s : kRoles) {
        CAPTURE(role_name(r));
        CAPTURE(role_name(s));
        CHECK((role[size_t(r)]->impl_ptr() == role[size_t(s)]->impl_ptr()) == p.ties(r, s));
        CHECK((&a.projection(r) == &a.projection(s)) == p.ties(r, s));
      }
    CHECK(p.cache_tensors() == (p.ties(Role::k, Role::v) ? 1 : 2));
  }
}

TEST_CASE("sharing table: each row equals QKV whose tied roles are given the same weights") {
  // The study's definition of every pattern: W_role of QKV set to the weights of the slot that
  // serves that role computes the same attention, values and input gradients.
  Tensor x = randn({2, 6, 16});
  for (const SharingPattern& p : sharing_table()) {
    for (int64_t kv_heads : {0, 2}) {
      if (kv_heads > 0 && !has_head_sharing_forms(p.id)) continue;
      CAPTURE(p.name);
      CAPTURE(kv_heads);
      Attention shared(config(p.id, kv_heads)), full(config(Sharing::qkv, kv_heads));
      {
        NoGradGuard ng;
        for (Role r : kRoles) {
          full.projection(r).weight.copy_(shared.projection(r).weight);
          full.projection(r).bias.copy_(shared.projection(r).bias);
        }
        full.o.weight.copy_(shared.o.weight);
        full.o.bias.copy_(shared.o.bias);
      }
      Tensor a = x.detach().set_requires_grad(), b = x.detach().set_requires_grad();
      Tensor ya = shared.forward(a), yb = full.forward(b);
      CHECK(max_abs_diff(ya, yb) < 1e-6);
      sum(ya * ya).backward();
      sum(yb * yb).backward();
      CHECK(max_abs_diff(a.grad(), b.grad()) < 1e-5);
    }
  }
}

TEST_CASE("sharing table: every projection of every row gets a gradient") {
  for (const SharingPattern& p : sharing_table()) {
    CAPTURE(p.name);
    Attention a(config(p.id));
    sum(a.forward(randn({2, 5, 16}))).backward();
    for (const auto& [name, t] : a.named_parameters()) {
      CAPTURE(name);
      REQUIRE(t.grad().defined());
      CHECK(amax(abs(t.grad())).item<float>() > 0);
    }
  }
}

TEST_CASE("variant names: every form round-trips, aliases normalize, bad names list the forms") {
  for (const SharingPattern& p : sharing_table()) {
    CAPTURE(p.name);
    CHECK(parse_variant(p.name) == Variant{p.id, 0, false});
    CHECK(parse_variant(p.alias) == Variant{p.id, 0, false});
    std::vector<Variant> forms{{p.id, 0, false}};
    if (has_pos2d_form(p.id)) forms.push_back({p.id, 0, true});
    if (has_head_sharing_forms(p.id)) forms.insert(forms.end(), {{p.id, 1, false}, {p.id, 4, false}});
    for (const Variant& v : forms) {
      CAPTURE(variant_name(v));
      CHECK(parse_variant(variant_name(v)) == v);
      CHECK(accepted_variant_forms().find(v.kv_heads > 1 ? "GQA-g" : variant_name(v)) != std::string::npos);
    }
    // The (+) scores exist where Q and K share a slot; head sharing where Q has one alone.
    CHECK(has_pos2d_form(p.id) == p.ties(Role::q, Role::k));
    CHECK(has_head_sharing_forms(p.id) == (!p.ties(Role::q, Role::k) && !p.ties(Role::q, Role::v)));
  }
  // The paper's names.
  CHECK(parse_variant("GQA-04") == Variant{Sharing::qkv, 4, false});
  CHECK(variant_name(parse_variant("GQA-04")) == "GQA-4");
  CHECK(parse_variant("MQA") == Variant{Sharing::qkv, 1, false});
  CHECK(parse_variant("Q-GQA-8") == Variant{Sharing::q_kv, 8, false});
  CHECK(parse_variant("Q-MQA") == Variant{Sharing::q_kv, 1, false});
  CHECK(parse_variant("(Q=K=V)+") == Variant{Sharing::all, 0, true});
  for (const char* bad : {"QK=V", "(QKV)+", "(qk)+", "GQA-0", "GQA-", "Q=K-GQA-2", "Q=V-MQA", "(Q=V-K)+", ""}) {
    CAPTURE(bad);
    CHECK_FALSE(try_parse_variant(bad).has_value());
    CHECK_THROWS_WITH_AS(parse_variant(bad), doctest::Contains("Q-GQA-g, Q-MQA"), ValueError);
  }
}

TEST_CASE("sharing table: the worked example of docs/ADDING_A_VARIANT.md, Q=V-K, from its one row") {
  // The row: X(qv_k, "Q=V-K", "qv", "qv", "k", "qv"). Everything below follows from it.
  const Variant v = parse_variant("Q=V-K");
  CHECK(v == Variant{Sharing::qv_k, 0, false});
  CHECK(parse_variant("qv") == v);
  CHECK(variant_name(v) == "Q=V-K");
  CHECK_FALSE(try_parse_variant("(Q=V-K)+").has_value());  // Q and K are untied: no symmetry to break
  CHECK_FALSE(try_parse_variant("Q=V-MQA").has_value());   // V is tied to Q: no head sharing

  AttentionConfig c = config(Sharing::qv_k);
  c.d_model = 1024;
  c.heads = 16;
  Attention a(c);
  const int64_t d = 1024;
  CHECK(a.num_parameters() == 3 * d * d + 3 * d);  // W_qv, W_k, W_o with biases, like Q=K-V
  CHECK(a.projection(Role::q).weight.shape() == Shape{d, d});
  CHECK(&a.projection(Role::v) == &a.projection(Role::q));
  CHECK(&a.projection(Role::k) != &a.projection(Role::q));
  const Attention::Heads h = Attention(config(Sharing::qv_k)).project(randn({1, 3, 16}));
  CHECK(h.v.impl_ptr() == h.q.impl_ptr());
  CHECK(sharing_pattern(Sharing::qv_k).cache_tensors() == 2);  // K and V are different tensors
  c.kv_heads = 4;
  CHECK_THROWS_WITH_AS(Attention{c}, doctest::Contains("ties V to Q"), ValueError);
}
