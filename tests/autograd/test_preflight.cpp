// The preflight (autograd/preflight.h): a traced training step lists the ops it calls and
// launches nothing (parameters, generators and the profiler's kernel counts are untouched), and
// the rows without a kernel on a device are named before anything trains.
#include <doctest/doctest.h>

#include <algorithm>

#include "autograd/autograd.h"
#include "autograd/preflight.h"
#include "autograd/profiler.h"
#include "nn/models/gpt.h"

using namespace qkv;
using namespace qkv::autograd;

namespace {

nn::GPTConfig tiny_gpt() {
  nn::GPTConfig c;
  c.vocab = 32;
  c.context = 8;
  c.layers = 1;
  c.dropout = 0.1;
  c.attention.d_model = 16;
  c.attention.heads = 2;
  return c;
}

bool has(const std::vector<OpCall>& calls, OpId op) {
  return std::any_of(calls.begin(), calls.end(), [&](const OpCall& c) { return c.op == op; });
}

}  // namespace

TEST_CASE("preflight: a traced training step lists its ops and runs no kernel") {
  Generator gen(1);
  nn::GPT model(tiny_gpt(), &gen);
  model.train();
  const Tensor ids = zeros({2, 8}, DType::i64), targets = ones({2, 8}, DType::i64);
  const std::vector<double> before = model.wte.weight.to_vector<double>();
  const GeneratorState gen_before = gen.state();
  set_profiling_enabled(true);
  reset_profile();
  const std::vector<OpCall> calls = trace_ops([&] { model.loss(ids, targets).backward(); });
  const int64_t matmuls = profiled_calls("matmul");
  set_profiling_enabled(false);

  for (OpId op : {OpId::embedding, OpId::attention, OpId::attention_backward, OpId::layer_norm, OpId::matmul,
                  OpId::cross_entropy, OpId::cross_entropy_backward, OpId::dropout})
    CHECK(has(calls, op));
  CHECK_FALSE(has(calls, OpId::conv2d));
  for (const OpCall& c : calls) CHECK(c.device == kCPU);
  CHECK(std::count_if(calls.begin(), calls.end(), [](const OpCall& c) { return c.op == OpId::matmul; }) == 1);
  CHECK(matmuls == 0);                                    // nothing ran
  CHECK(model.wte.weight.to_vector<double>() == before);  // the weights are as they were
  CHECK(gen.state().offset == gen_before.offset);         // dropout drew nothing
  CHECK(model.wte.weight.grad().defined());               // the caller drops the garbage grads
  CHECK_FALSE(tracing_ops());
}

TEST_CASE("preflight: the rows without a kernel on a device are named, and a CPU step needs none") {
  std::vector<OpId> ops{OpId::attention, OpId::matmul, OpId::conv2d};
  CHECK(ops_without_kernel(ops, kCPU).empty());  // every row has a CPU kernel (the table requires one)
  const Device gpu(DeviceType::cuda, 0);
  if (cuda_compiled()) {
    CHECK(ops_without_kernel(ops, gpu).empty());  // every row has a CUDA kernel too
  } else {
    CHECK(ops_without_kernel(ops, gpu) == std::vector<std::string>{"matmul", "attention", "conv2d"});  // table order
    const std::vector<OpCall> calls{{OpId::attention, gpu}};
    CHECK_THROWS_WITH_AS(require_kernels(calls, {OpId::adam_update}, gpu, "train.device cuda:0"),
                         doctest::Contains("train.device cuda:0: the model needs 2 op(s) with no kernel on cuda:0: "
                                           "attention, adam_update"),
                         DeviceError);
  }
  CHECK_NOTHROW(require_kernels({{OpId::attention, kCPU}}, {OpId::adam_update}, kCPU, "train.device cpu"));
}

TEST_CASE("preflight: traces do not nest, and an exception ends the trace") {
  CHECK_THROWS_AS(trace_ops([] { trace_ops([] {}); }), ValueError);
  CHECK_FALSE(tracing_ops());
  CHECK_THROWS_AS(trace_ops([] { throw ValueError("boom"); }), ValueError);
  CHECK_FALSE(tracing_ops());
}
