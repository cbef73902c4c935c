// Strict UTF-8 decoding, shared by the GPT-2 tokenizer and the text-corpus readers: overlong
// forms, surrogates and code points past U+10FFFF are invalid, as in Python's decoder.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace qkv::data {

// Decodes the character at text[i] into `cp`; its length in bytes, or 0 when the bytes there are
// not valid UTF-8 (or the character is cut off by the end of `text`).
size_t decode_utf8_at(std::string_view text, size_t i, char32_t& cp);

// Decodes all of `text` into code points; false when it is not valid UTF-8.
bool decode_utf8(std::string_view text, std::u32string& out);

}  // namespace qkv::data
