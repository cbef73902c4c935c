// Compiled by CTest with train/data/'s include root: the data room may not use the loops that
// sit above it, so this include must not compile.
#include "train/data/batches.h"
#include "train/loops/epoch_loop.h"
