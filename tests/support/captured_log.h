// A FILE* that collects what a function prints, read back as a string (the studies print their
// progress to a FILE*).
#pragma once
#include <cstdio>
#include <string>

#include "tensor/error.h"

namespace qkv::test {

class CapturedLog {
 public:
  CapturedLog() : f_(std::tmpfile()) { check<IOError>(f_ != nullptr, "tmpfile: cannot create a temporary file"); }
  ~CapturedLog() { std::fclose(f_); }
  CapturedLog(const CapturedLog&) = delete;
  CapturedLog& operator=(const CapturedLog&) = delete;

  std::FILE* file() const { return f_; }
  // Everything written so far.
  std::string text() const {
    std::fflush(f_);
    const long end = std::ftell(f_);
    std::string s(size_t(end), '\0');
    std::rewind(f_);
    const size_t n = std::fread(s.data(), 1, s.size(), f_);
    s.resize(n);
    std::fseek(f_, 0, SEEK_END);
    return s;
  }

 private:
  std::FILE* f_;
};

}  // namespace qkv::test
