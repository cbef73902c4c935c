// The recorded graph. Each differentiable op call leaves a Node that knows how to turn the
// gradients of its outputs into gradients of its inputs, and edges to the nodes that produced
// those inputs. Leaves end in an AccumulateGrad node that adds into their .grad.
#pragma once
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace qkv::autograd {

struct Node;

struct Edge {
  std::shared_ptr<Node> node;  // null: this input needs no gradient
  int output_nr = 0;
};

struct TensorMeta {
  Shape shape;
  DType dtype = DType::f32;
  Device device;
  bool defined = false;
  static TensorMeta of(const Tensor& t) {
    if (!t.defined()) return {};
    return {t.shape(), t.dtype(), t.device(), true};
  }
};

// A tensor kept for backward, with the storage version it had when saved: using it after an
// in-place write would give wrong gradients, so unpack() refuses.
class SavedTensor {
 public:
  SavedTensor() = default;
  SavedTensor(const Tensor& t);
  Tensor unpack(const std::string& op) const;
  void reset() { t_ = Tensor(); }
  bool defined() const { return t_.defined(); }

 private:
  Tensor t_;
  uint64_t version_ = 0;
};

// The gradients the engine has summed so far for a node's inputs, while that node's backward
// runs. A rule that can fold its own gradient into the pending sum more cheaply than the engine's
// add (the embedding's scatter into a tied weight's dense output-layer gradient) takes the sum
// and returns sum + its gradient, which the engine then holds in its place.
class PendingGrads {
 public:
  virtual ~PendingGrads() = default;
  // The sum pending for input i, or null when none has arrived yet.
  virtual const Tensor* peek(size_t input) const = 0;
  // Removes and returns that sum (undefined when none).
  virtual Tensor take(size_t input) const = 0;
};

struct Node {
  // Releases the nodes only this one holds without recursion: a graph as long as a 5,000-layer
  // model would otherwise be destroyed one node inside another and overflow the stack.
  virtual ~Node();
  // Gradients of the outputs (undefined where none arrived) -> gradients of the inputs.
  virtual std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs, const PendingGrads& pending) = 0;
  virtual std::string name() const = 0;
  // Drops saved tensors after a backward that did not retain the graph.
  virtual void release_saved() {}

  std::vector<Edge> next;           // one per input
  std::vector<TensorMeta> inputs;   // what each input looked like
  std::vector<TensorMeta> outputs;  // what each output looks like
  bool released = false;
};

// Adds the incoming gradient into a leaf's .grad.
struct AccumulateGrad final : Node {
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> leaf);
  std::vector<Tensor> apply(std::vector<Tensor>&& grads, const PendingGrads&) override;
  std::string name() const override { return "AccumulateGrad"; }
  std::shared_ptr<TensorImpl> leaf;
};

// The edge through which a gradient for `t` flows: its grad_fn, or its leaf accumulator.
Edge gradient_edge(const Tensor& t);
// Makes `t` an output of `node` (sets requires_grad, grad_fn and output_nr).
void set_history(Tensor& t, const std::shared_ptr<Node>& node, int output_nr);
// True when any input requires grad and grad mode is on.
bool any_requires_grad(std::span<const Tensor> inputs);

}  // namespace qkv::autograd
