// Devices: "cpu" and "cuda:N". The CUDA runtime is queried only when a CUDA device is used.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>

namespace qkv {

enum class DeviceType : uint8_t { cpu, cuda };

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;

  constexpr Device() = default;
  constexpr Device(DeviceType t, int i = 0) : type(t), index(i) {}
  Device(std::string_view spec);  // "cpu", "cuda", "cuda:1"
  Device(const char* spec) : Device(std::string_view(spec)) {}

  bool is_cpu() const { return type == DeviceType::cpu; }
  bool is_cuda() const { return type == DeviceType::cuda; }
  std::string str() const;
  friend bool operator==(const Device&, const Device&) = default;
};
std::ostream& operator<<(std::ostream& os, const Device& d);

inline constexpr Device kCPU{DeviceType::cpu, 0};

// Whether this build has the CUDA backend, and how many devices the runtime sees (0 without one).
bool cuda_compiled();
int cuda_device_count();
bool cuda_available();  // compiled and at least one device visible
// The device's product name ("NVIDIA H200"); "cpu" for the CPU.
std::string device_name(const Device& d);
// Throws DeviceError naming `what` when `d` is a CUDA device this process cannot use: a build
// without CUDA, an index beyond the visible devices, or a device that is busy (exclusive
// compute mode held by another process) or otherwise unavailable.
void check_device_usable(const Device& d, const char* what);

// Host synchronisation points: every read of tensor values by the host (item, to_vector, a
// copy to the CPU) and every explicit device synchronisation. On a GPU each one stalls the host
// until the device has caught up; a training step is allowed one. They are counted on the CPU
// too, so tests there hold the training loops to that budget.
uint64_t host_sync_count();
void count_host_sync();

}  // namespace qkv
