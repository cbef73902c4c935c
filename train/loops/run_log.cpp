#include "train/loops/run_log.h"

#include "tensor/error.h"

namespace qkv::loops {

namespace fs = std::filesystem;

namespace {

std::FILE* open_for_append(const fs::path& path, const char* what) {
  std::FILE* f = std::fopen(path.string().c_str(), "ab");
  check<IOError>(f != nullptr, path.string(), ": cannot open the ", what, " for appending");
  return f;
}

}  // namespace

RunLog::RunLog(const Options& o) {
  if (!o.dir.empty()) {
    fs::create_directories(o.dir);
    const fs::path metrics = metrics_file(o.dir), text = text_file(o.dir);
    metrics_path_ = metrics.string();
    if (o.resume_bytes) {
      const uint64_t have = fs::exists(metrics) ? fs::file_size(metrics) : 0;
      check<IOError>(have >= *o.resume_bytes, metrics_path_, " is shorter (", have,
                     " bytes) than its checkpoint recorded (", *o.resume_bytes, " bytes)");
      if (fs::exists(metrics)) fs::resize_file(metrics, *o.resume_bytes);
    } else {
      fs::remove(metrics);
      fs::remove(text);
    }
    metrics_ = open_for_append(metrics, "metrics log");
    metrics_bytes_ = fs::file_size(metrics);
    text_ = open_for_append(text, "training log");
  }
  progress_ = std::make_unique<Progress>(o.label, o.total_steps, o.log_every, stdout, text_);
}

RunLog::~RunLog() {
  if (metrics_) std::fclose(metrics_);
  if (text_) std::fclose(text_);
}

void RunLog::record(const MetricsRecord& r) {
  if (!metrics_) return;
  const std::string line = to_json(r).dump() + "\n";
  check<IOError>(std::fwrite(line.data(), 1, line.size(), metrics_) == line.size() && std::fflush(metrics_) == 0,
                 metrics_path_, ": cannot write the metrics log (disk full?)");
  metrics_bytes_ += line.size();
}

}  // namespace qkv::loops
