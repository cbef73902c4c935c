// The communicator the dist_collectives cases share: connected once by dist_main.cpp, since a
// process can start MPI only once.
#pragma once
#include "train/dist/communicator.h"

namespace qkv::test {

dist::Communicator& comm();

}  // namespace qkv::test
