// Atomic writes leave only recognisable temporary files, which remove_temp_files clears, and a
// folder lock is exclusive, names its holder, and is released when its process dies.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include "io/atomic_file.h"
#include "io/folder_lock.h"
#include "tensor/error.h"
#include "tests/support/error_checks.h"
#include "tests/support/test_support.h"

using namespace qkv;
namespace fs = std::filesystem;

TEST_CASE("atomic files: temporary names are hidden, recognisable and never the target's") {
  const fs::path tmp = temp_file_for("/x/run/checkpoints/step_00000010.state.safetensors");
  CHECK(tmp.parent_path() == "/x/run/checkpoints");
  const std::string name = tmp.filename().string();
  CHECK(name.starts_with(".step_00000010.state.safetensors.tmp." + std::to_string(::getpid()) + "."));
  CHECK(is_temp_file_name(name));
  CHECK(temp_file_for("a/b.json") != temp_file_for("a/b.json"));         // two writers of one process differ
  CHECK(is_temp_file_name("step_00000010.state.safetensors.tmp.4242"));  // an earlier version's name
  for (const char* target : {"step_00000010.state.safetensors", "dataset.json", "train_000000.bin", ".qkvlab.lock",
                             "result.json", ".x.tmp.12.nothex!!", "notes.tmp"})
    CHECK_MESSAGE(!is_temp_file_name(target), target);
}

TEST_CASE("atomic files: a completed write leaves no temporary file and a failed one keeps the old file") {
  test::TempDir dir("atomic");
  write_file_atomically(dir.file("a.json"), [](std::ostream& os) { os << "one"; });
  write_file_atomically(dir.file("a.json"), [](std::ostream& os) { os << "two"; });
  CHECK_THROWS_AS(write_file_atomically(dir.file("a.json"),
                                        [](std::ostream& os) {
                                          os << "partial";
                                          throw IOError("disk full");
                                        }),
                  IOError);
  CHECK(test::read_file(dir.path / "a.json") == "two");
  CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator{}) == 1);
}

TEST_CASE("atomic files: remove_temp_files clears leftovers of other processes, here and below") {
  test::TempDir dir("leftovers");
  fs::create_directories(dir.path / "checkpoints");
  const std::vector<std::string> stale = {".config.yaml.tmp.999999.0badf00d",
                                          "checkpoints/.step_00000004.safetensors.tmp.999998.12345678",
                                          "checkpoints/step_00000008.state.safetensors.tmp.999997"};
  for (const auto& f : stale) test::write_file(dir.path / f, "partial");
  const std::string mine = fs::path(temp_file_for(dir.path / "meta.json")).filename().string();
  for (const char* keep : {"config.yaml", "metrics.jsonl", "checkpoints/step_00000004.safetensors"})
    test::write_file(dir.path / keep, "kept");
  test::write_file(dir.path / mine, "being written by this process");

  // Not recursive: only the run folder itself.
  CHECK(remove_temp_files(dir.path, false) == std::vector<fs::path>{dir.path / stale[0]});
  auto removed = remove_temp_files(dir.path, true);
  std::sort(removed.begin(), removed.end());
  CHECK(removed == std::vector<fs::path>{dir.path / stale[1], dir.path / stale[2]});
  for (const char* keep : {"config.yaml", "metrics.jsonl", "checkpoints/step_00000004.safetensors"})
    CHECK(fs::exists(dir.path / keep));
  CHECK(fs::exists(dir.path / mine));
  CHECK(remove_temp_files(dir.path / "missing", true).empty());
}

TEST_CASE("atomic files: the next write of a file removes what a killed writer of it left, not a live one's") {
  test::TempDir dir("dead writers");
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  REQUIRE(child > 0);
  ::waitpid(child, nullptr, 0);  // a pid that no longer runs
  const std::string dead = cat(".table4.md.tmp.", child, ".0badf00d"),
                    other = cat(".table2.md.tmp.", child, ".0badf00d");
  const std::string live = cat(".table4.md.tmp.", ::getppid(), ".12345678");
  for (const auto& f : {dead, other, live}) test::write_file(dir.path / f, "partial");
  write_file_atomically((dir.path / "table4.md").string(), [](std::ostream& os) { os << "new"; });
  CHECK(test::read_file(dir.path / "table4.md") == "new");
  CHECK_FALSE(fs::exists(dir.path / dead));
  CHECK(fs::exists(dir.path / other));  // another file's leftover: its own next write clears it
  CHECK(fs::exists(dir.path / live));   // a running process may still be writing it
}

TEST_CASE("folder lock: exclusive while held, naming the holder, and free again once released") {
  test::TempDir dir("lock");
  const fs::path run = dir.path / "exp" / "run";
  {
    const FolderLock held(run, "run folder");  // creates the folder
    CHECK(fs::is_directory(run));
    const std::string holder = FolderLock::holder(run);
    test::check_contains(holder, {"pid " + std::to_string(::getpid()), "on host ", " since ", "qkvlab_tests"});
    // A second lock is refused, even from the same process (flock locks are per open file).
    test::check_contains(test::error_of<IOError>([&] { FolderLock again(run, "run folder"); }),
                         {"the run folder " + run.string() + " is in use by another process", holder});
  }
  FolderLock again(run, "run folder");
  FolderLock moved(std::move(again));  // the moved-from object releases nothing
  CHECK_THROWS_AS(FolderLock(run, "run folder"), IOError);
}

TEST_CASE("folder lock: a process killed while holding it leaves no stale lock") {
  test::TempDir dir("lock-kill");
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {  // takes the lock, reports, and waits to be killed
    try {
      FolderLock held(dir.path, "run folder");
      const char ok = 1;
      (void)!::write(ready[1], &ok, 1);
      ::pause();
    } catch (...) {}
    ::_exit(1);
  }
  ::close(ready[1]);
  char ok = 0;
  REQUIRE(::read(ready[0], &ok, 1) == 1);
  ::close(ready[0]);
  CHECK_THROWS_AS(FolderLock(dir.path, "run folder"), IOError);  // the child holds it
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  CHECK(WIFSIGNALED(status));
  const FolderLock mine(dir.path, "run folder");
  CHECK(FolderLock::holder(dir.path).starts_with("pid " + std::to_string(::getpid()) + " "));
}
