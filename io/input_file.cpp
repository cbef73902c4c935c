#include "io/input_file.h"

#include "tensor/error.h"

namespace qkv {

namespace fs = std::filesystem;

namespace {

const char* kind_of(fs::file_type t) {
  switch (t) {
    case fs::file_type::directory: return "a folder";
    case fs::file_type::fifo: return "a FIFO (named pipe)";
    case fs::file_type::socket: return "a socket";
    case fs::file_type::block: return "a block device";
    case fs::file_type::character: return "a character device";
    default: return "not a regular file";
  }
}

}  // namespace

uint64_t regular_file_size(const fs::path& path, std::string_view what) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (st.type() == fs::file_type::not_found)
    throw IOError(cat(path.string(), ": cannot open ", what, ": missing file"));
  if (ec) throw IOError(cat(path.string(), ": cannot read ", what, ": ", ec.message()));
  if (st.type() != fs::file_type::regular)
    throw IOError(cat(path.string(), ": is ", kind_of(st.type()), ", expected ", what, " (a regular file)"));
  const uint64_t size = fs::file_size(path, ec);
  if (ec) throw IOError(cat(path.string(), ": cannot read the size of ", what, ": ", ec.message()));
  return size;
}

void check_fits_file(const fs::path& path, std::string_view what, uint64_t needed, uint64_t available) {
  check<IOError>(needed <= available, path.string(), ": truncated: the header announces ", needed, " bytes of ", what,
                 " but the file holds only ", available, " more");
}

}  // namespace qkv
