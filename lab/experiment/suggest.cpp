// Edit distance (optimal string alignment) and the closest-key search behind "did you mean".
#include "lab/experiment/suggest.h"

#include <algorithm>

namespace qkv::experiment {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[n][m];
}

namespace {

std::string_view last_component(std::string_view key) {
  const size_t dot = key.rfind('.');
  return dot == std::string_view::npos ? key : key.substr(dot + 1);
}

}  // namespace

std::string closest_key(std::string_view key, const std::vector<std::string>& candidates) {
  const std::string_view last = last_component(key);
  // A typo of the whole key, or the right last name under another section (one extra step).
  // Scores are doubled so that a tie goes to the section move: "lr" is optim.lr, not lm.
  const size_t limit = 2 * (1 + last.size() / 4);
  size_t best_score = limit + 1;
  std::string best;
  for (const std::string& c : candidates) {
    const size_t score = std::min(2 * edit_distance(key, c), 2 * edit_distance(last, last_component(c)) + 1);
    if (score < best_score) {
      best_score = score;
      best = c;
    }
  }
  return best;
}

}  // namespace qkv::experiment
