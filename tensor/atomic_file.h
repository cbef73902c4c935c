// Atomic file writes: data goes to a temporary file beside the target, is flushed to disk, and
// replaces the target with rename(2). A crash leaves either the old file or the new one.
#pragma once
#include <functional>
#include <ostream>
#include <string>

namespace qkv {

// Calls write(stream) on a temporary file, then renames it over `path`. Throws IOError naming
// `path` when the directory is not writable or the write fails; the target is then untouched.
void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write);

}  // namespace qkv
