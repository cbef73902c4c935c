// The mpi back end between two ranks (mpirun -np 2, tests/CMakeLists.txt): every collective with
// values that depend on the rank, checked exactly on both ranks. Every case runs on both ranks
// in the same order, so the collectives line up; a case that fails on one rank still issues
// the same collectives.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/train/dist/dist_test.h"
#include "train/dist/communicator.h"

namespace qkv::test {

namespace {

using dist::ReduceOp;

// Element i of rank r: (i + 1) * (r + 1), negative at odd i, so sum, max and min all differ.
template <class T> T value(int64_t i, int rank) {
  const T v = T((i + 1) * (rank + 1));
  return i % 2 ? T(-v) : v;
}
template <class T> T expected(int64_t i, ReduceOp op, int size) {
  T sum = 0, mx = value<T>(i, 0), mn = value<T>(i, 0);
  for (int r = 0; r < size; ++r) {
    sum += value<T>(i, r);
    mx = std::max(mx, value<T>(i, r));
    mn = std::min(mn, value<T>(i, r));
  }
  return op == ReduceOp::sum ? sum : op == ReduceOp::max ? mx : mn;
}
template <class T> Tensor rank_tensor(int64_t n, int rank) {
  std::vector<T> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = value<T>(i, rank);
  return from_vector<T>(v);
}
template <class T> void check_reduced(const Tensor& t, ReduceOp op, int size) {
  const std::vector<T> got = t.to_vector<T>();
  int64_t wrong = 0;
  for (int64_t i = 0; i < int64_t(got.size()); ++i) wrong += got[size_t(i)] != expected<T>(i, op, size);
  CHECK(wrong == 0);
}

const char* op_name(ReduceOp op) { return op == ReduceOp::sum ? "sum" : op == ReduceOp::max ? "max" : "min"; }

template <class T> void all_reduce_each_op(int64_t n) {
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::min}) {
    CAPTURE(op_name(op));
    Tensor t = rank_tensor<T>(n, comm().rank());
    comm().all_reduce(t, op, cat("test all_reduce ", op_name(op), " of ", n, " ", dtype_name(t.dtype())));
    check_reduced<T>(t, op, comm().size());
  }
}

}  // namespace

TEST_CASE("dist: two ranks on one node") {
  REQUIRE(comm().backend() == "mpi");
  REQUIRE(comm().size() == 2);
  CHECK(comm().local_size() == 2);
  CHECK(comm().local_rank() == comm().rank());
  const std::vector<std::string> ranks = comm().all_gather(std::to_string(comm().rank()), "test ranks");
  CHECK(ranks == std::vector<std::string>{"0", "1"});
}

TEST_CASE("dist: all_reduce sum max min of float32 float64 int64 tensors") {
  all_reduce_each_op<float>(1000);
  all_reduce_each_op<double>(1000);
  all_reduce_each_op<int64_t>(1000);
  all_reduce_each_op<float>(1 << 20);  // beyond the eager limits of the shared-memory transport
  all_reduce_each_op<double>(1);
  // int64 values no double holds exactly
  Tensor big = from_vector<int64_t>({(int64_t(1) << 60) + comm().rank(), -(int64_t(1) << 61) - 3 * comm().rank()});
  comm().all_reduce(big, ReduceOp::sum, "test all_reduce of large int64");
  CHECK(big.to_vector<int64_t>() == std::vector<int64_t>{(int64_t(1) << 61) + 1, -(int64_t(1) << 62) - 3});
  Tensor empty = zeros({0});
  comm().all_reduce(empty, ReduceOp::sum, "test all_reduce of nothing");
  CHECK(empty.numel() == 0);
}

TEST_CASE("dist: async all_reduces in flight together finish in any wait order") {
  const int k = 8;
  for (const char* order : {"reverse", "interleaved", "dropped"}) {
    CAPTURE(order);
    std::vector<Tensor> ts;
    std::vector<std::unique_ptr<dist::Work>> works;
    for (int j = 0; j < k; ++j) {
      ts.push_back(rank_tensor<double>(100 + 1000 * j, comm().rank()));
      works.push_back(comm().all_reduce_async(ts.back(), ReduceOp::sum, cat("test async ", order, " ", j + 1)));
    }
    if (std::string(order) == "reverse")
      for (int j = k - 1; j >= 0; --j) works[size_t(j)]->wait();
    if (std::string(order) == "interleaved")
      for (int j : {3, 0, 7, 5, 1, 2, 6, 4}) works[size_t(j)]->wait();
    works.clear();  // "dropped": the Work's destructor waits
    for (int j = 0; j < k; ++j) check_reduced<double>(ts[size_t(j)], ReduceOp::sum, comm().size());
  }
}

TEST_CASE("dist: a tensor handle dropped while its all_reduce runs") {
  Tensor t = rank_tensor<float>(1 << 16, comm().rank());
  Tensor view = t;
  auto work = comm().all_reduce_async(t, ReduceOp::max, "test dropped handle");
  t = Tensor();  // the Work keeps the storage alive
  work->wait();
  check_reduced<float>(view, ReduceOp::max, comm().size());
}

TEST_CASE("dist: host all_reduce") {
  const double r = comm().rank();
  CHECK(comm().all_reduce({r, 10 * r + 1, -r}, ReduceOp::sum, "test host sum") == std::vector<double>{1, 12, -1});
  CHECK(comm().all_reduce({r, 10 * r + 1, -r}, ReduceOp::max, "test host max") == std::vector<double>{1, 11, 0});
  CHECK(comm().all_reduce({r, 10 * r + 1, -r}, ReduceOp::min, "test host min") == std::vector<double>{0, 1, -1});
  CHECK(comm().all_reduce(std::vector<double>{}, ReduceOp::sum, "test host empty").empty());
}

TEST_CASE("dist: all_gather of bytes of different lengths") {
  const std::string mine = comm().rank() == 0 ? std::string("a") : std::string("bc\0d", 4);
  CHECK(comm().all_gather(mine, "test all_gather") == std::vector<std::string>{"a", std::string("bc\0d", 4)});
  const std::string only_one = comm().rank() == 1 ? "x" : "";
  CHECK(comm().all_gather(only_one, "test all_gather one") == std::vector<std::string>{"", "x"});
  CHECK(comm().all_gather("", "test all_gather empty") == std::vector<std::string>{"", ""});
}

TEST_CASE("dist: broadcast from either root") {
  for (int root : {0, 1}) {
    const std::string mine = cat("bytes of rank ", comm().rank(), std::string(1000 * comm().rank(), '!'));
    CHECK(comm().broadcast(mine, root, "test broadcast") ==
          cat("bytes of rank ", root, std::string(size_t(1000 * root), '!')));
  }
  CHECK(comm().broadcast(comm().rank() == 0 ? "" : "ignored", 0, "test broadcast empty").empty());
  CHECK_THROWS_WITH_AS(comm().broadcast("x", 2, "test broadcast root"),
                       doctest::Contains("root rank 2 is not in this job of 2 ranks"), dist::DistError);
}

TEST_CASE("dist: barrier") {
  for (int i = 0; i < 3; ++i) comm().barrier(cat("test barrier ", i + 1));
}

TEST_CASE("dist: a tensor the back end cannot reduce is a clear error") {
  // Each rank throws before any collective, so the ranks stay in step.
  Tensor t = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}).transpose(0, 1);
  CHECK_THROWS_WITH_AS(comm().all_reduce(t, ReduceOp::sum, "test strided"),
                       doctest::Contains(
                           "all-reduce of test strided: needs a contiguous tensor, got a [3, 2] tensor of float32"),
                       dist::DistError);
  Tensor i32 = from_vector<int32_t>({1, 2});
  CHECK_THROWS_WITH_AS(comm().all_reduce(i32, ReduceOp::sum, "test int32"),
                       doctest::Contains("reduces float32, float64 and int64 tensors, got a tensor of int32 on cpu"),
                       dist::DistError);
  if (cuda_available()) {
    Tensor gpu = zeros({4}, Device("cuda:0"));
    CHECK_THROWS_WITH_AS(comm().all_reduce(gpu, ReduceOp::sum, "test cuda"),
                         doctest::Contains("the mpi back end serves CPU tensors, got a tensor of float32 on cuda:0"),
                         dist::DistError);
  }
  // The communicator still works after the refusals.
  CHECK(comm().all_reduce({1.0}, ReduceOp::sum, "test after refusals") == std::vector<double>{2.0});
}

}  // namespace qkv::test
