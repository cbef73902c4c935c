// RunDir: creating a run's folder, writing config.yaml / meta.json / result.json atomically,
// and detecting finished runs; run_meta: the machine and source description in meta.json.
#include "lab/experiment/run_dir.h"

#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <thread>

#include "io/atomic_file.h"
#include "io/fault_hook.h"
#include "io/json_read.h"
#include "train/loops/lm_checkpoint.h"

#ifndef QKV_SOURCE_DIR
#define QKV_SOURCE_DIR ""
#endif

namespace qkv::experiment {

namespace fs = std::filesystem;

RunDir::RunDir(const fs::path& out, const std::string& experiment, const std::string& run_id) {
  check<ValueError>(!experiment.empty() && experiment != "." && experiment != ".." &&
                        experiment.find('/') == std::string::npos,
                    "RunDir: experiment name '", experiment, "' is not a single path component");
  for (const fs::path& part : fs::path(run_id))
    check<ValueError>(!part.empty() && part != "." && part != ".." && part != "/", "RunDir: run id '", run_id,
                      "' must be a relative path of plain components");
  check<ValueError>(!run_id.empty() && run_id.back() != '/', "RunDir: run id '", run_id, "' is empty or ends in '/'");
  path_ = out / experiment / run_id;
}

RunDir::RunDir(const fs::path& out, const Run& run) : RunDir(out, run.config.name(), run.id) {}

bool RunDir::complete() const {
  std::error_code ec;
  if (!fs::exists(path_ / "result.json", ec)) return false;
  try {
    return read_json_file(path_ / "result.json", "a run's result.json", kMaxResultBytes).is_object();
  } catch (const IOError&) {
    return false;  // damaged: the run is redone
  }
}

namespace {

void write_config_and_meta(const fs::path& folder, const Config& resolved) {
  const std::string yaml = to_yaml(resolved);
  write_file_atomically((folder / "config.yaml").string(), [&](std::ostream& os) { os << yaml; });
  const std::string meta = run_meta().dump(2);
  write_file_atomically((folder / "meta.json").string(), [&](std::ostream& os) { os << meta << "\n"; });
}

}  // namespace

void RunDir::start(const Config& resolved) const {
  std::error_code ec;
  fs::create_directories(path_, ec);
  check<IOError>(!ec, path_.string(), ": cannot create the run folder: ", ec.message());
  write_config_and_meta(path_, resolved);
}

void write_model_folder_files(const fs::path& folder, const Config& resolved, const std::string& record_name,
                              const nlohmann::json& record) {
  write_config_and_meta(folder, resolved);
  const std::string text = record.dump(2);
  write_file_atomically((folder / record_name).string(), [&](std::ostream& os) { os << text << "\n"; });
}

void RunDir::write_result(const ResultRow& result) const {
  std::error_code ec;
  fs::create_directories(path_, ec);
  check<IOError>(!ec, path_.string(), ": cannot create the run folder: ", ec.message());
  const std::string text = to_json(result).dump(2);
  const FaultWriteScope fault("result", 0);  // testing hook (io/fault_hook.h)
  write_file_atomically((path_ / "result.json").string(), [&](std::ostream& os) { os << text << "\n"; });
}

FolderLock RunDir::lock() const { return FolderLock(path_, "run folder"); }

std::vector<fs::path> RunDir::remove_temporaries() const { return remove_temp_files(path_, /*recursive=*/true); }

void RunDir::settle_checkpoints(bool resume, bool restart, std::FILE* log) const {
  const std::vector<int64_t> steps = loops::checkpoint_steps(path_);
  // A converted model's folder (`qkvlab convert`) holds a checkpoint with no optimizer state and
  // no run behind it: neither continued nor deleted.
  check<ValueError>(steps.empty() || !fs::exists(path_ / "convert.json"), "run: ", path_.string(),
                    " holds a converted model (convert.json), not an unfinished run; fine-tune it with "
                    "model.init_from=",
                    path_.string(), " in a run of its own output folder");
  if (steps.empty() || resume) return;
  check<ValueError>(restart, "run: ", path_.string(),
                    " holds checkpoints of an unfinished run (newest: ", loops::latest_checkpoint(path_)->string(),
                    "); pass --resume to continue it, or --restart to delete its checkpoints and start it over");
  if (log)
    std::fprintf(log, "  --restart: deleting %zu checkpoint(s), steps %lld to %lld, in %s\n", steps.size(),
                 static_cast<long long>(steps.front()), static_cast<long long>(steps.back()),
                 (path_ / "checkpoints").string().c_str());
  loops::remove_checkpoints(path_);
}

ResultRow RunDir::read_result() const { return read_result_file(path_ / "result.json"); }

namespace {

std::string git_commit() {
  const std::string dir = QKV_SOURCE_DIR;
  if (dir.empty() || dir.find('\'') != std::string::npos) return "unknown";
  const std::string cmd = "git -C '" + dir + "' rev-parse HEAD 2>/dev/null";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) return "unknown";
  char buf[128] = {};
  std::string out;
  while (std::fgets(buf, sizeof buf, pipe)) out += buf;
  const int status = ::pclose(pipe);
  while (!out.empty() && std::isspace(static_cast<unsigned char>(out.back()))) out.pop_back();
  if (status != 0 || out.size() != 40) return "unknown";
  for (char c : out)
    if (!std::isxdigit(static_cast<unsigned char>(c))) return "unknown";
  return out;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (!line.starts_with("model name")) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) break;
    size_t start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "unknown" : line.substr(start);
  }
  return "unknown";
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

std::string utc_now() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

nlohmann::json run_meta() {
  static const std::string commit = git_commit();  // one git call per process
  return {{"qkvlab_version", QKV_VERSION},
          {"git_commit", commit},
          {"hostname", host_name()},
          {"cpu_model", cpu_model()},
          {"cores", std::thread::hardware_concurrency()},
          {"start_time", utc_now()}};
}

}  // namespace qkv::experiment
