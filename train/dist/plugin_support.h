// What both communication plugins share: the wording of their error lines and the error buffer
// of plugin_abi.h. Header-only and free of qkvlab types, since the plugins link no qkvlab library.
#pragma once
#include <algorithm>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>

#include "train/dist/plugin_abi.h"

namespace qkv::dist::plugin {

// text("rank ", 1, ": ", what): the plugins' qkv::cat (they link no qkvlab library).
template <class... Parts> std::string text(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return os.str();
}

// 2 -> "2", 2.5 -> "2.5": the timeout as the user wrote it.
inline std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

// The watchdog's line, without the "qkvlab: rank R (host H): " that abort adds.
inline std::string timeout_message(const std::string& what, double timeout_seconds) {
  return text(what, " did not finish within ", seconds_text(timeout_seconds),
              " s: another rank died, stalled or never reached it (qkvlab run --dist-timeout)");
}

// This machine's name, read once: a job's lines say where each rank ran.
inline const std::string& host_name() {
  static const std::string name = [] {
    char buf[256] = {};
    return ::gethostname(buf, sizeof buf - 1) == 0 && buf[0] ? std::string(buf) : std::string("unknown host");
  }();
  return name;
}

inline std::string rank_prefix(int rank) { return text("qkvlab: rank ", rank, " (host ", host_name(), "): "); }

// Prints "qkvlab: rank R (host H): <message>" as one write, so lines of several ranks do not interleave.
inline void print_line(int rank, const std::string& message) {
  std::string line = rank_prefix(rank);
  line += message;
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

// Fills `error` (truncating) and returns the failure status 1.
inline int fail(qkv_dist_error* error, const std::string& text) {
  if (error) {
    const size_t n = std::min(text.size(), sizeof error->text - 1);
    std::memcpy(error->text, text.data(), n);
    error->text[n] = '\0';
  }
  return 1;
}

}  // namespace qkv::dist::plugin
