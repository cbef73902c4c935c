// The backward pass: walks the recorded graph from one tensor in dependency order, sums the
// gradients that reach each node, and runs the nodes' rules with grad mode off.
#include <unordered_map>

#include "autograd/autocast.h"
#include "autograd/grad_hooks.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "autograd/shape_rules.h"
#include "tensor/view.h"

namespace qkv::autograd {

SavedTensor::SavedTensor(const Tensor& t) {
  if (!t.defined()) return;
  // Keep the data, not the autograd history: saving an output with its grad_fn would make the
  // node own itself.
  t_ = raw::as_strided(t, t.shape(), t.strides(), t.offset());
  version_ = t.storage()->version();
}

Tensor SavedTensor::unpack(const std::string& op) const {
  if (t_.defined() && t_.storage()->version() != version_)
    throw AutogradError(cat("a tensor saved by op '", op,
                            "' for backward was modified in place "
                            "afterwards; its gradient would be wrong (clone it before modifying)"));
  return t_;
}

namespace {
// Nodes whose last owner is a node being destroyed, waiting to be destroyed in turn.
thread_local std::vector<std::shared_ptr<Node>> release_queue;
thread_local bool releasing = false;
}  // namespace

Node::~Node() {
  for (Edge& e : next)
    if (e.node && e.node.use_count() == 1) release_queue.push_back(std::move(e.node));
  if (releasing) return;  // the outermost destructor below destroys them
  releasing = true;
  while (!release_queue.empty()) {
    std::shared_ptr<Node> last = std::move(release_queue.back());
    release_queue.pop_back();
    last.reset();  // its destructor queues its own inputs' nodes
  }
  releasing = false;
}

AccumulateGrad::AccumulateGrad(std::shared_ptr<TensorImpl> l) : leaf(std::move(l)) {}

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor>&& grads, const PendingGrads&) {
  Tensor g = std::move(grads[0]);
  AutogradMeta& m = *leaf->autograd;
  if (!m.grad) {
    // .grad must own its memory: keep g when nothing else can see its storage, else copy it.
    const bool sole_owner = g.impl_ptr().use_count() == 1 && g.storage().use_count() == 1 && g.is_contiguous() &&
                            g.offset() == 0 && g.nbytes() == g.storage()->nbytes();
    m.grad = std::make_shared<Tensor>(sole_owner ? g : copy(g));
  } else {
    Tensor& acc = *m.grad;
    acc = acc + g;
  }
  run_post_accumulate_grad_hook(leaf.get());
  return {};
}

Edge gradient_edge(const Tensor& t) {
  AutogradMeta& m = *t.impl().autograd;
  if (m.grad_fn) return {m.grad_fn, m.output_nr};
  std::shared_ptr<Node> acc = m.grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t.impl_ptr());
    acc->inputs.push_back(TensorMeta::of(t));
    acc->outputs.push_back(TensorMeta::of(t));
    m.grad_accumulator = acc;
  }
  return {acc, 0};
}

void set_history(Tensor& t, const std::shared_ptr<Node>& node, int output_nr) {
  auto& meta = t.impl().autograd;
  if (!meta) meta = std::make_shared<AutogradMeta>();
  meta->requires_grad = true;
  meta->grad_fn = node;
  meta->output_nr = output_nr;
}

bool any_requires_grad(std::span<const Tensor> inputs) {
  if (!grad_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

namespace {

using PendingMap = std::unordered_map<Node*, std::vector<Tensor>>;

// The pending sums of one node's inputs: the slots its edges lead to.
class NodePending final : public PendingGrads {
 public:
  NodePending(PendingMap& pending, const Node& node) : pending_(pending), node_(node) {}
  const Tensor* peek(size_t i) const override {
    Tensor* slot = find(i);
    return slot && slot->defined() ? slot : nullptr;
  }
  Tensor take(size_t i) const override {
    Tensor* slot = find(i);
    return slot ? std::exchange(*slot, Tensor()) : Tensor();
  }

 private:
  Tensor* find(size_t i) const {
    if (i >= node_.next.size() || !node_.next[i].node) return nullptr;
    const auto it = pending_.find(node_.next[i].node.get());
    if (it == pending_.end() || size_t(node_.next[i].output_nr) >= it->second.size()) return nullptr;
    return &it->second[size_t(node_.next[i].output_nr)];
  }
  PendingMap& pending_;
  const Node& node_;
};

}  // namespace

void run_backward(const Tensor& root, const Tensor& root_grad, bool retain_graph) {
  Edge start = gradient_edge(root);
  // Count, for every reachable node, how many edges lead into it.
  std::unordered_map<Node*, int> deps;
  std::vector<Node*> stack{start.node.get()};
  deps[start.node.get()] = 0;
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next) {
      if (!e.node) continue;
      auto [it, fresh] = deps.try_emplace(e.node.get(), 0);
      ++it->second;
      if (fresh) stack.push_back(e.node.get());
    }
  }

  NoGradGuard no_grad;
  AutocastGuard no_autocast(std::nullopt);  // each backward op takes the dtypes its forward made
  PendingMap pending;
  pending[start.node.get()].resize(start.node->outputs.size());
  pending[start.node.get()][size_t(start.output_nr)] = root_grad;
  std::vector<std::shared_ptr<Node>> ready{start.node};
  std::vector<std::shared_ptr<Node>> done;
  while (!ready.empty()) {
    std::shared_ptr<Node> node = ready.back();
    ready.pop_back();
    if (node->released && pending.count(node.get()))
      throw AutogradError(cat("backward reached op '", node->name(),
                              "' whose saved tensors were freed by an "
                              "earlier backward; call backward(grad, /*retain_graph=*/true) the first time"));
    // A node that no gradient reached still releases its inputs' dependency counts.
    std::vector<Tensor> input_grads;
    if (auto it = pending.find(node.get()); it != pending.end()) {
      std::vector<Tensor> grads = std::move(it->second);
      pending.erase(it);
      input_grads = node->apply(std::move(grads), NodePending(pending, *node));
      done.push_back(node);
    }
    for (size_t i = 0; i < node->next.size(); ++i) {
      const Edge& e = node->next[i];
      if (!e.node) continue;
      if (i < input_grads.size() && input_grads[i].defined()) {
        const Tensor& g = input_grads[i];
        const TensorMeta& want = node->inputs[i];
        if (g.shape() != want.shape)
          throw AutogradError(cat("internal: backward of '", node->name(), "' gave input ", i, " a gradient of ",
                                  describe(g), ", expected shape ", shape_str(want.shape)));
        auto& slot = pending[e.node.get()];
        slot.resize(e.node->outputs.size());
        Tensor& acc = slot[size_t(e.output_nr)];
        acc = acc.defined() ? acc + g : g;
      }
      if (--deps[e.node.get()] == 0) ready.push_back(e.node);
    }
  }
  if (!retain_graph)
    for (auto& n : done)
      if (!dynamic_cast<AccumulateGrad*>(n.get())) {
        n->release_saved();
        n->released = true;
      }
}

}  // namespace qkv::autograd
