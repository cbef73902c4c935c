// Bad input, tried as a new user would: every error names the op and what it got.
#include <doctest/doctest.h>

#include "autograd/autograd.h"

using namespace qkv;

TEST_CASE("shape mismatches name the op and both shapes") {
  CHECK_THROWS_WITH_AS(add(ones({2, 3}), ones({4})), doctest::Contains("add: shapes [2, 3] and [4] do not broadcast"),
                       ShapeError);
  CHECK_THROWS_WITH_AS(matmul(ones({2, 3}), ones({4, 5})),
                       doctest::Contains("matmul: inner dimensions differ: float32 [2, 3] @ float32 [4, 5] (3 vs 4)"),
                       ShapeError);
  CHECK_THROWS_WITH_AS(matmul(ones({3}), ones({3, 2})), doctest::Contains("at least 2 dims"), ShapeError);
  CHECK_THROWS_WITH_AS(layer_norm(ones({2, 4}), ones({3}), Tensor()), doctest::Contains("weight must have shape [4]"),
                       ShapeError);
  CHECK_THROWS_WITH_AS(cross_entropy(ones({4, 3}), zeros({5}, DType::i64)), doctest::Contains("targets of shape [4]"),
                       ShapeError);
  CHECK_THROWS_WITH_AS(concat({ones({2, 3}), ones({2, 4})}, 0), doctest::Contains("input 1 float32 [2, 4]"),
                       ShapeError);
  CHECK_THROWS_WITH_AS(sum(ones({2, 3}), {2}), doctest::Contains("sum: dim 2 is out of range"), IndexError);
}

TEST_CASE("dtype mismatches name the op and both dtypes") {
  CHECK_THROWS_WITH_AS(add(ones({2}), ones({2}, DType::f64)),
                       doctest::Contains("add: dtype mismatch: float32 [2] vs float64 [2]"), DTypeError);
  CHECK_THROWS_WITH_AS(exp(ones({2}, DType::i64)), doctest::Contains("exp: dtype int64 is not supported"), DTypeError);
  CHECK_THROWS_WITH_AS(embedding(ones({4, 2}), ones({3})),
                       doctest::Contains("ids must be int32 or int64, got float32 [3]"), DTypeError);
  CHECK_THROWS_WITH_AS(where(ones({2}), ones({2}), ones({2})),
                       doctest::Contains("where: dtype float32 is not supported"), DTypeError);
}

TEST_CASE("device errors say what is missing") {
  if (cuda_available()) {
    Tensor g = ones({2}).to(Device("cuda:0"));
    CHECK_THROWS_WITH_AS(add(ones({2}), g), doctest::Contains("add: expected all inputs on one device"), DeviceError);
  } else {
    CHECK_THROWS_AS(ones({2}).to(Device("cuda:0")), DeviceError);
    CHECK_THROWS_AS(zeros({2}, Device("cuda:0")), DeviceError);
  }
  CHECK_THROWS_WITH_AS(ones({2}).to(Device("cuda:7")), doctest::Contains("cuda:7"), DeviceError);
}

TEST_CASE("out-of-range indices are errors, not crashes") {
  CHECK_THROWS_WITH_AS(embedding(ones({4, 2}), from_vector<int64_t>({1, 4})),
                       doctest::Contains("embedding: index 4 at position 1 is out of range [0, 4)"), IndexError);
  CHECK_THROWS_WITH_AS(cross_entropy(ones({2, 3}), from_vector<int64_t>({0, 3})),
                       doctest::Contains("target 3 at position 1 is out of range for 3 classes"), IndexError);
  CHECK_THROWS_AS(index_select(ones({3, 2}), 0, from_vector<int64_t>({-1})), IndexError);
  CHECK_THROWS_AS(gather(ones({2, 2}), 1, from_vector<int64_t>({0, 2, 1, 1}, {2, 2})), IndexError);
  CHECK_THROWS_WITH_AS(ones({2}).select(0, 2), doctest::Contains("out of range"), IndexError);
}

TEST_CASE("undefined tensors and bad arguments") {
  CHECK_THROWS_WITH_AS(add(Tensor(), ones({1})), doctest::Contains("add: input 0 is undefined"), ValueError);
  CHECK_THROWS_WITH_AS(Tensor().shape(), doctest::Contains("undefined tensor"), ValueError);
  CHECK_THROWS_WITH_AS(dropout(ones({2}), 1.5), doctest::Contains("p must be in [0, 1]"), ValueError);
  CHECK_THROWS_AS(concat({}, 0), ValueError);
  CHECK_THROWS_AS(normal({2}, 0, -1), ValueError);
}
