// Two sm_90 synchronisation instructions of warp-specialized kernels, for the emulated device:
//
//   bar.sync id, n / bar.arrive id, n (PTX ISA, "bar, barrier"): named barrier `id` (1 to 15;
//     0 is __syncthreads') completes once n threads (a multiple of 32, at most the block's) have
//     arrived at it; sync waits for that, arrive does not. Every arrival of one use of a barrier
//     must give the same n.
//   setmaxnreg.{inc,dec}.sync.aligned.u32 r (PTX ISA, "setmaxnreg"): the warpgroup's registers
//     per thread become r (24 to 256, a multiple of 8), taken from or given back to the block's
//     register file. A block starts with the most its threads could have under a register cap
//     of one block per multiprocessor (65536 / threads, rounded down to a multiple of 8, at most
//     255), as a kernel compiled with __launch_bounds__(threads, 1) does; dec may not raise and
//     inc may not lower the count, and an inc waits until enough registers are free (a block
//     where none will be is stuck, and named as such).
#pragma once

namespace qkv::cuda_emu {

void named_barrier_sync(int id, int threads);
void named_barrier_arrive(int id, int threads);
void setmaxnreg(bool increase, int registers);

}  // namespace qkv::cuda_emu
