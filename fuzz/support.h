// What every fuzz target shares: a scratch folder to write the input into (the readers take
// paths), splitting one input into several files, and the rule that decides what a bug is.
//
// A reader given bad bytes must throw qkv::Error (IOError, ValueError, ConfigError, ...). Any
// other exception escaping it is a bug: run_reader prints it and aborts, which libFuzzer (and the
// replay driver) report as a crash. Crashes, sanitizer reports and hangs are bugs on their own.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <typeinfo>
#include <vector>

#include "tensor/error.h"

namespace qkv::fuzz {

// A folder private to this process, removed when it exits normally: under $TMPDIR when set,
// else in /dev/shm when there is one (a memory file system: the fuzzers write a file per input,
// thousands a second), else /tmp. Targets that write fixed file names overwrite them.
const std::filesystem::path& scratch();
// scratch(), emptied first: for targets whose inputs decide which files exist.
const std::filesystem::path& fresh_scratch();

// Writes `bytes` to `path` (creating its folder), replacing what was there.
void write_file(const std::filesystem::path& path, std::string_view bytes);

// The input as text.
inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Cuts the input at NUL bytes into at most `max_parts` parts (the last keeps any further NULs);
// missing parts are empty. Targets that need several files (or a file and arguments) read them
// from one input this way.
std::vector<std::string_view> split_parts(std::string_view input, size_t max_parts);

// Prints the escaped exception (its type demangled) and aborts.
[[noreturn]] void report_escape(const char* mangled_type, const char* what);

// Runs `read`; qkv::Error is the expected outcome of bad input, anything else aborts.
template <class F> void run_reader(F&& read) {
  try {
    read();
  } catch (const qkv::Error&) {
  } catch (const std::exception& e) { report_escape(typeid(e).name(), e.what()); } catch (...) {
    report_escape("a non-std exception", "");
  }
}

}  // namespace qkv::fuzz
