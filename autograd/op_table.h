// The op table: one row per primitive op. A row names everything the op is made of, so an op
// with a missing kernel or backward rule does not compile (and one without a test case in
// tests/ops/ does not link). `qkvlab ops` prints this table.
//
// Columns:
//   id        the op's name (OpId::id, "id")
//   in        number of inputs; -g: one or more groups of g inputs (concat's -1: one or more
//             inputs; adam_update's -4: one (param, grad, exp_avg, exp_avg_sq) group per parameter)
//   opt       bit mask of inputs that may be undefined (layer_norm's weight and bias); for a
//             grouped op, of positions within a group
//   writes    bit mask of inputs the kernel updates in place (positions within a group for a
//             grouped op); such an op records no graph and has no backward
//   out       number of outputs (0 only for an op that writes an input)
//   dtypes    the dtypes accepted for input 0 (for ops without inputs: the output dtype)
//   amp       autocast policy (autograd/autocast.h), applied while an AutocastGuard is active:
//             kAmpLow  cast float32 inputs to the low dtype (bf16/f16): the tensor-core ops
//             kAmpF32  cast bf16/f16 inputs to float32: exp, log, reductions, norms, softmax
//             kAmpKeep keep the inputs' dtype; mixed float dtypes are promoted to the widest
//                      (cross-entropy: bf16 logits in, a float32 loss out)
//             kAmpNone never cast (casts, optimizer updates, generators, backward rows whose
//                      inputs mix 16-bit gradients with a float32 lse)
//   lowp      how the kernels take bf16/f16 inputs:
//             kLowWiden  the dispatcher computes in float32 around the kernel (inputs widened,
//                        outputs rounded to the row's output dtype), on every device
//             kLowCuda   the CUDA kernel reads and writes them itself (fp32 accumulation);
//                        the CPU widens
//             kLowNative every kernel takes them itself (data movement; attention, whose CPU
//                        forward reads 16-bit tiles and the CUDA one runs on the tensor cores)
//             kLowGemm   the GEMMs: CUDA takes them itself; the CPU takes bf16 where oneDNN
//                        computes bf16 on AVX512_BF16 (float32 accumulation), and the
//                        dispatcher widens f16, and bf16 elsewhere
//   save      what backward needs kept: inputs, outputs, both or none; save_except leaves out
//             inputs the backward never reads (dropout_add_layer_norm's x and y)
//   shape     shape rule (autograd/shape_rules.h): validates inputs, gives output shapes
//   cpu       CPU kernel (kernels/cpu/) or a device-generic one (kernels/common.h)
//   cuda      CUDA kernel (kernels/cuda/)
//   backward  backward rule (autograd/backward_rules.h), or kNotDifferentiable
#pragma once
#include <span>

#include "autograd/autocast.h"
#include "autograd/backward_rules.h"
#include "autograd/shape_rules.h"
#include "kernels/common.h"
#include "kernels/cpu/cpu_kernels.h"
#ifdef QKV_HAVE_CUDA
#include "kernels/cuda/cuda_kernels.h"
#define QKV_CUDA_KERNEL(name) &::qkv::kernels::cuda::name
#else
#define QKV_CUDA_KERNEL(name) nullptr
#endif

// clang-format off
#define QKV_OPS(X) \
  /*id                      in  opt      writes  out  dtypes       amp       lowp        save          shape                          cpu                          cuda                                     backward */ \
  X(add,                    2,  0,       0,      1,   kAnyNumeric, kAmpKeep, kLowWiden,  kSaveNone,    shape::broadcast,              cpu::add,                    QKV_CUDA_KERNEL(add),                    grad::add) \
  X(sub,                    2,  0,       0,      1,   kAnyNumeric, kAmpKeep, kLowWiden,  kSaveNone,    shape::broadcast,              cpu::sub,                    QKV_CUDA_KERNEL(sub),                    grad::sub) \
  X(mul,                    2,  0,       0,      1,   kAnyNumeric, kAmpKeep, kLowWiden,  kSaveInputs,  shape::broadcast,              cpu::mul,                    QKV_CUDA_KERNEL(mul),                    grad::mul) \
  X(div,                    2,  0,       0,      1,   kAnyFloat,   kAmpKeep, kLowWiden,  kSaveInputs,  shape::broadcast,              cpu::div,                    QKV_CUDA_KERNEL(div),                    grad::div) \
  X(gt,                     2,  0,       0,      1,   kAnyNumeric, kAmpKeep, kLowWiden,  kSaveNone,    shape::compare,                cpu::gt,                     QKV_CUDA_KERNEL(gt),                     kNotDifferentiable) \
  X(eq,                     2,  0,       0,      1,   kAnyNumeric, kAmpKeep, kLowWiden,  kSaveNone,    shape::compare,                cpu::eq,                     QKV_CUDA_KERNEL(eq),                     kNotDifferentiable) \
  X(neg,                    1,  0,       0,      1,   kAnyNumeric, kAmpKeep, kLowWiden,  kSaveNone,    shape::same,                   cpu::neg,                    QKV_CUDA_KERNEL(neg),                    grad::neg) \
  X(abs,                    1,  0,       0,      1,   kAnyNumeric, kAmpKeep, kLowWiden,  kSaveInputs,  shape::same,                   cpu::abs,                    QKV_CUDA_KERNEL(abs),                    grad::abs) \
  X(exp,                    1,  0,       0,      1,   kAnyFloat,   kAmpF32,  kLowWiden,  kSaveOutputs, shape::same,                   cpu::exp,                    QKV_CUDA_KERNEL(exp),                    grad::exp) \
  X(log,                    1,  0,       0,      1,   kAnyFloat,   kAmpF32,  kLowWiden,  kSaveInputs,  shape::same,                   cpu::log,                    QKV_CUDA_KERNEL(log),                    grad::log) \
  X(sqrt,                   1,  0,       0,      1,   kAnyFloat,   kAmpF32,  kLowWiden,  kSaveOutputs, shape::same,                   cpu::sqrt,                   QKV_CUDA_KERNEL(sqrt),                   grad::sqrt) \
  X(rsqrt,                  1,  0,       0,      1,   kAnyFloat,   kAmpF32,  kLowWiden,  kSaveOutputs, shape::same,                   cpu::rsqrt,                  QKV_CUDA_KERNEL(rsqrt),                  grad::rsqrt) \
  X(pow,                    1,  0,       0,      1,   kAnyFloat,   kAmpF32,  kLowWiden,  kSaveInputs,  shape::same,                   cpu::pow,                    QKV_CUDA_KERNEL(pow),                    grad::pow) \
  X(tanh,                   1,  0,       0,      1,   kAnyFloat,   kAmpKeep, kLowWiden,  kSaveOutputs, shape::same,                   cpu::tanh,                   QKV_CUDA_KERNEL(tanh),                   grad::tanh) \
  X(sigmoid,                1,  0,       0,      1,   kAnyFloat,   kAmpKeep, kLowWiden,  kSaveOutputs, shape::same,                   cpu::sigmoid,                QKV_CUDA_KERNEL(sigmoid),                grad::sigmoid) \
  X(relu,                   1,  0,       0,      1,   kAnyFloat,   kAmpKeep, kLowWiden,  kSaveOutputs, shape::same,                   cpu::relu,                   QKV_CUDA_KERNEL(relu),                   grad::relu) \
  X(gelu,                   1,  0,       0,      1,   kAnyFloat,   kAmpKeep, kLowWiden,  kSaveInputs,  shape::same,                   cpu::gelu,                   QKV_CUDA_KERNEL(gelu),                   grad::gelu) \
  X(gelu_backward,          2,  0,       0,      1,   kAnyFloat,   kAmpKeep, kLowWiden,  kSaveNone,    shape::same_pair,              cpu::gelu_backward,          QKV_CUDA_KERNEL(gelu_backward),          kNotDifferentiable) \
  X(relu_backward,          2,  0,       0,      1,   kAnyFloat,   kAmpKeep, kLowWiden,  kSaveNone,    shape::same_pair,              cpu::relu_backward,          QKV_CUDA_KERNEL(relu_backward),          kNotDifferentiable) \
  X(sum,                    1,  0,       0,      1,   kAnyNumeric, kAmpF32,  kLowWiden,  kSaveNone,    shape::reduce,                 cpu::sum,                    QKV_CUDA_KERNEL(sum),                    grad::sum) \
  X(mean,                   1,  0,       0,      1,   kAnyFloat,   kAmpF32,  kLowWiden,  kSaveNone,    shape::reduce,                 cpu::mean,                   QKV_CUDA_KERNEL(mean),                   grad::mean) \
  X(amax,                   1,  0,       0,      1,   kAnyNumeric, kAmpKeep, kLowWiden,  kSaveBoth,    shape::reduce,                 cpu::amax,                   QKV_CUDA_KERNEL(amax),                   grad::amax) \
  X(max,                    1,  0,       0,      2,   kAnyNumeric, kAmpKeep, kLowWiden,  kSaveOutputs, shape::reduce_dim,             cpu::max,                    QKV_CUDA_KERNEL(max),                    grad::max) \
  X(matmul,                 2,  0,       0,      1,   kAnyFloat,   kAmpLow,  kLowGemm  , kSaveInputs,  shape::matmul,                 cpu::matmul,                 QKV_CUDA_KERNEL(matmul),                 grad::matmul) \
  X(linear,                 3,  0b100,   0,      1,   kAnyFloat,   kAmpLow,  kLowGemm  , kSaveInputs,  shape::linear,                 cpu::linear,                 QKV_CUDA_KERNEL(linear),                 grad::linear) \
  X(linear_weight_grad,     2,  0,       0,      2,   kAnyFloat,   kAmpNone, kLowGemm  , kSaveNone,    shape::linear_weight_grad,     cpu::linear_weight_grad,     QKV_CUDA_KERNEL(linear_weight_grad),     kNotDifferentiable) \
  X(matmul_accumulate,      3,  0,       0b1,    0,   kFloat,      kAmpNone, kLowWiden,  kSaveNone,    shape::matmul_accumulate,      cpu::matmul_accumulate,      QKV_CUDA_KERNEL(matmul_accumulate),      kNotDifferentiable) \
  X(softmax,                1,  0,       0,      1,   kAnyFloat,   kAmpF32,  kLowWiden,  kSaveOutputs, shape::same,                   cpu::softmax,                QKV_CUDA_KERNEL(softmax),                grad::softmax) \
  X(log_softmax,            1,  0,       0,      1,   kAnyFloat,   kAmpF32,  kLowWiden,  kSaveOutputs, shape::same,                   cpu::log_softmax,            QKV_CUDA_KERNEL(log_softmax),            grad::log_softmax) \
  X(layer_norm,             3,  0b110,   0,      3,   kAnyFloat,   kAmpF32,  kLowWiden,  kSaveBoth,    shape::layer_norm,             cpu::layer_norm,             QKV_CUDA_KERNEL(layer_norm),             grad::layer_norm) \
  X(layer_norm_backward,    5,  0b100,   0,      3,   kAnyFloat,   kAmpF32,  kLowWiden,  kSaveNone,    shape::layer_norm_backward,    cpu::layer_norm_backward,    QKV_CUDA_KERNEL(layer_norm_backward),    kNotDifferentiable) \
  X(rms_norm,               2,  0b10,    0,      2,   kAnyFloat,   kAmpF32,  kLowWiden,  kSaveBoth,    shape::rms_norm,               cpu::rms_norm,               QKV_CUDA_KERNEL(rms_norm),               grad::rms_norm) \
  X(rms_norm_backward,      4,  0b100,   0,      2,   kAnyFloat,   kAmpF32,  kLowWiden,  kSaveNone,    shape::rms_norm_backward,      cpu::rms_norm_backward,      QKV_CUDA_KERNEL(rms_norm_backward),      kNotDifferentiable) \
  X(dropout_add_layer_norm, 4,  0b1100,  0,      4,   kAnyFloat,   kAmpF32,  kLowWiden,  save_except(kSaveBoth, 0b0011), shape::dropout_add_layer_norm, cpu::dropout_add_layer_norm, QKV_CUDA_KERNEL(dropout_add_layer_norm), grad::dropout_add_layer_norm) \
  X(dropout_add_rms_norm,   3,  0b100,   0,      3,   kAnyFloat,   kAmpF32,  kLowWiden,  save_except(kSaveBoth, 0b011), shape::dropout_add_rms_norm,   cpu::dropout_add_rms_norm,   QKV_CUDA_KERNEL(dropout_add_rms_norm),   grad::dropout_add_rms_norm) \
  X(rope,                   4,  0b1000,  0,      1,   kAnyFloat,   kAmpNone, kLowWiden,  save_except(kSaveInputs, 0b0001), shape::rope,                   cpu::rope,                   QKV_CUDA_KERNEL(rope),                   grad::rope) \
  X(swiglu,                 1,  0,       0,      1,   kAnyFloat,   kAmpKeep, kLowWiden,  kSaveInputs,  shape::swiglu,                 cpu::swiglu,                 QKV_CUDA_KERNEL(swiglu),                 grad::swiglu) \
  X(swiglu_backward,        2,  0,       0,      1,   kAnyFloat,   kAmpKeep, kLowWiden,  kSaveNone,    shape::swiglu_backward,        cpu::swiglu_backward,        QKV_CUDA_KERNEL(swiglu_backward),        kNotDifferentiable) \
  X(embedding,              2,  0,       0,      1,   kAnyFloat,   kAmpKeep, kLowWiden,  kSaveInputs,  shape::embedding,              cpu::embedding,              QKV_CUDA_KERNEL(embedding),              grad::embedding) \
  X(cross_entropy,          2,  0,       0,      2,   kAnyFloat,   kAmpKeep, kLowCuda,   kSaveBoth,    shape::cross_entropy,          cpu::cross_entropy,          QKV_CUDA_KERNEL(cross_entropy),          grad::cross_entropy) \
  X(cross_entropy_backward, 4,  0,       0,      1,   kAnyFloat,   kAmpNone, kLowCuda,   kSaveNone,    shape::cross_entropy_backward, cpu::cross_entropy_backward, QKV_CUDA_KERNEL(cross_entropy_backward), kNotDifferentiable) \
  X(dropout,                1,  0,       0,      1,   kAnyFloat,   kAmpKeep, kLowWiden,  kSaveNone,    shape::same,                   cpu::dropout,                QKV_CUDA_KERNEL(dropout),                grad::dropout) \
  X(relu_dropout,           1,  0,       0,      1,   kAnyFloat,   kAmpKeep, kLowWiden,  kSaveOutputs, shape::same,                   cpu::relu_dropout,           QKV_CUDA_KERNEL(relu_dropout),           grad::relu_dropout) \
  X(attention,              4,  0b1000,  0,      2,   kAnyFloat,   kAmpLow,  kLowNative, kSaveBoth,    shape::attention,              cpu::attention,              QKV_CUDA_KERNEL(attention),              grad::attention) \
  X(attention_backward,     7,  0b10000, 0,      4,   kAnyFloat,   kAmpNone, kLowCuda,   kSaveNone,    shape::attention_backward,     cpu::attention_backward,     QKV_CUDA_KERNEL(attention_backward),     kNotDifferentiable) \
  X(cache_attention,        8,  0b11110000, 0,   2,   kAnyFloat,   kAmpNone, kLowNative, kSaveNone,    shape::cache_attention,        cpu::cache_attention,        QKV_CUDA_KERNEL(cache_attention),        kNotDifferentiable) \
  X(kv_write,               3,  0,       0b001,  0,   kCacheDTypes,kAmpNone, kLowNative, kSaveNone,    shape::kv_write,               cpu::kv_write,               QKV_CUDA_KERNEL(kv_write),               kNotDifferentiable) \
  X(quantize_int8,          1,  0,       0,      2,   kAnyFloat,   kAmpNone, kLowNative, kSaveNone,    shape::quantize_int8,          cpu::quantize_int8,          QKV_CUDA_KERNEL(quantize_int8),               kNotDifferentiable) \
  X(conv2d,                 3,  0b100,   0,      1,   kAnyFloat,   kAmpLow,  kLowWiden,  kSaveInputs,  shape::conv2d,                 cpu::conv2d,                 QKV_CUDA_KERNEL(conv2d),                 grad::conv2d) \
  X(conv2d_backward,        3,  0,       0,      3,   kAnyFloat,   kAmpKeep, kLowWiden,  kSaveNone,    shape::conv2d_backward,        cpu::conv2d_backward,        QKV_CUDA_KERNEL(conv2d_backward),        kNotDifferentiable) \
  X(batch_norm,             5,  0b11000, 0,      1,   kAnyFloat,   kAmpF32,  kLowWiden,  kSaveInputs,  shape::batch_norm,             cpu::batch_norm,             QKV_CUDA_KERNEL(batch_norm),             grad::batch_norm) \
  X(max_pool2d,             1,  0,       0,      2,   kAnyFloat,   kAmpKeep, kLowWiden,  kSaveOutputs, shape::max_pool2d,             cpu::max_pool2d,             QKV_CUDA_KERNEL(max_pool2d),             grad::max_pool2d) \
  X(adaptive_avg_pool2d,    1,  0,       0,      1,   kAnyFloat,   kAmpKeep, kLowWiden,  kSaveNone,    shape::adaptive_avg_pool2d,    cpu::adaptive_avg_pool2d,    QKV_CUDA_KERNEL(adaptive_avg_pool2d),    grad::adaptive_avg_pool2d) \
  X(concat,                 -1, 0,       0,      1,   kAllDTypes,  kAmpKeep, kLowNative, kSaveNone,    shape::concat,                 common::concat,              &common::concat,                         grad::concat) \
  X(index_select,           2,  0,       0,      1,   kAllDTypes,  kAmpKeep, kLowNative, kSaveInputs,  shape::index_select,           cpu::index_select,           QKV_CUDA_KERNEL(index_select),           grad::index_select) \
  X(index_add,              3,  0,       0,      1,   kAnyNumeric, kAmpKeep, kLowWiden,  kSaveInputs,  shape::index_add,              cpu::index_add,              QKV_CUDA_KERNEL(index_add),              grad::index_add) \
  X(index_accumulate,       3,  0,       0b1,    0,   kFloat,      kAmpNone, kLowWiden,  kSaveNone,    shape::index_accumulate,       cpu::index_accumulate,       QKV_CUDA_KERNEL(index_accumulate),       kNotDifferentiable) \
  X(gather,                 2,  0,       0,      1,   kAnyNumeric, kAmpKeep, kLowWiden,  kSaveInputs,  shape::gather,                 cpu::gather,                 QKV_CUDA_KERNEL(gather),                 grad::gather) \
  X(scatter_add,            3,  0,       0,      1,   kAnyNumeric, kAmpKeep, kLowWiden,  kSaveInputs,  shape::scatter_add,            cpu::scatter_add,            QKV_CUDA_KERNEL(scatter_add),            grad::scatter_add) \
  X(masked_fill,            2,  0,       0,      1,   kAnyNumeric, kAmpKeep, kLowWiden,  kSaveInputs,  shape::masked_fill,            cpu::masked_fill,            QKV_CUDA_KERNEL(masked_fill),            grad::masked_fill) \
  X(where,                  3,  0,       0,      1,   kMask,       kAmpKeep, kLowWiden,  kSaveInputs,  shape::where,                  cpu::where,                  QKV_CUDA_KERNEL(where),                  grad::where) \
  X(cast,                   1,  0,       0,      1,   kAllDTypes,  kAmpNone, kLowNative, kSaveNone,    shape::cast,                   common::cast,                &common::cast,                           grad::cast) \
  X(copy,                   1,  0,       0,      1,   kAllDTypes,  kAmpNone, kLowNative, kSaveNone,    shape::same,                   common::copy,                &common::copy,                           grad::copy) \
  X(adam_update,            -4, 0,       0b1101, 0,   kFloat,      kAmpNone, kLowWiden,  kSaveNone,    shape::adam_update,            cpu::adam_update,            QKV_CUDA_KERNEL(adam_update),            kNotDifferentiable) \
  X(sgd_update,             -3, 0b100,   0b101,  0,   kFloat,      kAmpNone, kLowWiden,  kSaveNone,    shape::sgd_update,             cpu::sgd_update,             QKV_CUDA_KERNEL(sgd_update),             kNotDifferentiable) \
  X(clip_grad_norm,         -1, 0,       0b1,    1,   kFloat,      kAmpNone, kLowWiden,  kSaveNone,    shape::clip_grad_norm,         cpu::clip_grad_norm,         QKV_CUDA_KERNEL(clip_grad_norm),         kNotDifferentiable) \
  X(uniform,                0,  0,       0,      1,   kFloat,      kAmpNone, kLowWiden,  kSaveNone,    shape::random,                 cpu::uniform,                QKV_CUDA_KERNEL(uniform),                kNotDifferentiable) \
  X(normal,                 0,  0,       0,      1,   kFloat,      kAmpNone, kLowWiden,  kSaveNone,    shape::random,                 cpu::normal,                 QKV_CUDA_KERNEL(normal),                 kNotDifferentiable) \
  X(bernoulli,              0,  0,       0,      1,   kFloat,      kAmpNone, kLowWiden,  kSaveNone,    shape::random,                 cpu::bernoulli,              QKV_CUDA_KERNEL(bernoulli),              kNotDifferentiable)
// clang-format on

namespace qkv::autograd {

enum class OpId : uint16_t {
#define QKV_OP_ID(id, ...) id,
  QKV_OPS(QKV_OP_ID)
#undef QKV_OP_ID
};

#define QKV_OP_COUNT(...) +1
inline constexpr int kOpCount = 0 QKV_OPS(QKV_OP_COUNT);
#undef QKV_OP_COUNT

// Bits 0-1: save the inputs, the outputs. Bits 4-7: inputs (positions 0-3) that kSaveInputs
// leaves out because the backward never reads them (save_except).
enum SaveMask : uint8_t { kSaveNone = 0, kSaveInputs = 1, kSaveOutputs = 2, kSaveBoth = 3 };
constexpr SaveMask save_except(SaveMask save, unsigned positions) { return SaveMask(save | ((positions & 0xfu) << 4)); }

struct OpInfo {
  OpId id;
  const char* name;
  int arity;          // -g: one or more groups of g inputs
  unsigned optional;  // bit i set: input i (position i of each group) may be undefined
  unsigned writes;    // bit i set: input i (position i of each group) is updated in place
  int outputs;
  DTypeSet dtypes;
  AmpPolicy amp;
  LowPrecision lowp;
  SaveMask save;
  ShapeRule shape;
  kernels::Kernel cpu;
  kernels::Kernel cuda;   // nullptr in a build without CUDA
  BackwardRule backward;  // nullptr: not differentiable

  constexpr int group_size() const { return arity < 0 ? -arity : 0; }  // 0: a fixed arity
  // Input i's position in the row's masks: i itself, or its position within its group.
  constexpr size_t position(size_t i) const { return arity < 0 ? i % size_t(-arity) : i; }
  constexpr bool is_optional(size_t i) const { return position(i) < 32 && ((optional >> position(i)) & 1u); }
  constexpr bool is_written(size_t i) const { return position(i) < 32 && ((writes >> position(i)) & 1u); }
  constexpr bool saves_input(size_t i) const {
    return (save & kSaveInputs) && !(position(i) < 4 && ((save >> (4 + position(i))) & 1u));
  }
};

std::span<const OpInfo> op_table();
const OpInfo& op_info(OpId id);

}  // namespace qkv::autograd
