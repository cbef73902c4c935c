// GPU parity of whole models: each check runs the same seeded model on the same data once on the
// CPU and once on cuda:0 and compares what the runs report.
//   - a tiny GPT (dropout on) trained 20 steps by train_lm: per-step training losses and the
//     validation losses from metrics.jsonl, equal to 1e-4 relative;
//   - ResNet34 with random weights and running statistics, eval mode: pooled features of 64x64
//     and 224x224 images, max difference <= 1e-4 of each feature vector's max |value|;
//   - a small encoder (dropout on) fitted 2 epochs (128 steps) on the synthetic reverse task by
//     loops::fit: epoch and test losses equal to 1e-4 relative, accuracies within 2 tokens;
//   - a ViT (dropout on) on MNIST-shaped random data, 5 AdamW steps: losses equal to 1e-4
//     relative;
//   - a CUDA graph of a few ops: replays equal to eager runs, bit for bit; a GPT decoding
//     through its replayed static step as through forward_cached, to 1e-4 of the logits.
// The op harness compares every op on its own; these catch what only shows in composition: a
// device-dependent random stream (dropout masks are Philox draws that must match across
// devices), state left on the wrong device by the loops or the optimizer, and errors that
// accumulate over many ops and steps. Without a GPU every case prints the skip line.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "nn/models/encoder.h"
#include "nn/models/gpt.h"
#include "nn/models/resnet.h"
#include "nn/models/vit.h"
#include "nn/variant.h"
#ifdef QKV_HAVE_CUDA
#include "lab/infer/static_decoder.h"
#include "tensor/cuda/graph.h"
#endif
#include "tests/support/lm_optimizer.h"
#include "tests/support/test_support.h"
#include "tests/support/token_data.h"
#include "train/data/synthetic.h"
#include "train/data/tokens/token_batches.h"
#include "train/loops/epoch_loop.h"
#include "train/loops/lm_loop.h"
#include "train/optim/adam.h"
#include "train/optim/schedule.h"

using namespace qkv;
namespace fs = std::filesystem;

namespace {

constexpr double kRelTol = 1e-4;

Device gpu() { return Device(DeviceType::cuda, 0); }

// True when cuda:0 can be used; otherwise prints the skip line CTest reads.
bool have_gpu() {
  if (cuda_available()) return true;
  test::skip("needs a CUDA GPU (cuda:0): this build has no CUDA backend or no GPU is visible");
  return false;
}

double rel_diff(double a, double b) { return std::abs(a - b) / std::max({std::abs(a), std::abs(b), 1e-12}); }

// Checks one CPU / cuda:0 pair of values to kRelTol relative and keeps the largest difference.
void check_close(const std::string& what, double cpu, double cuda, double& worst) {
  const double d = rel_diff(cpu, cuda);
  worst = std::max(worst, d);
  std::ostringstream msg;
  msg.precision(9);
  msg << what << ": cpu " << cpu << " vs cuda:0 " << cuda << ", relative difference " << d << " (tolerance " << kRelTol
      << ")";
  CHECK_MESSAGE(d <= kRelTol, msg.str());
}

void report_worst(const std::string& what, double worst) {
  std::ostringstream msg;
  msg << what << ": largest relative difference cuda:0 vs CPU " << worst;
  MESSAGE(msg.str());
}

// ---- a tiny GPT trained by train_lm ----------------------------------------------------------

constexpr int64_t kVocab = 64;

// Q-K=V, as the GPT-2 block or the Llama block (RMS norms, rotary positions with llama3
// scaling, SwiGLU, a head dim of its own, GQA-2 on the query side's untied K and V).
nn::GPTConfig tiny_gpt(bool llama = false) {
  nn::GPTConfig c;
  c.vocab = kVocab;
  c.context = 16;
  c.layers = 2;
  c.dropout = 0.1;  // the masks are Philox draws: the same on both devices
  c.attention.d_model = 32;
  c.attention.heads = 4;
  c.attention.sharing = nn::Sharing::q_kv;
  if (!llama) return c;
  nn::RopeConfig rope;
  rope.scaling = nn::RopeScaling::llama3;
  rope.factor = 4;
  rope.original_context = 8;
  c = nn::llama_block(c, rope);
  c.attention.head_size = 12;
  c.attention.kv_heads = 2;
  c.tied_head = false;
  return c;
}

struct LmCurves {
  std::vector<loops::LmStepRecord> steps;
  std::vector<loops::EvalRecord> evals;
};

// 20 optimizer steps (two micro-batches each) of a fresh seeded GPT on `device`, run in `dir`;
// the curves are read back from the run's metrics.jsonl.
LmCurves train_tiny_gpt(const Device& device, const fs::path& tokens, const fs::path& dir, bool llama) {
  Generator gen(3);
  nn::GPT model(tiny_gpt(llama), &gen);
  model.to(device);
  REQUIRE(model.wte.weight.device() == device);
  data::TokenBatchOptions tb;
  tb.batch = 4;
  tb.context = 16;
  tb.seed = 11;
  data::TokenBatches train(tokens, "train", tb);
  tb.shuffle = false;
  data::TokenBatches val(tokens, "val", tb);
  optim::CosineWarmup schedule(3e-3, 2, 20, 3e-4);
  loops::LmTrainOptions o;
  o.steps = 20;
  o.grad_accum = 2;
  o.eval_every = 10;
  o.eval_batches = 4;
  o.log_every = 1;
  o.dir = dir;
  o.label = "gpt " + device.str();
  const loops::LmTrainResult r = loops::train_lm(model, gen, *test::lm_adamw(model), train, val, schedule, o);
  REQUIRE(r.finished);
  const auto records = loops::read_metrics(dir / "metrics.jsonl");
  return {loops::records_of<loops::LmStepRecord>(records), loops::records_of<loops::EvalRecord>(records)};
}

void check_gpt_parity(const Device& device, bool llama = false) {
  test::TempDir root("gpu-parity-gpt");
  const fs::path tokens = test::markov_token_dataset(root.path, kVocab);
  const LmCurves cpu = train_tiny_gpt(kCPU, tokens, root.path / "cpu", llama);
  const LmCurves cuda = train_tiny_gpt(device, tokens, root.path / "cuda", llama);
  REQUIRE(cpu.steps.size() == 20);
  REQUIRE(cuda.steps.size() == cpu.steps.size());
  REQUIRE(cpu.evals.size() == 2);
  REQUIRE(cuda.evals.size() == cpu.evals.size());
  double worst = 0;
  for (size_t i = 0; i < cpu.steps.size(); ++i) {
    const int64_t step = cpu.steps[i].step;
    CAPTURE(step);
    CHECK(cuda.steps[i].step == step);
    CHECK(cuda.steps[i].skipped == cpu.steps[i].skipped);
    check_close("training loss of step " + std::to_string(step), cpu.steps[i].loss, cuda.steps[i].loss, worst);
  }
  for (size_t i = 0; i < cpu.evals.size(); ++i) {
    const int64_t step = cpu.evals[i].step;
    CAPTURE(step);
    CHECK(cuda.evals[i].step == step);
    check_close("validation loss at step " + std::to_string(step), cpu.evals[i].val_loss, cuda.evals[i].val_loss,
                worst);
  }
  CHECK(cpu.steps.back().loss < cpu.steps.front().loss);  // it learns, so the comparison means something
  report_worst(llama ? "tiny Llama, 20 steps: training and validation losses"
                     : "tiny GPT, 20 steps: training and validation losses",
               worst);
}

// ---- ResNet34 features -------------------------------------------------------------------------

// Random batch-norm statistics and affine parameters, so that no batch norm is the identity.
void randomize_batch_norms(nn::ResNet34& net, Generator& gen) {
  NoGradGuard no_grad;
  for (auto& [name, t] : net.named_buffers()) {
    if (name.ends_with("running_mean")) t.copy_(randn(t.shape(), {}, &gen) * 0.1);
    else if (name.ends_with("running_var")) t.copy_(rand(t.shape(), {}, &gen) + 0.5);
  }
  for (auto& [name, t] : net.named_parameters()) {
    if (t.dim() != 1 || name.starts_with("fc.")) continue;  // the batch norms' weight and bias
    if (name.ends_with("weight")) t.copy_(rand(t.shape(), {}, &gen) + 0.5);
    else t.copy_(randn(t.shape(), {}, &gen) * 0.1);
  }
}

// The pooled features [N, 512] of `images` (on the CPU) computed on `device`, read back to the CPU.
Tensor resnet_features_on(nn::ResNet34& net, const Device& device, const Tensor& images) {
  net.to(device);
  NoGradGuard no_grad;
  const Tensor f = net.features(images.to(device));
  CHECK(f.device() == device);
  return f.to(kCPU);
}

void check_resnet_parity(const Device& device) {
  Generator gen(7);
  nn::ResNet34 net(1000, &gen);
  randomize_batch_norms(net, gen);
  net.eval();
  double worst = 0;
  for (const int64_t size : {64, 224}) {
    const int64_t n = size == 64 ? 8 : 1;
    const Tensor images = randn({n, 3, size, size}, {}, &gen);
    const Tensor cpu = resnet_features_on(net, kCPU, images);
    const Tensor cuda = resnet_features_on(net, device, images);
    REQUIRE(cpu.shape() == Shape{n, 512});
    REQUIRE(cuda.shape() == cpu.shape());
    // Per image: the largest difference relative to that feature vector's largest |value|.
    const std::vector<double> scale = amax(abs(cpu), {1}).to(DType::f64).to_vector<double>();
    const std::vector<double> diff = amax(abs(cuda - cpu), {1}).to(DType::f64).to_vector<double>();
    for (int64_t i = 0; i < n; ++i) {
      CAPTURE(size);
      CAPTURE(i);
      REQUIRE(scale[size_t(i)] > 0);
      const double rel = diff[size_t(i)] / scale[size_t(i)];
      worst = std::max(worst, rel);
      std::ostringstream msg;
      msg << size << "x" << size << " image " << i << ": max |cuda:0 - cpu| " << diff[size_t(i)] << " of max |feature| "
          << scale[size_t(i)] << ", relative " << rel << " (tolerance " << kRelTol << ")";
      CHECK_MESSAGE(rel <= kRelTol, msg.str());
    }
  }
  report_worst("ResNet34 features (8 images 64x64, 1 image 224x224), relative to max |feature|", worst);
}

// ---- the synthetic encoder fitted by loops::fit ------------------------------------------------

constexpr int64_t kSeqLen = 8, kTrainSize = 4096, kValSize = 256, kTestSize = 256;

loops::TrainResult fit_encoder(const Device& device) {
  const data::SyntheticSplits splits =
      data::make_synthetic_splits(data::SyntheticTask::reverse, kSeqLen, 10, kTrainSize, kValSize, kTestSize, 1);
  Generator gen(0);
  nn::EncoderConfig c;
  c.attention.d_model = 32;
  c.attention.heads = 4;
  c.layers = 2;
  c.ffn_hidden = 64;
  c.dropout = 0.1;
  nn::Encoder model(c, &gen);
  model.to(device);  // before the optimizer takes the parameters
  optim::AdamOptions ao;
  ao.lr = 5e-3;  // reaches about 55% token accuracy in the 128 steps
  optim::Adam opt(model.named_parameters(), ao);
  loops::TrainOptions o;
  o.epochs = 2;
  o.batch_size = 64;
  o.eval_batch_size = 128;
  o.clip = 5;
  o.log_every = 1000;
  o.shuffle_seed = 4;
  o.label = "encoder " + device.str();
  const int64_t steps = o.epochs * kTrainSize / o.batch_size;
  optim::CosineWarmup schedule(ao.lr, 2, steps);
  auto on = [&](const data::SequenceData& d) { return data::LabelledData{d.inputs.to(device), d.targets.to(device)}; };
  auto forward = [&](const Tensor& ids) { return model.forward(ids); };
  return loops::fit(model, forward, opt, schedule, on(splits.train), on(splits.val), on(splits.test), o);
}

void check_encoder_parity(const Device& device) {
  const loops::TrainResult cpu = fit_encoder(kCPU);
  const loops::TrainResult cuda = fit_encoder(device);
  REQUIRE(cpu.epochs.size() == 2);
  REQUIRE(cuda.epochs.size() == cpu.epochs.size());
  CHECK(cuda.steps == cpu.steps);
  // Accuracies count argmax hits: a near-tie may flip on either device, so allow two tokens.
  const double val_slack = 2.0 / double(kValSize * kSeqLen) + 1e-12,
               test_slack = 2.0 / double(kTestSize * kSeqLen) + 1e-12;
  double worst = 0;
  for (size_t i = 0; i < cpu.epochs.size(); ++i) {
    const loops::EpochRecord &a = cpu.epochs[i], &b = cuda.epochs[i];
    const int64_t epoch = a.epoch;
    CAPTURE(epoch);
    check_close("training loss of epoch " + std::to_string(epoch), a.train_loss, b.train_loss, worst);
    check_close("validation loss of epoch " + std::to_string(epoch), a.val_loss, b.val_loss, worst);
    CHECK_MESSAGE(std::abs(a.val_accuracy - b.val_accuracy) <= val_slack, "validation accuracy of epoch ", epoch,
                  ": cpu ", a.val_accuracy, " vs cuda:0 ", b.val_accuracy);
  }
  CHECK(cuda.best_epoch == cpu.best_epoch);
  check_close("test loss", cpu.test_loss, cuda.test_loss, worst);
  CHECK_MESSAGE(std::abs(cpu.test_accuracy - cuda.test_accuracy) <= test_slack, "test accuracy: cpu ",
                cpu.test_accuracy, " vs cuda:0 ", cuda.test_accuracy);
  CHECK(cpu.epochs.back().train_loss < cpu.epochs.front().train_loss);  // it learns
  report_worst("synthetic encoder, 2 epochs: epoch and test losses", worst);
}

// ---- a ViT on MNIST-shaped data ----------------------------------------------------------------

// The losses of 5 AdamW steps of a seeded ViT (dropout on) on one fixed random batch, then its
// eval-mode loss.
std::vector<double> vit_losses(const Device& device) {
  Generator gen(9);
  nn::ViTConfig c;  // 28x28x1 images, 7x7 patches, 10 classes
  c.attention.d_model = 32;
  c.attention.heads = 4;
  c.layers = 2;
  c.dropout = 0.1;
  nn::ViT model(c, &gen);
  model.to(device);
  optim::AdamW opt(model.named_parameters(), {1e-3, 0.9, 0.999, 1e-8, 0.01});
  Generator data_gen(10);
  const Tensor images = rand({32, 1, 28, 28}, {}, &data_gen).to(device);
  const Tensor labels = cast(uniform({32}, 0, 10, DType::f64, &data_gen), DType::i64).to(device);
  std::vector<double> losses;
  model.train();
  for (int step = 0; step < 5; ++step) {
    opt.zero_grad();
    Tensor loss = cross_entropy(model.forward(images), labels);
    loss.backward();
    opt.step();
    losses.push_back(loss.item<double>());
  }
  model.eval();
  NoGradGuard no_grad;
  losses.push_back(cross_entropy(model.forward(images), labels).item<double>());
  return losses;
}

void check_vit_parity(const Device& device) {
  const std::vector<double> cpu = vit_losses(kCPU), cuda = vit_losses(device);
  REQUIRE(cuda.size() == cpu.size());
  double worst = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    CAPTURE(i);
    check_close(i + 1 < cpu.size() ? "training loss of step " + std::to_string(i + 1) : "eval loss after 5 steps",
                cpu[i], cuda[i], worst);
  }
  report_worst("ViT on MNIST-shaped data, 5 steps: losses", worst);
}

}  // namespace

TEST_CASE("gpu parity: a tiny GPT trains 20 steps on cuda:0 as on the CPU") {
  if (!have_gpu()) return;
  check_gpt_parity(gpu());
}

TEST_CASE("gpu parity: a tiny Llama trains 20 steps on cuda:0 as on the CPU") {
  if (!have_gpu()) return;
  check_gpt_parity(gpu(), /*llama=*/true);
}

TEST_CASE("gpu parity: ResNet34 features on cuda:0 match the CPU") {
  if (!have_gpu()) return;
  check_resnet_parity(gpu());
}

TEST_CASE("gpu parity: the synthetic encoder trains on cuda:0 as on the CPU") {
  if (!have_gpu()) return;
  check_encoder_parity(gpu());
}

TEST_CASE("gpu parity: a ViT trains on MNIST-shaped data on cuda:0 as on the CPU") {
  if (!have_gpu()) return;
  check_vit_parity(gpu());
}

#ifdef QKV_HAVE_CUDA
// A CUDA graph (tensor/cuda/graph.h) of a few ops: replays give eager's result, follow new values
// written into the step's input between replays, and a host read inside the step is refused.
TEST_CASE("cuda graph: a captured step replays to the eager result for each new input") {
  if (!have_gpu()) return;
  Generator gen(5);
  const Tensor w = randn({64, 64}, gpu(), &gen), lnw = randn({64}, gpu(), &gen);
  Tensor x = randn({8, 64}, gpu(), &gen);  // the step's input: written in place between replays
  auto step = [&] { return layer_norm(gelu(matmul(x, w)) + x, lnw, Tensor()) * 0.5; };
  NoGradGuard no_grad;
  cuda::CudaGraph graph(0);
  Tensor out;
  graph.capture([&] { out = step(); });
  for (int i = 0; i < 3; ++i) {
    if (i > 0) x.copy_(randn({8, 64}, kCPU, &gen));
    graph.replay();
    const std::vector<float> got = out.cpu().to_vector<float>(), want = step().cpu().to_vector<float>();
    REQUIRE(got.size() == want.size());
    for (size_t j = 0; j < got.size(); ++j) REQUIRE(got[j] == want[j]);  // the same kernels on the same data
  }
  CHECK_THROWS_WITH_AS(graph.capture([&] { (void)matmul(x, w).cpu(); }),
                       doctest::Contains("a device-to-host read while a CUDA graph captures"), DeviceError);
  graph.capture([&] { out = step(); });  // a failed capture leaves the graph usable
  graph.replay();
  CHECK(out.cpu().to_vector<float>() == step().cpu().to_vector<float>());
}

// Decoding through the static step replayed as a CUDA graph (lab/infer/static_decoder.h) against
// forward_cached, on cuda:0: the split-KV kernel reads the position on the device and is
// planned for the whole cache, so its splits differ from the eager call's: equal to 1e-4 of the
// logits' scale, not bit for bit.
TEST_CASE("cuda graph: a GPT decodes through its replayed step as through forward_cached") {
  if (!have_gpu()) return;
  struct Case {
    nn::Sharing sharing;
    DType cache_dtype;
    int64_t v_rank = 0;
    bool linear = false;
    int64_t capacity = 0;  // 0: the context
    bool llama = false;    // the Llama block: K=V keys turned as read
  };
  // Float caches, an int8 cache, the low-rank V residual's [K | X A] rows, linear attention's
  // state, and caches shorter than the split-KV kernel's eager minimum (128 keys).
  for (const Case& k :
       {Case{nn::Sharing::q_kv, DType::f32}, Case{nn::Sharing::qkv, DType::bf16}, Case{nn::Sharing::q_kv, DType::i8},
        Case{nn::Sharing::q_kv, DType::bf16, 16}, Case{nn::Sharing::all, DType::f32, 0, true},
        Case{nn::Sharing::qk_v, DType::f32, 0, false, 60}, Case{nn::Sharing::q_kv, DType::i8, 0, false, 60},
        Case{nn::Sharing::q_kv, DType::f32, 0, false, 0, true}, Case{nn::Sharing::all, DType::i8, 0, false, 0, true},
        Case{nn::Sharing::q_kv, DType::bf16, 0, false, 60, true}}) {
    const auto [sharing, cache_dtype, v_rank, linear, capacity, llama] = k;
    nn::GPTConfig c;
    c.vocab = 97;
    c.context = 256;
    c.layers = 2;
    c.dropout = 0;
    c.attention.d_model = 128;
    c.attention.heads = 2;  // head dim 64
    c.attention.sharing = sharing;
    c.attention.v_rank = v_rank;
    c.attention.linear = linear;
    if (llama) c = nn::llama_block(c);
    Generator gen(9);
    nn::GPT model(c, &gen);
    model.to(gpu());
    model.eval();
    NoGradGuard no_grad;
    // Past 128 keys the eager step splits over the keys too; below, it reads the position on the
    // host, which the captured step cannot.
    const int64_t batch = 2, prompt = capacity ? capacity - 20 : 140;
    const Tensor ids = cast(uniform({batch, prompt}, 0, 97, DType::f64, &gen), DType::i64).to(gpu());
    nn::KVCache eager = model.make_cache(batch, capacity, cache_dtype),
                fixed = model.make_cache(batch, capacity, cache_dtype);
    auto greedy = [](const Tensor& logits) { return argmax(logits.narrow(1, logits.size(1) - 1, 1), -1); };
    Tensor next = greedy(model.forward_cached(ids, eager));
    model.forward_cached(ids, fixed);
    infer::StaticDecoder decoder(model, fixed);
    double worst = 0;
    for (int64_t i = 0; i < 20; ++i) {
      const Tensor want = model.forward_cached(next, eager).cpu(), got = decoder.step(next, prompt + i).cpu();
      CHECK(decoder.graphed());
      const std::vector<float> w = want.to_vector<float>(), g = got.to_vector<float>();
      double scale = 0, diff = 0;
      for (size_t j = 0; j < w.size(); ++j) {
        scale = std::max(scale, double(std::abs(w[j])));
        diff = std::max(diff, double(std::abs(w[j] - g[j])));
      }
      REQUIRE(diff <= 1e-4 * scale);
      worst = std::max(worst, diff / scale);
      next = greedy(want.to(gpu()));
    }
    MESSAGE(cat("graph decode, ", llama ? "Llama " : "", nn::variant_name({sharing, 0, false, v_rank, linear}), ", ",
                dtype_name(cache_dtype), " cache of ", capacity ? capacity : c.context,
                " positions: largest relative difference of the logits, replayed vs forward_cached ", worst));
  }
}
#endif
