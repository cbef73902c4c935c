#include "io/json_read.h"

#include <fstream>
#include <set>

#include "io/input_file.h"
#include "tensor/error.h"

namespace qkv {

namespace {

using json = nlohmann::json;

// A first SAX pass that builds nothing: it checks the syntax, bounds the nesting and notes the
// first key repeated within one object. (nlohmann's parser callback would do the first two while
// building the tree, but it rescans the parent object at every nested object's end, which is
// quadratic in the width of a safetensors header.)
class SyntaxCheck final : public json::json_sax_t {
 public:
  explicit SyntaxCheck(int max_depth) : max_depth_(max_depth) {}

  bool too_deep = false;
  std::string error;      // the syntax error, if any
  std::string duplicate;  // the first repeated key of the outermost object, if any

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return open(); }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    if (depth_ == 1 && !top_keys_.insert(k).second && duplicate.empty()) duplicate = k;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    error = e.what();
    return false;
  }

 private:
  bool open() {
    too_deep = ++depth_ > max_depth_;
    return !too_deep;
  }
  bool close() {
    --depth_;
    return true;
  }

  int max_depth_, depth_ = 0;
  std::set<std::string> top_keys_;
};

}  // namespace

nlohmann::json parse_json(std::string_view text, const std::string& origin, int max_depth, std::string* duplicate) {
  SyntaxCheck syntax(max_depth);
  json::sax_parse(text, &syntax);
  if (syntax.too_deep) throw IOError(cat(origin, ": JSON values nested deeper than ", max_depth, " levels"));
  if (!syntax.error.empty()) throw IOError(cat(origin, ": malformed JSON: ", syntax.error));
  if (duplicate) *duplicate = syntax.duplicate;
  try {
    return json::parse(text);
  } catch (const json::exception& e) { throw IOError(cat(origin, ": malformed JSON: ", e.what())); }
}

nlohmann::json read_json_file(const std::filesystem::path& path, std::string_view what, uint64_t max_bytes,
                              int max_depth) {
  const uint64_t size = regular_file_size(path, what);
  check<IOError>(size <= max_bytes, path.string(), ": ", size, " bytes is larger than ", what, " can be (at most ",
                 max_bytes, " bytes)");
  std::ifstream in(path, std::ios::binary);
  check<IOError>(bool(in), path.string(), ": cannot open ", what);
  std::string text(size, '\0');
  in.read(text.data(), std::streamsize(size));
  check<IOError>(in.gcount() == std::streamsize(size), path.string(), ": cannot read ", what);
  return parse_json(text, path.string(), max_depth);
}

}  // namespace qkv
