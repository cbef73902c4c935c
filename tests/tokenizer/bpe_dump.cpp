// bpe_dump: the GPT-2 token ids of a file's bytes as one JSON list on stdout, for the check
// against the Python reference (gpt2_reference.py --compare). With --time, the encode time and
// speed go to stderr.
//
//   bpe_dump --tokenizer DIR FILE [--ordinary] [--time]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "tensor/error.h"
#include "train/data/tokens/bpe.h"

int main(int argc, char** argv) {
  std::string dir, file;
  bool ordinary = false, timed = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--tokenizer") && i + 1 < argc) dir = argv[++i];
    else if (!std::strcmp(argv[i], "--ordinary")) ordinary = true;
    else if (!std::strcmp(argv[i], "--time")) timed = true;
    else file = argv[i];
  }
  if (dir.empty() || file.empty()) {
    std::fprintf(stderr, "usage: bpe_dump --tokenizer DIR FILE [--ordinary] [--time]\n");
    return 2;
  }
  try {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw qkv::IOError(file + ": cannot open");
    std::ostringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    const auto tok = qkv::data::Gpt2Tokenizer::load(dir);
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<int32_t> ids = ordinary ? tok.encode_ordinary(text) : tok.encode(text);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (timed)
      std::fprintf(stderr, "bpe_dump: %zu bytes -> %zu tokens in %.3f s (%.2f MB/s)\n", text.size(), ids.size(), s,
                   double(text.size()) / 1e6 / s);
    std::string out = "[";
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) out += ", ";
      out += std::to_string(ids[i]);
    }
    out += "]\n";
    std::fwrite(out.data(), 1, out.size(), stdout);
  } catch (const qkv::Error& e) {
    std::fprintf(stderr, "bpe_dump: %s\n", e.what());
    return 1;
  }
  return 0;
}
