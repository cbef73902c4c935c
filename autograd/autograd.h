// qkvlab's autograd layer (autograd/): the op table (op_table.h) and its single entry point
// (dispatch.h), the differentiable ops users call (ops.h), the recorded graph and the backward
// engine (node.h, engine.cpp), no_grad (grad_mode.h), differentiable views (views.h) and
// gradient checking (gradcheck.h). Include this header for the whole engine API.
#pragma once
#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "tensor/tensor.h"
