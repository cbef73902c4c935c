// Gradient clipping (train/optim/): clip_grad_norm, torch.nn.utils.clip_grad_norm_ with the
// L2 norm, run by the clip_grad_norm op (autograd/ops.h) once per device the grads are on.
#pragma once
#include "train/optim/optimizer.h"

namespace qkv::optim {

// The L2 norm of all defined grads of `params` taken together (accumulated in double). When
// max_norm / (norm + 1e-6) < 1, every grad is scaled in place by that factor. Returns the norm
// before clipping as a 0-dim float64 tensor on the grads' device (read it when it is needed: on
// a GPU the read waits for the device); a non-finite norm scales nothing, so the caller can skip
// the step. max_norm must be > 0 (+inf only measures). Parameters without grad are ignored.
// unscale (a power of two, f16 training's 1 / loss scale) multiplies every grad in the same pass,
// before the norm is taken: the norm returned and the clipping are those of the unscaled grads.
Tensor clip_grad_norm(const NamedTensors& params, double max_norm, double unscale = 1);

}  // namespace qkv::optim
