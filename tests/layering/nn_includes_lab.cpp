// Compiled by CTest with nn/'s include root (cmake/layers.cmake), which holds only tensor/,
// kernels/, autograd/ and nn/: the include of the application below must not compile.
#include "lab/experiment/config.h"
#include "nn/attention.h"
