// mbarrier, modelled from the PTX ISA's text ("Parallel Synchronization and Communication
// Instructions: mbarrier"), on 8-byte objects in the block's dynamic shared memory:
//   init(count)          the current phase expects `count` arrivals (1 .. 2^20 - 1), tx-count 0;
//   arrive               one arrival; arrive.expect_tx(n) first adds n to the tx-count;
//   expect_tx(n)         adds n to the tx-count without arriving;
//   complete_tx(n)       (a bulk copy that landed) subtracts n from the tx-count;
//   the current phase completes when its pending arrivals reach 0 and its tx-count is 0: the
//   phase count goes up by one and the next phase expects `count` arrivals again;
//   try_wait.parity(p)   true once the phase of parity p has completed, i.e. once the current
//                        phase's parity is not p (so on a fresh barrier parity 1 is complete);
//                        here it waits (a scheduling point) until it would return true.
// What the model refuses, naming the barrier's shared address: an address that is not 8-byte
// aligned dynamic shared memory, an operation on a barrier never initialized (or invalidated),
// a barrier whose 8 bytes an ordinary store overwrote since init, more arrivals than a phase
// expects, a tx-count outside +-(2^20 - 1), and a bulk copy completing on a barrier whose
// initialization no fence.mbarrier_init or fence.proxy.async has made visible to the async proxy.
#pragma once
#include <cstdint>

namespace qkv::cuda_emu {

void mbarrier_init(uint64_t* bar, uint32_t count);
void mbarrier_inval(uint64_t* bar);
// The state token PTX returns (here the phase count at arrival).
uint64_t mbarrier_arrive(uint64_t* bar);
uint64_t mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes);
void mbarrier_expect_tx(uint64_t* bar, uint32_t bytes);
bool mbarrier_try_wait_parity(uint64_t* bar, uint32_t parity);
// The non-blocking test: whether the phase of that parity has completed.
bool mbarrier_test_wait_parity(uint64_t* bar, uint32_t parity);
// fence.mbarrier_init.release.cluster: the barriers this block initialized so far become
// visible to the async proxy (fence.proxy.async does the same).
void fence_mbarrier_init();

// For the bulk copy model: `bytes` arrived for the barrier at window address `address`.
void mbarrier_complete_tx(uint32_t address, uint32_t bytes);
// Throws unless the barrier at `address` is live and visible to the async proxy.
void require_async_barrier(uint32_t address, const char* what);

}  // namespace qkv::cuda_emu
