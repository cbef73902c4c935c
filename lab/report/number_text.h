// Numbers as the report tables print them.
#pragma once
#include <cstdio>
#include <string>

namespace qkv::report {

// One double through a printf format of one conversion: fmt("%.2f", x), fmt("%+.1f%%", 100 * x).
inline std::string fmt(const char* format, double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, x);
  return buf;
}

// A fraction as a percentage with two decimals: -0.0542 -> "-5.42%".
inline std::string percent_2dp(double x) { return fmt("%.2f%%", 100 * x); }

// A relative change as a signed percentage: 0.053 -> "+5.3%".
inline std::string signed_percent(double x) { return fmt("%+.1f%%", 100 * x); }

}  // namespace qkv::report
