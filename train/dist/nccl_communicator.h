// The nccl back end's Communicator: CUDA tensors through libqkv_dist_nccl.so on cuda:<local
// rank>; host values, bytes and barriers through its bootstrap.
#pragma once
#include <memory>

#include "train/dist/communicator.h"

namespace qkv::dist {

// `bootstrap`: the mpi Communicator of a job of several ranks, or make_single() for one process
// (NCCL then makes its unique id itself). Loads the plugin, checks the device, sets up NCCL.
std::unique_ptr<Communicator> make_nccl(const Options& options, std::unique_ptr<Communicator> bootstrap);

}  // namespace qkv::dist
