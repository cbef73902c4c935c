// One doctest case per op-table row, generated from the table itself: a row without a
// `case_<op>()` in tests/ops/cases_*.cpp makes this binary fail to link. Run the binary
// directly to see the harness table (one line per op).
#include <doctest/doctest.h>

#include <cstdio>

#include "tests/ops/harness.h"

namespace qkv::test {

#define QKV_DECLARE_CASE(id, ...) OpCase case_##id();
QKV_OPS(QKV_DECLARE_CASE)
#undef QKV_DECLARE_CASE

#define QKV_OP_TEST(id, ...)                                        \
  TEST_CASE("op " #id) {                                            \
    const CaseReport r = run_case(autograd::OpId::id, case_##id()); \
    std::printf("%s\n", r.line(#id).c_str());                       \
  }
QKV_OPS(QKV_OP_TEST)
#undef QKV_OP_TEST

}  // namespace qkv::test
