// Downstream task files: the input's first byte picks the task's layout (ARC, HellaSwag, PIQA,
// WinoGrande), the rest is the JSONL file; every question read must have a valid gold choice
// and a context and continuation per choice.
#include <cstdio>
#include <cstdlib>

#include "fuzz/support.h"
#include "train/data/mc_tasks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace qkv;
  if (size == 0) return 0;
  const data::McTask task = data::kMcTasks[data[0] % std::size(data::kMcTasks)];
  const auto path = fuzz::scratch() / "task.jsonl";
  fuzz::write_file(path, fuzz::as_text(data + 1, size - 1));
  fuzz::run_reader([&] {
    for (const data::McItem& item : data::read_mc_items(task, path))
      if (item.choices() < 1 || item.contexts.size() != item.continuations.size() || item.gold < 0 ||
          item.gold >= int64_t(item.choices())) {
        std::fprintf(stderr, "fuzz: a %s question with %zu contexts, %zu continuations and gold %lld\n",
                     data::mc_task_name(task), item.contexts.size(), item.continuations.size(), (long long)item.gold);
        std::abort();
      }
  });
  return 0;
}
