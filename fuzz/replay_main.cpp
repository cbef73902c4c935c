// The replay driver: a fuzz target linked with this main instead of libFuzzer runs it once on
// every file given, or found under a folder given (recursively, in name order), and reports how
// many it ran. A crash, a sanitizer report or an escaping non-qkv exception fails the run, as it
// would under libFuzzer. A folder that does not exist counts as empty (a target without past
// crashes has no fuzz/regressions/<target>), but replaying nothing at all is an error.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE_OR_FOLDER...\n", argv[0]);
    return 2;
  }
  size_t runs = 0;
  for (int a = 1; a < argc; ++a) {
    const fs::path arg = argv[a];
    std::vector<fs::path> files;
    if (fs::is_directory(arg)) {
      for (const auto& e : fs::recursive_directory_iterator(arg))
        if (e.is_regular_file()) files.push_back(e.path());
      std::sort(files.begin(), files.end());
    } else if (fs::exists(arg)) {
      files.push_back(arg);
    } else {
      std::printf("replay: %s does not exist: nothing to replay there\n", arg.c_str());
    }
    for (const fs::path& f : files) {
      std::ifstream in(f, std::ios::binary);
      const std::vector<char> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
      if (!in.eof() && in.fail()) {
        std::fprintf(stderr, "replay: cannot read %s\n", f.c_str());
        return 1;
      }
      std::printf("replay: %s (%zu bytes)\n", f.c_str(), bytes.size());
      std::fflush(stdout);  // the last line names the input if the target crashes
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
      ++runs;
    }
  }
  if (runs == 0) {
    std::fprintf(stderr, "replay: no inputs found\n");
    return 1;
  }
  std::printf("replay: %zu inputs, no crash\n", runs);
  return 0;
}
