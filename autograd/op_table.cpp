#include "autograd/op_table.h"

#include <type_traits>

namespace qkv::autograd {
namespace {

using namespace ::qkv::kernels;

constexpr OpInfo kTable[] = {
// clang-format off
#define QKV_OP_ROW(id, in, opt, writes, out, dtypes, amp, lowp, save, shape_rule, cpu_kernel, cuda_kernel, \
                   backward_rule)                                                                             \
  OpInfo{OpId::id, #id, in, opt, writes, out, dtypes, amp, lowp, save, &shape_rule, &cpu_kernel, cuda_kernel,  \
         backward_rule},
    // clang-format on
    QKV_OPS(QKV_OP_ROW)
#undef QKV_OP_ROW
};

constexpr bool rows_are_in_id_order() {
  for (int i = 0; i < kOpCount; ++i)
    if (int(kTable[i].id) != i) return false;
  return true;
}
// Masks name only inputs the row has (positions within a group for a grouped op).
constexpr bool masks_fit(const OpInfo& r) {
  const int n = r.arity < 0 ? -r.arity : r.arity;
  const unsigned all = n >= 32 ? ~0u : (1u << n) - 1;
  return (r.optional & ~all) == 0 && (r.writes & ~all) == 0;
}
// An op that writes an input records no graph: it has no backward and saves nothing, and it
// may have no outputs. Every other op has at least one. An op that writes an input takes no
// 16-bit float it would widen: the kernel would update the float32 copy, not the input.
constexpr bool rows_are_well_formed() {
  for (const OpInfo& r : kTable) {
    if (!masks_fit(r) || r.outputs < 0 || (r.outputs == 0 && r.writes == 0)) return false;
    if (r.writes != 0 && (r.backward != nullptr || r.save != kSaveNone)) return false;
    if (r.writes != 0 && r.lowp == kLowWiden && (r.dtypes.contains(DType::bf16) || r.dtypes.contains(DType::f16)))
      return false;
  }
  return true;
}

// Checked on the column's type, so writing nullptr where a function belongs does not compile.
#define QKV_OP_CHECK(id, in, opt, writes, out, dtypes, amp, lowp, save, shape_rule, cpu_kernel, cuda_kernel,      \
                     backward_rule)                                                                               \
  static_assert(std::is_function_v<decltype(shape_rule)>, "op " #id ": the shape column must name a shape rule"); \
  static_assert(std::is_function_v<decltype(cpu_kernel)>, "op " #id ": the cpu column must name a CPU kernel");
QKV_OPS(QKV_OP_CHECK)
#undef QKV_OP_CHECK

static_assert(std::size(kTable) == size_t(kOpCount), "one OpInfo per QKV_OPS row");
static_assert(rows_are_in_id_order(), "kTable must be indexable by OpId");
static_assert(rows_are_well_formed(),
              "an op needs at least one output unless it writes an input; its opt and writes "
              "masks name only its inputs; an op that writes an input has no backward, saves nothing "
              "and takes no 16-bit float that the dispatcher would widen");

}  // namespace

std::span<const OpInfo> op_table() { return kTable; }
const OpInfo& op_info(OpId id) { return kTable[size_t(id)]; }

}  // namespace qkv::autograd
