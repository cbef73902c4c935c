// train/dist/ in one process: reading the launcher's environment, the world-size-1 back end,
// which back end connect() picks, and the errors of a missing plugin or a tensor a back end
// cannot reduce. The collectives of several ranks are dist_collectives (under mpirun).
#include <doctest/doctest.h>
#include <stdlib.h>

#include <fstream>
#include <map>
#include <optional>
#include <string>

#include "tests/support/test_support.h"
#include "train/dist/communicator.h"
#include "train/dist/launch_env.h"
#include "train/dist/plugin_comm.h"
#include "train/dist/plugin_loader.h"

namespace qkv::test {

namespace {

// Sets (or unsets, with nullopt) environment variables for the scope, restoring them after.
class ScopedEnv {
 public:
  explicit ScopedEnv(const std::map<std::string, std::optional<std::string>>& vars) {
    for (const auto& [name, value] : vars) {
      const char* old = std::getenv(name.c_str());
      saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
      set(name, value);
    }
  }
  ~ScopedEnv() {
    for (const auto& [name, value] : saved_) set(name, value);
  }

 private:
  static void set(const std::string& name, const std::optional<std::string>& value) {
    if (value) ::setenv(name.c_str(), value->c_str(), 1);
    else ::unsetenv(name.c_str());
  }
  std::map<std::string, std::optional<std::string>> saved_;
};

// Every variable launch_env() reads, unset.
std::map<std::string, std::optional<std::string>> no_launcher() {
  std::map<std::string, std::optional<std::string>> vars;
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "PMI_SIZE", "PMI_RANK", "PMIX_RANK",
                        "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "MV2_COMM_WORLD_SIZE", "MV2_COMM_WORLD_RANK"})
    vars[v] = std::nullopt;
  return vars;
}

std::map<std::string, std::optional<std::string>> with(std::map<std::string, std::optional<std::string>> vars,
                                                       const std::map<std::string, std::string>& set) {
  for (const auto& [k, v] : set) vars[k] = v;
  return vars;
}

bool mapped(const std::string& library) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find(library) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("dist: the launcher's environment says the rank and the world size") {
  {
    ScopedEnv env(no_launcher());
    CHECK(dist::launch_env().size == 1);
    CHECK_FALSE(dist::launched_by_mpi());
  }
  {
    ScopedEnv env(with(no_launcher(), {{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "3"}}));
    const dist::LaunchEnv e = dist::launch_env();
    CHECK(e.size == 4);
    CHECK(e.rank == 3);
    CHECK(e.launcher == "OMPI_COMM_WORLD_SIZE=4");
    CHECK(dist::launched_by_mpi());
  }
  {
    ScopedEnv env(with(no_launcher(), {{"OMPI_COMM_WORLD_SIZE", "1"}, {"OMPI_COMM_WORLD_RANK", "0"}}));
    CHECK_FALSE(dist::launched_by_mpi());  // mpirun -np 1 is world size 1
  }
  {
    ScopedEnv env(with(no_launcher(), {{"PMI_SIZE", "2"}, {"PMI_RANK", "1"}}));
    CHECK(dist::launch_env().rank == 1);
    CHECK(dist::launched_by_mpi());
  }
  {
    ScopedEnv env(with(no_launcher(), {{"SLURM_NTASKS", "8"}}));
    CHECK_FALSE(dist::launched_by_mpi());  // srun without PMIx starts independent processes
  }
  {
    ScopedEnv env(with(no_launcher(), {{"SLURM_NTASKS", "8"}, {"PMIX_RANK", "5"}}));
    CHECK(dist::launch_env().size == 8);
    CHECK(dist::launch_env().rank == 5);
  }
  {
    ScopedEnv env(with(no_launcher(), {{"OMPI_COMM_WORLD_SIZE", "two"}}));
    CHECK_FALSE(dist::launched_by_mpi());
  }
}

TEST_CASE("dist: world size 1 returns every input") {
  auto comm = dist::make_single();
  CHECK(comm->backend() == "single");
  CHECK(comm->size() == 1);
  CHECK(comm->local_size() == 1);
  Tensor t = from_vector<float>({1, -2, 3});
  comm->all_reduce(t, dist::ReduceOp::sum, "test");
  CHECK(t.to_vector<float>() == std::vector<float>{1, -2, 3});
  comm->all_reduce_async(t, dist::ReduceOp::max, "test")->wait();
  CHECK(comm->all_reduce({1.5, 2}, dist::ReduceOp::min, "test") == std::vector<double>{1.5, 2});
  CHECK(comm->all_gather("abc", "test") == std::vector<std::string>{"abc"});
  CHECK(comm->broadcast("xyz", 0, "test") == "xyz");
  CHECK_THROWS_AS(comm->broadcast("xyz", 1, "test"), dist::DistError);
  comm->barrier("test");
  // The same tensor rules as the other back ends.
  Tensor i32 = from_vector<int32_t>({1});
  CHECK_THROWS_WITH_AS(comm->all_reduce(i32, dist::ReduceOp::sum, "the counts"),
                       "all-reduce of the counts: the single back end reduces float32, float64 and int64 tensors, "
                       "got a tensor of int32 on cpu: convert it with .to() first",
                       dist::DistError);
}

TEST_CASE("dist: connect picks single without a launcher and loads no MPI") {
  ScopedEnv env(no_launcher());
  for (const char* backend : {"auto", "single"}) {
    dist::Options o;
    o.backend = backend;
    CHECK(dist::connect(o, false)->backend() == "single");
    CHECK(dist::connect(o, true)->backend() == "single");
  }
  CHECK_FALSE(mapped("libmpi"));
  CHECK_FALSE(mapped("libqkv_dist_"));
}

TEST_CASE("dist: connect refuses what cannot work") {
  dist::Options o;
  o.backend = "gloo";
  CHECK_THROWS_WITH_AS(dist::connect(o, false),
                       "unknown communication back end 'gloo': expected auto, single, mpi or nccl", dist::DistError);
  o = dist::Options{};
  o.timeout_seconds = 0;
  CHECK_THROWS_WITH_AS(dist::connect(o, false), doctest::Contains("must be positive, got 0 s"), dist::DistError);
  ScopedEnv env(with(no_launcher(), {{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "1"}}));
  o = dist::Options{};
  o.backend = "single";
  CHECK_THROWS_WITH_AS(dist::connect(o, false),
                       doctest::Contains("the launcher started this process as rank 1 of 2 (OMPI_COMM_WORLD_SIZE=2)"),
                       dist::DistError);
}

TEST_CASE("dist: a missing plugin names the file, the folders and what to do") {
  const std::vector<dist::PluginDir> dirs = {{"", "$QKV_PLUGIN_DIR"}, {"/nonexistent/qkv-plugins", "the build folder"}};
  for (const char* name : {"mpi", "nccl"}) {
    CAPTURE(name);
    try {
      dist::load_plugin(name, dirs);
      FAIL("no error");
    } catch (const dist::DistError& e) {
      const std::string m = e.what();
      CHECK(m.find(cat("libqkv_dist_", name, ".so")) != std::string::npos);
      CHECK(m.find("$QKV_PLUGIN_DIR (unset), /nonexistent/qkv-plugins (the build folder)") != std::string::npos);
      const bool hint =
          m.find("QKV_PLUGIN_DIR to the folder") != std::string::npos ||
          m.find(std::string(name) == "mpi" ? "openmpi-bin libopenmpi-dev" : "/usr/local/cuda") != std::string::npos;
      CHECK(hint);
    }
  }
  CHECK_THROWS_WITH_AS(dist::load_plugin("gloo", dirs),
                       "no communication plugin named 'gloo': the plugins are mpi and nccl", dist::DistError);
  CHECK_FALSE(mapped("libmpi"));
}

TEST_CASE("dist: a plugin that does not load names the file and the library it needs") {
  TempDir dir("dist-plugin");
  write_file(dir.path / "libqkv_dist_nccl.so", "not a shared library");
  try {
    dist::load_plugin("nccl", {{dir.path.string(), "the test folder"}});
    FAIL("no error");
  } catch (const dist::DistError& e) {
    const std::string m = e.what();
    CHECK(m.find(cat("cannot load the nccl back end ", (dir.path / "libqkv_dist_nccl.so").string(), ": ")) == 0);
    CHECK(m.find("It needs NCCL (libnccl.so.2): it is NVIDIA's library, expected with nccl.h under /usr/local/cuda") !=
          std::string::npos);
  }
}

TEST_CASE("dist: the nccl back end refuses a CPU tensor naming its dtype and device") {
  const Device gpu(DeviceType::cuda, 1);
  Tensor t = zeros({3}, DType::f64);
  CHECK_THROWS_WITH_AS(dist::check_reducible(t, "nccl", &gpu, "gradient bucket 1 of 2 at step 5"),
                       "all-reduce of gradient bucket 1 of 2 at step 5: the nccl back end serves tensors on cuda:1, "
                       "this rank's GPU, got a tensor of float64 on cpu: move it to cuda:1",
                       dist::DistError);
  CHECK_NOTHROW(dist::check_reducible(t, "mpi", &kCPU, "x"));
}

}  // namespace qkv::test
