// ConfigError, the error every experiment-configuration failure throws, and Source, where a
// configuration value came from (a file position or a command-line override), so that each
// message can start with it.
#pragma once
#include <string>
#include <utility>

#include "tensor/error.h"

namespace qkv::experiment {

struct ConfigError : ValueError {
  using ValueError::ValueError;
};

// A file and a 1-based line and column (0 when unknown), or a description of where a value came
// from that is not a file ("command-line override 'model.d_model=128'").
struct Source {
  std::string origin;
  int line = 0;
  int column = 0;

  // "experiments/synthetic/reverse.yaml:12:5", or just the origin when the line is unknown.
  std::string str() const {
    if (line <= 0) return origin.empty() ? std::string("<unknown>") : origin;
    return cat(origin, ":", line, ":", column);
  }
};

// Throws ConfigError("<source>: <message...>").
template <class... Args> [[noreturn]] void fail_at(const Source& where, Args&&... args) {
  throw ConfigError(cat(where.str(), ": ", std::forward<Args>(args)...));
}

}  // namespace qkv::experiment
