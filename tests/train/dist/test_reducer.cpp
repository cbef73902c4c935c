// The gradient reducer (train/dist/reducer.h) and the consistency checks, in one process: a
// communicator that stands for two ranks holding the same gradients (its all-reduce doubles)
// records when each bucket starts, so the test sees the order and the overlap.
#include <doctest/doctest.h>

#include <cstring>

#include "autograd/ops.h"
#include "nn/layers.h"
#include "train/dist/consistency.h"
#include "train/dist/reducer.h"

using namespace qkv;
using namespace qkv::dist;

namespace {

class MirrorComm : public Communicator {
 public:
  std::vector<std::string> started;  // the buckets' names, in start order
  bool in_backward = true;           // set false by the test before finish()
  int started_in_backward = 0;
  int rank() const override { return 0; }
  int size() const override { return 2; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 2; }
  std::string backend() const override { return "mirror"; }
  std::unique_ptr<Work> all_reduce_async(Tensor& t, ReduceOp, const std::string& what) override {
    started.push_back(what);
    started_in_backward += in_backward;
    struct Doubling : Work {
      Tensor t;
      void wait() override { t.copy_(t * 2.0); }
    };
    auto w = std::make_unique<Doubling>();
    w->t = t;
    return w;
  }
  std::vector<double> all_reduce(std::vector<double> v, ReduceOp, const std::string&) override {
    for (double& x : v) x *= 2;
    return v;
  }
  std::vector<std::string> all_gather(const std::string& mine, const std::string&) override { return {mine, other}; }
  std::string broadcast(const std::string& b, int, const std::string&) override { return b; }
  void barrier(const std::string&) override {}
  [[noreturn]] void abort(const std::string& m) override { throw DistError(m); }
  std::string other;  // what "rank 1" gathers
};

}  // namespace

TEST_CASE("reducer: buckets start during backward, in order, and .grad gets the sum over ranks") {
  Generator gen(1);
  nn::Linear a(6, 5, true, &gen), b(5, 4, true, &gen), unused(3, 3, true, &gen);
  // The unused parameter registered first: its bucket comes last, so it cannot hold the others back.
  std::vector<Tensor> params = {unused.weight, a.weight, a.bias, b.weight, b.bias};
  MirrorComm comm;
  GradReducer reducer(comm, params, 20 * 4 / (1024.0 * 1024.0));  // from 20 floats on, a new bucket
  CHECK(reducer.buckets() == 3);
  const Tensor x = from_vector(std::vector<float>(12, 0.5f), {2, 6});
  for (int step = 0; step < 2; ++step) {
    for (Tensor& p : params) p.zero_grad();
    comm.started.clear();
    comm.in_backward = true;
    comm.started_in_backward = 0;
    // Reference gradients of one rank, then the same backward under the reducer.
    sum(b.forward(a.forward(x))).backward();
    std::vector<std::vector<float>> one;
    for (Tensor& p : params) one.push_back(p.grad().defined() ? p.grad().to_vector<float>() : std::vector<float>{});
    for (Tensor& p : params) p.zero_grad();
    reducer.arm(step);
    sum(b.forward(a.forward(x))).backward();
    comm.in_backward = false;
    reducer.finish();
    // Buckets in order (the last parameters first), most of them started by the backward; the
    // unused parameter's bucket only by finish(), with zeros.
    REQUIRE(comm.started.size() == size_t(reducer.buckets()));
    for (size_t i = 0; i < comm.started.size(); ++i)
      CHECK(comm.started[i] == cat("gradient bucket ", i + 1, " of ", reducer.buckets(), " at step ", step + 1));
    CHECK(comm.started_in_backward == 2);
    for (size_t k = 1; k < params.size(); ++k) {
      const std::vector<float> got = params[k].grad().to_vector<float>();
      REQUIRE(got.size() == one[k].size());
      for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(2 * one[k][i]));
    }
    CHECK(params.front().grad().to_vector<float>() == std::vector<float>(9, 0.0f));
  }
  // Unarmed (a micro-batch before the last), the hooks do nothing.
  comm.started.clear();
  sum(b.forward(a.forward(x))).backward();
  CHECK(comm.started.empty());
}

TEST_CASE("consistency: digests see names, shapes and values, and a differing rank is named") {
  const Tensor t = from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2});
  const uint64_t d = digest({{"w", t}});
  CHECK(digest({{"w", t.clone()}}) == d);
  CHECK(digest({{"v", t}}) != d);
  CHECK(digest({{"w", t.reshape({4})}}) != d);
  CHECK(digest({{"w", t * 1.5}}) != d);
  MirrorComm comm;
  comm.other = std::string(8, '\0');
  std::memcpy(comm.other.data(), &d, 8);
  CHECK_NOTHROW(check_identical(comm, d, "initial weights"));
  comm.other[0] ^= 1;
  CHECK_THROWS_WITH_AS(check_identical(comm, d, "initial weights"),
                       doctest::Contains("the initial weights of rank(s) 1 differ from rank 0's"), DistError);
}

TEST_CASE("consistency: rank 0 keeps its generator, other ranks get their own stream at the same position") {
  const GeneratorState s{42, 17};
  CHECK(for_rank(s, 0) == s);
  CHECK(for_rank(s, 1).offset == 17);
  CHECK(for_rank(s, 1).seed != 42);
  CHECK(for_rank(s, 1).seed != for_rank(s, 2).seed);
  CHECK(for_rank(s, 1) == for_rank(s, 1));
}
