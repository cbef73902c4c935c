// Checks the shape rules share (shape_rules.cpp, shape_rules_decoder.cpp): each throws
// DTypeError or ShapeError naming the op, the input and what was expected.
#pragma once
#include "autograd/shape_rules.h"

namespace qkv::autograd::shape {

void same_dtype(const Tensor& a, const Tensor& b, const char* op);
void index_dtype(const Tensor& t, const char* op, const char* what);  // int32 or int64
void mask_dtype(const Tensor& t, const char* op, const char* what);   // bool or uint8
// A position of the static decode step: one int64, read on the device.
void position_scalar(const Tensor& t, const char* op, const char* what);
// RoPE's cos and sin [positions, R/2], R even and at most the head dim, of one float dtype (the
// kernels read them in the dtype they compute in).
void rope_tables(const Tensor& cos, const Tensor& sin, int64_t head_dim, const char* op);

}  // namespace qkv::autograd::shape
