// A run folder against interruptions: it is locked while a run writes to it, the temporary files
// killed writes left in it are removed, and an unfinished run's checkpoints are never deleted
// without --restart.
#include <doctest/doctest.h>

#include "io/atomic_file.h"
#include "lab/experiment/run_dir.h"
#include "tests/support/error_checks.h"
#include "tests/support/test_support.h"
#include "train/loops/lm_checkpoint.h"

using namespace qkv;
using experiment::RunDir;
namespace fs = std::filesystem;

namespace {

// A complete checkpoint of `step` as lm_checkpoint.cpp names it (the contents do not matter to
// discovery).
void fake_checkpoint(const fs::path& run, int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step_%08lld", static_cast<long long>(step));
  fs::create_directories(run / "checkpoints");
  test::write_file(run / "checkpoints" / (std::string(name) + ".safetensors"), "model");
  test::write_file(run / "checkpoints" / (std::string(name) + ".state.safetensors"), "state");
}

}  // namespace

TEST_CASE("run folder: locked while held and a second holder is refused with the first one named") {
  test::TempDir out("rundir-lock");
  const RunDir dir(out.path, "exp", "QKV/seed0");
  {
    const FolderLock held = dir.lock();
    test::check_contains(test::error_of<IOError>([&] { dir.lock(); }),
                         {dir.path().string(), "in use by another process", "pid " + std::to_string(::getpid())});
    // Another RunDir object for the same run is the same folder and the same lock.
    CHECK_THROWS_AS(RunDir(out.path, "exp", "QKV/seed0").lock(), IOError);
    CHECK_NOTHROW(RunDir(out.path, "exp", "QKV/seed1").lock());
  }
  CHECK_NOTHROW(dir.lock());
}

TEST_CASE("run folder: temporary files of killed writes are removed, nothing else") {
  test::TempDir out("rundir-temps");
  const RunDir dir(out.path, "exp", "run");
  fake_checkpoint(dir.path(), 4);
  const fs::path a = dir.path() / ".result.json.tmp.999999.00c0ffee",
                 b = dir.path() / "checkpoints" / ".step_00000008.state.safetensors.tmp.999999.0000abcd";
  test::write_file(a, "{");
  test::write_file(b, "half");
  test::write_file(dir.path() / "metrics.jsonl", "{}\n");
  const FolderLock held = dir.lock();
  auto removed = dir.remove_temporaries();
  std::sort(removed.begin(), removed.end());
  CHECK(removed == std::vector<fs::path>{a, b});
  CHECK_FALSE(fs::exists(a));
  CHECK(fs::exists(dir.path() / "metrics.jsonl"));
  CHECK(fs::exists(FolderLock::file(dir.path())));
  CHECK(loops::checkpoint_steps(dir.path()) == std::vector<int64_t>{4});
}

TEST_CASE("run folder: an unfinished run's checkpoints are kept, or deleted only when asked") {
  test::TempDir out("rundir-ckpt");
  const RunDir dir(out.path, "exp", "run");
  CHECK_NOTHROW(dir.settle_checkpoints(false, false, nullptr));  // nothing to lose
  fake_checkpoint(dir.path(), 10);
  fake_checkpoint(dir.path(), 20);

  const std::string refused = test::error_of<ValueError>([&] { dir.settle_checkpoints(false, false, nullptr); });
  test::check_contains(refused,
                       {dir.path().string(), "unfinished run",
                        (dir.path() / "checkpoints" / "step_00000020.safetensors").string(), "--resume", "--restart"});
  CHECK(loops::checkpoint_steps(dir.path()) == std::vector<int64_t>{10, 20});

  CHECK(test::captured([&](std::FILE* log) { dir.settle_checkpoints(true, false, log); }).empty());
  CHECK(loops::checkpoint_steps(dir.path()) == std::vector<int64_t>{10, 20});

  const std::string said = test::captured([&](std::FILE* log) { dir.settle_checkpoints(false, true, log); });
  test::check_contains(said, {"--restart", "deleting 2 checkpoint(s), steps 10 to 20",
                              (dir.path() / "checkpoints").string()});
  CHECK(loops::checkpoint_steps(dir.path()).empty());
  CHECK_NOTHROW(dir.settle_checkpoints(false, false, nullptr));
}
