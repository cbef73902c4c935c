#include "train/data/tokens/utf8.h"

namespace qkv::data {

size_t decode_utf8_at(std::string_view text, size_t i, char32_t& cp) {
  const auto c = static_cast<unsigned char>(text[i]);
  size_t len = 0;
  if (c < 0x80) {
    cp = c;
    return 1;
  }
  if ((c & 0xE0) == 0xC0) {
    len = 2;
    cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3;
    cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    len = 4;
    cp = c & 0x07;
  } else return 0;
  if (i + len > text.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    const auto d = static_cast<unsigned char>(text[i + k]);
    if ((d & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (d & 0x3F);
  }
  static constexpr char32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};  // shortest form per length
  if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000)) return 0;
  return len;
}

bool decode_utf8(std::string_view text, std::u32string& out) {
  out.clear();
  for (size_t i = 0; i < text.size();) {
    char32_t cp = 0;
    const size_t len = decode_utf8_at(text, i, cp);
    if (len == 0) return false;
    out.push_back(cp);
    i += len;
  }
  return true;
}

}  // namespace qkv::data
