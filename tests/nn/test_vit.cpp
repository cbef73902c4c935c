#include <doctest/doctest.h>

#include "nn/models/set_transformer.h"
#include "nn/models/vit.h"

using namespace qkv;
using namespace qkv::nn;

TEST_CASE("patchify cuts row-major patches and flattens each channel-first") {
  Tensor x = arange(0, 2 * 4 * 6, 1, DType::f32).reshape({1, 2, 4, 6});  // C=2, H=4, W=6
  Tensor p = patchify(x, 2);
  CHECK(p.shape() == Shape{1, 6, 8});
  // Patch 1 is rows 0-1, columns 2-3: channel 0 pixels (0,2) (0,3) (1,2) (1,3), then channel 1.
  CHECK(p.select(0, 0).select(0, 1).to_vector<float>() == std::vector<float>{2, 3, 8, 9, 26, 27, 32, 33});
  CHECK_THROWS_WITH_AS(patchify(x, 4), doctest::Contains("does not divide the 4x6 images"), ShapeError);
}

TEST_CASE("the ViT maps images to class logits for every attention variant") {
  for (auto [s, m, kv] :
       {std::tuple{Sharing::qkv, 0, 0}, {Sharing::qk_v, 50, 0}, {Sharing::all, 0, 0}, {Sharing::q_kv, 0, 1}}) {
    ViTConfig c;
    c.attention.d_model = 32;
    c.attention.heads = 4;
    c.attention.sharing = s;
    c.attention.pos2d = m;
    c.attention.kv_heads = kv;
    c.layers = 2;
    ViT vit(c);
    Tensor logits = vit.forward(randn({3, 1, 28, 28}));
    CHECK(logits.shape() == Shape{3, 10});
    CHECK(vit.pos_embed.shape() == Shape{1, 17, 32});
    sum(logits).backward();
    CHECK(vit.cls_token.grad().defined());
  }
  ViTConfig bad;
  bad.patch = 5;
  CHECK_THROWS_WITH_AS(ViT{bad}, doctest::Contains("patch 5 must divide"), ValueError);
}

TEST_CASE("the set transformer is permutation-equivariant, and the 2D scores make it order-aware") {
  SetTransformerConfig c;
  c.features = 12;
  c.attention.d_model = 16;
  c.attention.heads = 2;
  Tensor x = randn({2, 10, 12});
  Tensor perm = from_vector<int64_t>({3, 0, 9, 1, 7, 2, 8, 4, 6, 5});
  for (Sharing s : {Sharing::qkv, Sharing::all}) {
    c.attention.sharing = s;
    c.attention.pos2d = 0;
    SetTransformer model(c);
    model.eval();
    Tensor a = index_select(model.forward(x), 1, perm);
    Tensor b = model.forward(index_select(x, 1, perm));
    CHECK(amax(abs(a - b)).item<float>() < 1e-5);
    c.attention.pos2d = 10;
    SetTransformer plus(c);
    {
      NoGradGuard ng;  // weights large enough that the 2D scores matter
      for (auto& blk : plus.blocks) blk->attn.pos2d_weight.copy_(randn({10}));
    }
    Tensor pa = index_select(plus.forward(x), 1, perm);
    Tensor pb = plus.forward(index_select(x, 1, perm));
    CHECK(amax(abs(pa - pb)).item<float>() > 1e-3);
  }
}
