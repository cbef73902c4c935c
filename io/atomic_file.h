// Atomic file writes: data goes to a temporary file beside the target, is flushed to disk, and
// replaces the target with rename(2). A crash leaves either the old file or the new one, plus
// perhaps the temporary file, which is named so that nothing takes it for the target and the
// next writer of the folder can recognise it and remove it.
#pragma once
#include <filesystem>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

namespace qkv {

// Calls write(stream) on a temporary file, then renames it over `path`. Throws IOError naming
// `path` when the directory is not writable or the write fails; the target is then untouched.
void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write);
// A copy of the file `from` written atomically at `to`; IOError naming `from` when it cannot be read.
void copy_file_atomically(const std::filesystem::path& from, const std::filesystem::path& to);

// The temporary name for `path`: `.<name>.tmp.<pid>.<8 hex digits>` in the same folder. Hidden
// and with a different suffix, so a reader looking for `<name>` never picks it up.
std::filesystem::path temp_file_for(const std::filesystem::path& path);
// Whether `filename` (no folder) is a temporary file of temp_file_for's pattern, or of those
// earlier versions of qkvlab used (`<name>.tmp.<pid>`, `.tokens.<pid>.tmp`).
bool is_temp_file_name(const std::string& filename);
// Removes the temporary files (is_temp_file_name, regular files only) in `dir` (and below, when
// `recursive`) and returns them; those of this process are kept. Only call this while holding the
// folder's lock (folder_lock.h): then no other process is writing them and every one is a leftover.
std::vector<std::filesystem::path> remove_temp_files(const std::filesystem::path& dir, bool recursive);
// Removes the temporary files of `path` (temp_file_for's pattern for that name) left by processes
// that no longer run: a writer killed halfway. Needs no lock, since a live writer's file is kept;
// write_file_atomically calls it, so the next write of a file clears what a killed one left.
void remove_dead_temp_files_for(const std::filesystem::path& path);

}  // namespace qkv
