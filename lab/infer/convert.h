// Converting a trained GPT whose K and V have projections of their own (QKV, GQA-g, MQA) into
// its K=V form (Q-K=V, Q-GQA-g, Q-MQA): one shared projection W_kv per layer over the same KV
// heads, every other weight carried over. The methods (experiment::ConvertMethod):
//   copy-k   W_kv = W_k, b_kv = b_k: the keys stay, the values become the keys
//   average  W_kv = (W_k + W_v) / 2, and the biases alike
//   svd      data-aware, in closed form: per KV head the shared projection that best serves both
//            roles on calibration activations, the scores weighted by the group's queries and
//            the outputs by W_o, with the per-head maps folded into W_q and W_o (convert.cpp
//            derives it)
// The run folders around it (reading a run, writing a converted one) are in convert_run.h.
#pragma once
#include <Eigen/Core>
#include <memory>
#include <vector>

#include "lab/experiment/families.h"
#include "nn/models/gpt.h"
#include "nn/variant.h"

namespace qkv::infer {

using experiment::ConvertMethod;

// "copy-k, average, svd"
std::string convert_method_names();
// ValueError naming `what` (the flag or key) and listing the methods.
ConvertMethod parse_convert_method(const std::string& name, const std::string& what);

// The K=V form of a model's attention: sharing Q-K=V, its KV heads kept. ValueError naming the
// variant when K and V are not projections of their own (only the QKV row converts).
nn::Variant shared_kv_target(const nn::GPTConfig& source);

// What the data-aware fit reads: per layer, the Gram matrix X~^T X~ of the block's attention
// input (ln1's output, one row per token) with a column of ones appended for the biases,
// (d+1) x (d+1), summed over the calibration tokens, in double.
struct Calibration {
  std::vector<Eigen::MatrixXd> gram;
  int64_t tokens = 0;
  bool empty() const { return gram.empty(); }
};
// Runs `source` in eval mode without grad over token batches ([B, T] int64 each); the model is
// left in eval mode.
Calibration calibrate(nn::GPT& source, const std::vector<Tensor>& batches);

struct Conversion {
  std::unique_ptr<nn::GPT> model;  // on the CPU
  // Per layer, when calibrated: the relative error of what the converted layer's scores and
  // outputs see, sum_h ||(Y_h - Y'_h) D_h||^2 / sum_h ||Y_h D_h||^2 over its KV heads h, with
  // Y_h = [K_h | V_h] the source's keys and values on the calibration tokens, Y'_h the converted
  // model's equivalents (K' A_h, V' C_h) and D_h the weighting of convert.cpp. svd minimises it.
  std::vector<double> layer_error;
  double mean_error() const;  // over the layers; NaN without calibration
};

// `calibration` may be empty for copy-k and average (then no errors are measured); svd needs it
// (ValueError). The source is read, never changed.
Conversion convert_to_shared_kv(const nn::GPT& source, ConvertMethod method, const Calibration& calibration);

}  // namespace qkv::infer
