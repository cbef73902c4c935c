#include "kernels/cuda/attention/hopper/backward_params.h"

#include "kernels/cuda/attention/hopper/tensor_maps.h"
#include "tensor/error.h"

namespace qkv::kernels::cuda::hopper {

BackwardParams backward_params(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                               const BackwardArgs& a, int rows_q, int rows_k) {
  check<ValueError>(a.B <= 65535 && a.H <= 65535, "attention_backward: too many batch rows or heads for one launch (",
                    a.B, ", ", a.H, ")");
  BackwardParams p;
  p.q = head_rows_map(q, rows_q);
  p.g = head_rows_map(grad_out, rows_q);
  p.k = head_rows_map(k, rows_k);
  p.kv_shared = a.kv_shared;
  p.v = a.kv_shared ? p.k : head_rows_map(v, rows_k);
  p.lse = a.lse;
  p.delta = a.delta;
  p.bias = a.bias;
  p.H = int(a.H);
  p.Hk = int(a.Hk);
  p.T = a.T;
  p.S = a.S;
  p.group = a.group;
  p.scale = a.scale;
  p.scale_log2 = float(double(a.scale) * 1.4426950408889634);
  p.causal = a.causal;
  return p;
}

}  // namespace qkv::kernels::cuda::hopper
