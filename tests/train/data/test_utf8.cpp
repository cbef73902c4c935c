// Tests of the strict UTF-8 decoder (train/data/tokens/utf8.h) that the tokenizer and the text readers share.
#include <doctest/doctest.h>

#include <string>

#include "train/data/tokens/utf8.h"

using qkv::data::decode_utf8;
using qkv::data::decode_utf8_at;

TEST_CASE("utf8: one to four byte characters decode to their code points") {
  std::u32string out;
  REQUIRE(decode_utf8("a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80", out));  // a é € 😀
  CHECK(out == std::u32string{U'a', U'\u00E9', U'\u20AC', U'\U0001F600'});
  char32_t cp = 0;
  CHECK(decode_utf8_at("x\xE2\x82\xAC", 1, cp) == 3);
  CHECK(cp == U'\u20AC');
  CHECK(decode_utf8("", out));
  CHECK(out.empty());
}

TEST_CASE("utf8: overlong forms, surrogates, out-of-range and cut-off characters are invalid") {
  std::u32string out;
  CHECK_FALSE(decode_utf8("\xC0\xAF", out));              // overlong '/'
  CHECK_FALSE(decode_utf8("\xE0\x80\xAF", out));          // overlong '/', three bytes
  CHECK_FALSE(decode_utf8("\xED\xA0\x80", out));          // U+D800, a surrogate
  CHECK_FALSE(decode_utf8("\xF4\x90\x80\x80", out));      // U+110000
  CHECK_FALSE(decode_utf8("\xE2\x82", out));              // cut off
  CHECK_FALSE(decode_utf8("\x80", out));                  // a lone continuation byte
  CHECK_FALSE(decode_utf8("\xF8\x88\x80\x80\x80", out));  // a five-byte lead
  CHECK_FALSE(decode_utf8("\xC3\x28", out));              // a lead without its continuation
  char32_t cp = 0;
  CHECK(decode_utf8_at("ok\xE2\x82", 2, cp) == 0);
  CHECK(decode_utf8_at("\xF4\x8F\xBF\xBF", 0, cp) == 4);  // U+10FFFF, the last code point
  CHECK(cp == U'\U0010FFFF');
}
