#include "autograd/op_table.h"

#include <type_traits>

namespace qkv::autograd {
namespace {

using namespace ::qkv::kernels;

constexpr OpInfo kTable[] = {
#define QKV_OP_ROW(id, in, opt, out, dtypes, save, shape_rule, cpu_kernel, cuda_kernel, backward_rule) \
  OpInfo{OpId::id, #id, in, opt, out, dtypes, save, &shape_rule, &cpu_kernel, cuda_kernel, backward_rule},
    QKV_OPS(QKV_OP_ROW)
#undef QKV_OP_ROW
};

constexpr bool rows_are_in_id_order() {
  for (int i = 0; i < kOpCount; ++i)
    if (int(kTable[i].id) != i) return false;
  return true;
}
constexpr bool rows_are_well_formed() {
  for (const OpInfo& r : kTable)
    if (r.outputs < 1 || r.arity < -1) return false;
  return true;
}

// Checked on the column's type, so writing nullptr where a function belongs does not compile.
#define QKV_OP_CHECK(id, in, opt, out, dtypes, save, shape_rule, cpu_kernel, cuda_kernel, backward_rule)  \
  static_assert(std::is_function_v<decltype(shape_rule)>, "op " #id ": the shape column must name a shape rule"); \
  static_assert(std::is_function_v<decltype(cpu_kernel)>, "op " #id ": the cpu column must name a CPU kernel");
QKV_OPS(QKV_OP_CHECK)
#undef QKV_OP_CHECK

static_assert(std::size(kTable) == size_t(kOpCount), "one OpInfo per QKV_OPS row");
static_assert(rows_are_in_id_order(), "kTable must be indexable by OpId");
static_assert(rows_are_well_formed(), "every op needs at least one output and an arity of -1 or more");

}  // namespace

std::span<const OpInfo> op_table() { return kTable; }
const OpInfo& op_info(OpId id) { return kTable[size_t(id)]; }

}  // namespace qkv::autograd
