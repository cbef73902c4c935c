// Checking error messages in tests: the message of the exception of type E that a call throws,
// and that a message names every expected part (file, field, expected form).
#pragma once
#include <doctest/doctest.h>

#include <initializer_list>
#include <string>

namespace qkv::test {

template <class E, class F> std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) { return e.what(); }
  return "<no error of the expected type thrown>";
}

inline void check_contains(const std::string& message, std::initializer_list<std::string> parts) {
  for (const std::string& p : parts) CHECK_MESSAGE(message.find(p) != std::string::npos, "'", p, "' not in: ", message);
}

}  // namespace qkv::test
