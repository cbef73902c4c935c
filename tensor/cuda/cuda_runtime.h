// The tensor layer's CUDA side, callable from plain C++: device memory, transfers, the strided
// copy/cast and fill that Tensor::copy_, contiguous() and to() need on a GPU, synchronisation
// with error checks, and the debugging switches. Defined in tensor/cuda/*.cu and *.cpp; only
// linked when QKV_HAVE_CUDA.
//
// One stream: every kernel, copy and cuBLASLt call of qkvlab runs on the device's legacy
// default stream (tensor/cuda/stream.h: current_stream()), so work on a device runs in the order
// it was issued. That is what lets the caching allocator hand a freed block to the next kernel at
// once, and the pinned staging buffers of host-to-device copies are reused only after an event
// says their copy is done. The exception is a CUDA graph's capture (tensor/cuda/graph.h), whose
// work is recorded on the graph's stream and replayed on the legacy one.
#pragma once
#include <cstddef>

namespace qkv {
class Tensor;
}

namespace qkv::cuda {

// Creates the device's context once; a busy or unavailable device is a DeviceError naming `what`.
void open_device(int device, const char* what);

// Host -> device without stalling the host: the bytes are staged in pinned memory and the
// transfer is queued on the device's stream (tensor/cuda/pinned_staging.cpp).
void copy_h2d_async(void* dst, const void* src, size_t bytes, int device);
// Device -> host: waits for the device (a synchronisation point: counted, and device-side
// errors are raised here).
void memcpy_d2h(void* dst, const void* src, size_t bytes, int device);
void memcpy_d2d(void* dst, int dst_device, const void* src, int src_device, size_t bytes);
// dst and src on the same CUDA device; src broadcasts to dst's shape; dtypes may differ.
void strided_copy(const Tensor& dst, const Tensor& src);
void fill(const Tensor& t, double value);
// Waits for the device, then reports what went wrong there: an error recorded by a kernel
// (IndexError) or a CUDA error (DeviceError). `after` names the op just run, when known.
void synchronize(int device, const char* after = nullptr);
// QKV_CUDA_SYNC=1: synchronize and check after every op, so a failure names its op.
bool sync_after_each_op();
// Pinned staging memory held for host-to-device copies, returned by empty_cache.
void release_pinned_staging();

// CUDA events for timing ops (QKV_PROFILE): an opaque handle recorded on the device's stream.
void* record_event(int device);
float elapsed_ms(void* start, void* stop);  // waits for `stop`
void destroy_event(void* event);

}  // namespace qkv::cuda
