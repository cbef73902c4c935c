// Backward rules: formulas that turn output gradients into input gradients, written with the
// differentiable ops of autograd/ops.h (PyTorch's derivatives.yaml idea: a rule is a formula,
// not a new kernel). Where a formula would cost several passes, the rule calls a dedicated
// backward op instead (gelu_backward, layer_norm_backward, cross_entropy_backward,
// conv2d_backward), which is a row of its own in the op table.
#pragma once
#include <span>
#include <vector>

#include "kernels/attrs.h"

namespace qkv::autograd {

struct TensorMeta;
class PendingGrads;

struct BackwardArgs {
  const char* op;
  std::span<const Tensor> inputs;          // saved inputs (undefined unless the row saves them)
  std::span<const Tensor> outputs;         // saved outputs (likewise)
  std::span<const TensorMeta> input_meta;  // shape / dtype / device of every input
  // One per output. Where no gradient arrived: zeros for the first output, undefined for the
  // others (a layer norm's mean, attention's lse, the residual sum of a post-norm block), which
  // no rule reads without checking grad_arrived: filling them would cost a pass each.
  std::span<const Tensor> grads;
  const Attrs& attrs;
  std::span<const bool> needs_grad;       // per input
  std::span<const bool> grad_arrived;     // per output
  const PendingGrads* pending = nullptr;  // the sums already waiting for each input (node.h)
};

// Returns one gradient per input (undefined where none is needed).
using BackwardRule = std::vector<Tensor> (*)(const BackwardArgs&);
inline constexpr BackwardRule kNotDifferentiable = nullptr;

namespace grad {

std::vector<Tensor> add(const BackwardArgs&);
std::vector<Tensor> sub(const BackwardArgs&);
std::vector<Tensor> mul(const BackwardArgs&);
std::vector<Tensor> div(const BackwardArgs&);
std::vector<Tensor> neg(const BackwardArgs&);
std::vector<Tensor> abs(const BackwardArgs&);
std::vector<Tensor> exp(const BackwardArgs&);
std::vector<Tensor> log(const BackwardArgs&);
std::vector<Tensor> sqrt(const BackwardArgs&);
std::vector<Tensor> rsqrt(const BackwardArgs&);
std::vector<Tensor> pow(const BackwardArgs&);
std::vector<Tensor> tanh(const BackwardArgs&);
std::vector<Tensor> sigmoid(const BackwardArgs&);
std::vector<Tensor> relu(const BackwardArgs&);
std::vector<Tensor> gelu(const BackwardArgs&);
std::vector<Tensor> swiglu(const BackwardArgs&);
std::vector<Tensor> rope(const BackwardArgs&);
std::vector<Tensor> sum(const BackwardArgs&);
std::vector<Tensor> mean(const BackwardArgs&);
std::vector<Tensor> amax(const BackwardArgs&);
std::vector<Tensor> max(const BackwardArgs&);
std::vector<Tensor> matmul(const BackwardArgs&);
std::vector<Tensor> softmax(const BackwardArgs&);
std::vector<Tensor> log_softmax(const BackwardArgs&);
std::vector<Tensor> linear(const BackwardArgs&);
std::vector<Tensor> layer_norm(const BackwardArgs&);
std::vector<Tensor> dropout_add_layer_norm(const BackwardArgs&);
std::vector<Tensor> rms_norm(const BackwardArgs&);
std::vector<Tensor> dropout_add_rms_norm(const BackwardArgs&);
std::vector<Tensor> embedding(const BackwardArgs&);
std::vector<Tensor> cross_entropy(const BackwardArgs&);
std::vector<Tensor> dropout(const BackwardArgs&);
std::vector<Tensor> relu_dropout(const BackwardArgs&);
std::vector<Tensor> attention(const BackwardArgs&);
std::vector<Tensor> conv2d(const BackwardArgs&);
std::vector<Tensor> batch_norm(const BackwardArgs&);
std::vector<Tensor> max_pool2d(const BackwardArgs&);
std::vector<Tensor> adaptive_avg_pool2d(const BackwardArgs&);
std::vector<Tensor> concat(const BackwardArgs&);
std::vector<Tensor> index_select(const BackwardArgs&);
std::vector<Tensor> index_add(const BackwardArgs&);
std::vector<Tensor> gather(const BackwardArgs&);
std::vector<Tensor> scatter_add(const BackwardArgs&);
std::vector<Tensor> masked_fill(const BackwardArgs&);
std::vector<Tensor> where(const BackwardArgs&);
std::vector<Tensor> cast(const BackwardArgs&);
std::vector<Tensor> copy(const BackwardArgs&);

}  // namespace grad
}  // namespace qkv::autograd
