// Errors thrown on bad user input. Every message names the operation (or file) and what was
// expected, so the user can fix the call without a debugger. Nothing here asserts or aborts.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace qkv {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct ShapeError : Error {
  using Error::Error;
};
struct DTypeError : Error {
  using Error::Error;
};
struct DeviceError : Error {
  using Error::Error;
};
struct IndexError : Error {
  using Error::Error;
};
struct ValueError : Error {
  using Error::Error;
};
struct IOError : Error {
  using Error::Error;
};
struct OutOfMemory : Error {
  using Error::Error;
};
struct AutogradError : Error {
  using Error::Error;
};

// cat("a=", 1, " b=", x) -> "a=1 b=..." using operator<<.
template <class... Args> std::string cat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}

// check<ShapeError>(cond, "matmul: ", ...) throws E with the concatenated message when cond fails.
template <class E = Error, class... Args> void check(bool cond, Args&&... args) {
  if (!cond) throw E(cat(std::forward<Args>(args)...));
}

}  // namespace qkv
