// Text formatting shared by every layer's console output: durations and integers with
// thousands separators.
#pragma once
#include <cstdint>
#include <string>

namespace qkv {

std::string format_duration(double seconds);  // "1:05:09", "4:31", "0:07"; "?" when unknown
std::string with_commas(int64_t n);           // 305534976 -> "305,534,976"

}  // namespace qkv
