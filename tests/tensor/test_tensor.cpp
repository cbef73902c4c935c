#include <doctest/doctest.h>

#include "autograd/autograd.h"
#include "tensor/view.h"

using namespace qkv;

namespace {
Tensor iota(const Shape& s, DType dt = DType::f32) { return arange(0, double(numel(s)), 1, dt).reshape(s); }
}  // namespace

TEST_CASE("reshape is a view when strides allow and a copy otherwise") {
  Tensor x = iota({2, 3, 4});
  Tensor v = x.reshape({6, 4});
  CHECK(v.same_storage(x));
  CHECK(v.to_vector<float>() == x.to_vector<float>());
  Tensor t = x.transpose(1, 2);  // [2, 4, 3], not contiguous
  CHECK_FALSE(t.is_contiguous());
  Tensor r = t.reshape({2, 12});
  CHECK_FALSE(r.same_storage(x));
  CHECK(r.to_vector<float>()[1] == 4.0f);       // x[0, 1, 0]
  CHECK(t.reshape({2, 4, 3}).same_storage(x));  // identity reshape stays a view
  CHECK(x.reshape({-1, 2}).shape() == Shape{12, 2});
  CHECK_THROWS_WITH_AS(t.view({24}), doctest::Contains("without a copy"), ShapeError);
  CHECK_THROWS_WITH_AS(x.reshape({5, -1}), doctest::Contains("cannot infer -1"), ShapeError);
  CHECK_THROWS_AS(x.reshape({-1, -1}), ShapeError);
  Tensor split = x.view({2, 3, 2, 2});  // splitting a dim of a view
  CHECK(split.strides() == Strides{12, 4, 2, 1});
}

TEST_CASE("permute, transpose, slice with step, select and narrow share storage") {
  Tensor x = iota({3, 4});
  Tensor p = x.permute({1, 0});
  CHECK(p.shape() == Shape{4, 3});
  CHECK(p.strides() == Strides{1, 4});
  CHECK(p.contiguous().to_vector<float>() == std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
  Tensor s = x.slice(1, 1, 4, 2);  // columns 1 and 3
  CHECK(s.same_storage(x));
  CHECK(s.to_vector<float>() == std::vector<float>{1, 3, 5, 7, 9, 11});
  CHECK(x.slice(0, -2, 100).to_vector<float>() == std::vector<float>{4, 5, 6, 7, 8, 9, 10, 11});
  CHECK(x.slice(0, 2, 1).numel() == 0);
  CHECK(x.select(1, -1).to_vector<float>() == std::vector<float>{3, 7, 11});
  CHECK(x.narrow(0, 1, 1).shape() == Shape{1, 4});
  CHECK_THROWS_AS(x.narrow(0, 2, 2), IndexError);
  CHECK_THROWS_AS(x.slice(0, 0, 2, 0), ValueError);
  CHECK_THROWS_WITH_AS(x.permute({0, 0}), doctest::Contains("repeats"), ShapeError);
}

TEST_CASE("expand broadcasts with stride 0 and squeeze and unsqueeze move size-1 dims") {
  Tensor x = iota({3, 1});
  Tensor e = x.expand({2, 3, 4});
  CHECK(e.strides()[0] == 0);
  CHECK(e.strides()[2] == 0);
  CHECK(e.contiguous().to_vector<float>()[5] == 1.0f);
  CHECK(x.expand({-1, 2}).shape() == Shape{3, 2});
  CHECK_THROWS_WITH_AS(x.expand({4, 4}), doctest::Contains("cannot expand shape [3, 1] to [4, 4]"), ShapeError);
  CHECK(x.squeeze(1).shape() == Shape{3});
  CHECK(x.squeeze(0).shape() == Shape{3, 1});
  CHECK(x.unsqueeze(0).shape() == Shape{1, 3, 1});
  CHECK(x.unsqueeze(-1).shape() == Shape{3, 1, 1});
  CHECK(iota({1, 2, 1}).squeeze().shape() == Shape{2});
}

TEST_CASE("copy_, fill_ and to(dtype) convert and broadcast") {
  Tensor x = zeros({2, 3});
  x.copy_(from_vector<double>({1.5, -2.25, 3}));
  CHECK(x.to_vector<float>() == std::vector<float>{1.5f, -2.25f, 3, 1.5f, -2.25f, 3});
  x.slice(1, 0, 3, 2).fill_(7);
  CHECK(x.to_vector<float>() == std::vector<float>{7, -2.25f, 7, 7, -2.25f, 7});
  CHECK(x.to(DType::i32).to_vector<int32_t>() == std::vector<int32_t>{7, -2, 7, 7, -2, 7});
  CHECK(x.to(DType::b8).to_vector<bool>() == std::vector<bool>(6, true));
  CHECK(x.to(DType::bf16).to(DType::f32).to_vector<float>() == x.to_vector<float>());
  Tensor sq = iota({3, 3});
  sq.copy_(sq.transpose(0, 1));  // overlapping source is read first
  CHECK(sq.to_vector<float>() == std::vector<float>{0, 3, 6, 1, 4, 7, 2, 5, 8});
  Tensor c = sq.clone();
  c.fill_(0);
  CHECK(sq.to_vector<float>()[1] == 3.0f);
}

TEST_CASE("factories and host values") {
  CHECK(arange(5).dtype() == DType::i64);
  CHECK(arange(1, 2, 0.25, DType::f64).to_vector<double>() == std::vector<double>{1, 1.25, 1.5, 1.75});
  CHECK(full({2}, 3.5).to_vector<float>() == std::vector<float>{3.5f, 3.5f});
  CHECK(scalar_tensor(4).dim() == 0);
  CHECK(scalar_tensor(4).item<float>() == 4.0f);
  CHECK_THROWS_WITH_AS(ones({2}).item<float>(), doctest::Contains("one element"), ShapeError);
  CHECK_THROWS_WITH_AS(from_vector<float>({1, 2, 3}, {2, 2}), doctest::Contains("do not fill"), ShapeError);
  CHECK_THROWS_WITH_AS(ones({2}).data<double>(), doctest::Contains("float32"), DTypeError);
  CHECK(empty({0, 3}).numel() == 0);
  CHECK(sum(empty({0, 3})).item<float>() == 0.0f);
}

TEST_CASE("printing looks like PyTorch and summarizes large tensors") {
  CHECK(from_vector<float>({1, -2.5f, 3}, {3}).str() ==
        "tensor([ 1.0000, -2.5000,  3.0000], shape=[3], dtype=float32, device=cpu)");
  CHECK(from_vector<int64_t>({1, 20}, {2, 1}).str() ==
        "tensor([[ 1],\n        [20]], shape=[2, 1], dtype=int64, device=cpu)");
  const std::string big = iota({100, 100}).str();
  CHECK(big.find("...") != std::string::npos);
  CHECK(big.size() < 1000);
  Tensor g = ones({2}).set_requires_grad();
  CHECK(g.str().find("requires_grad=True") != std::string::npos);
  CHECK(from_vector<bool>({true, false}).str().find("True, False") != std::string::npos);
}

TEST_CASE("view strides follow PyTorch's rules") {
  CHECK(raw::view_strides({2, 3}, {3, 1}, {3, 2}) == Strides{2, 1});
  CHECK(raw::view_strides({2, 3}, {1, 2}, {6}) == std::nullopt);            // transposed
  CHECK(raw::view_strides({4, 2}, {4, 1}, {2, 2, 2}) == Strides{8, 4, 1});  // sliced rows, split outer
  CHECK(raw::view_strides({4, 2}, {4, 1}, {8}) == std::nullopt);
}
