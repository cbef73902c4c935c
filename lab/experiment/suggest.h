// "Did you mean ...?": the closest valid key to a misspelled one.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace qkv::experiment {

// Edit distance counting insertions, deletions, substitutions and swaps of adjacent characters.
std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `key` (dotted keys: a right name in the wrong section also matches,
// "lr" -> "optim.lr"), or "" when none is close enough to be a plausible typo.
std::string closest_key(std::string_view key, const std::vector<std::string>& candidates);

}  // namespace qkv::experiment
