// Guards every reader puts in front of a file a user hands it. A FIFO, a device or a folder given
// where a file is expected would block a read forever or fail obscurely, and a size written in a
// header is only believed once it fits the file: nothing is allocated for a count the file cannot
// hold.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string_view>

namespace qkv {

// The size in bytes of the regular file at `path` (symbolic links followed). IOError naming the
// path and `what` ("a CIFAR batch") when it is missing, unreadable or not a regular file.
uint64_t regular_file_size(const std::filesystem::path& path, std::string_view what);

// IOError unless `path` is a regular file (see regular_file_size).
inline void require_regular_file(const std::filesystem::path& path, std::string_view what) {
  (void)regular_file_size(path, what);
}

// IOError naming `path` when a header announces `needed` bytes (of `what`) but only `available`
// remain in the file.
void check_fits_file(const std::filesystem::path& path, std::string_view what, uint64_t needed, uint64_t available);

}  // namespace qkv
