#include "autograd/op_table.h"

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
constexpr bool rows_are_complete() {
  for (const OpInfo& r : kTable)
    if (r.cpu == nullptr || r.shape == nullptr || r.outputs < 1 || r.arity < -1) return false;
  return true;
}

static_assert(std::size(kTable) == size_t(kOpCount), "one OpInfo per QKV_OPS row");
static_assert(rows_are_in_id_order(), "kTable must be indexable by OpId");
static_assert(rows_are_complete(), "every op needs a shape rule, a CPU kernel and at least one output");

}  // namespace

std::span<const OpInfo> op_table() { return kTable; }
const OpInfo& op_info(OpId id) { return kTable[size_t(id)]; }

}  // namespace qkv::autograd
