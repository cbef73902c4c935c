// The sm_90 synchronisation and copy instructions the Hopper attention kernels use, as device
// functions (private to kernels/cuda/attention/hopper): mbarrier, the bulk tensor copy (TMA),
// named barriers, setmaxnreg and the proxy fence. Under nvcc each is its PTX instruction; in an
// emulated build (QKV_CUDA_EMU) each calls the emulator's model of the same instruction, which
// its -include provides, so the kernels have one copy whichever device runs them.
//
// QKV_HOPPER_DEVICE is defined where these instructions exist: device code compiled for sm_90a,
// and the emulated device. Elsewhere (nvcc's host pass, an sm_80 pass) the functions are empty:
// kernels compile their bodies only where QKV_HOPPER_DEVICE is defined, so in an sm_80 pass they
// are empty and never launched (dispatch: hopper_attention.h).
#pragma once
#include <cuda.h>

#include <cstdint>

#if defined(QKV_CUDA_EMU) || (defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL))
#define QKV_HOPPER_DEVICE 1
#endif

namespace qkv::kernels::cuda::sm90 {

__device__ __forceinline__ uint32_t smem_address(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }

// ---- mbarrier -----------------------------------------------------------------------------------

__device__ __forceinline__ void barrier_init(uint64_t* bar, uint32_t count) {
#ifdef QKV_CUDA_EMU
  ::qkv::cuda_emu::mbarrier_init(bar, count);
#elif defined(QKV_HOPPER_DEVICE)
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_address(bar)), "r"(count) : "memory");
#endif
}

// Makes the barriers initialized so far visible to the copy engine.
__device__ __forceinline__ void fence_barrier_init() {
#ifdef QKV_CUDA_EMU
  ::qkv::cuda_emu::fence_mbarrier_init();
#elif defined(QKV_HOPPER_DEVICE)
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}

__device__ __forceinline__ void arrive(uint64_t* bar) {
#ifdef QKV_CUDA_EMU
  ::qkv::cuda_emu::mbarrier_arrive(bar);
#elif defined(QKV_HOPPER_DEVICE)
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_address(bar)) : "memory");
#endif
}

// One arrival that also announces `bytes` the copies completing on the barrier will bring.
__device__ __forceinline__ void arrive_expect_bytes(uint64_t* bar, uint32_t bytes) {
#ifdef QKV_CUDA_EMU
  ::qkv::cuda_emu::mbarrier_arrive_expect_tx(bar, bytes);
#elif defined(QKV_HOPPER_DEVICE)
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_address(bar)), "r"(bytes)
               : "memory");
#endif
}

// Waits until the barrier's phase of this parity has completed.
__device__ __forceinline__ void wait(uint64_t* bar, uint32_t parity) {
#ifdef QKV_CUDA_EMU
  ::qkv::cuda_emu::mbarrier_try_wait_parity(bar, parity);
#elif defined(QKV_HOPPER_DEVICE)
  const uint32_t address = smem_address(bar);
  uint32_t done = 0;
  do {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(address), "r"(parity)
                 : "memory");
  } while (!done);
#endif
}

// ---- the bulk tensor copy -----------------------------------------------------------------------

// The box of `map` at (c0, c1, c2, c3) into shared memory at dst (128-byte aligned; 1024 under the
// 128B swizzle), its bytes completed on `bar`. `map` is a __grid_constant__ kernel parameter's.
__device__ __forceinline__ void copy_box_4d(void* dst, const CUtensorMap* map, int c0, int c1, int c2, int c3,
                                            uint64_t* bar) {
#ifdef QKV_CUDA_EMU
  const int32_t coords[4] = {c0, c1, c2, c3};
  ::qkv::cuda_emu::bulk_tensor_load(dst, map, coords, 4, bar);
#elif defined(QKV_HOPPER_DEVICE)
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6}], "
      "[%2];" ::"r"(smem_address(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_address(bar)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
#endif
}

// ---- named barriers, registers, fences ----------------------------------------------------------

// bar.sync / bar.arrive on barrier `id` (1 .. 15) for `threads` threads.
__device__ __forceinline__ void named_sync(int id, int threads) {
#ifdef QKV_CUDA_EMU
  ::qkv::cuda_emu::named_barrier_sync(id, threads);
#elif defined(QKV_HOPPER_DEVICE)
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
#endif
}

template <int kRegisters> __device__ __forceinline__ void registers_up() {
#ifdef QKV_CUDA_EMU
  ::qkv::cuda_emu::setmaxnreg(true, kRegisters);
#elif defined(QKV_HOPPER_DEVICE)
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kRegisters));
#endif
}

template <int kRegisters> __device__ __forceinline__ void registers_down() {
#ifdef QKV_CUDA_EMU
  ::qkv::cuda_emu::setmaxnreg(false, kRegisters);
#elif defined(QKV_HOPPER_DEVICE)
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kRegisters));
#endif
}

// Ordinary stores to shared memory become visible to wgmma and the copy engine.
__device__ __forceinline__ void fence_proxy_async() {
#ifdef QKV_CUDA_EMU
  ::qkv::cuda_emu::publish_generic_writes();
  ::qkv::cuda_emu::fence_mbarrier_init();
#elif defined(QKV_HOPPER_DEVICE)
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

}  // namespace qkv::kernels::cuda::sm90
