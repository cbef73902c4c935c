#include "train/loops/progress.h"

#include <unistd.h>

#include <cmath>

#include "tensor/format.h"

namespace qkv::loops {

Progress::Progress(std::string label, int64_t total_steps, int64_t interval, std::FILE* out, std::FILE* log)
    : label_(std::move(label)),
      total_(total_steps),
      interval_(interval < 1 ? 1 : interval),
      out_(out),
      log_(log),
      tty_(::isatty(::fileno(out)) != 0),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

double Progress::steps_per_second() const {
  const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  return t > 0 ? double(step_ - base_) / t : 0.0;
}

void Progress::update(int64_t step, double loss, double lr) {
  step_ = step;
  const auto now = std::chrono::steady_clock::now();
  const double rate = steps_per_second();
  const double eta = rate > 0 ? double(total_ - step) / rate : NAN;
  const bool plain_due = step % interval_ == 0 || step == total_;
  if (log_ && plain_due) {
    std::fprintf(log_, "%s step %lld/%lld loss %.4f lr %.2e %.1f it/s%s%s\n", label_.c_str(), (long long)step,
                 (long long)total_, loss, lr, rate, note_.empty() ? "" : " ", note_.c_str());
    std::fflush(log_);
  }
  if (tty_) {
    if (step != total_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    const int width = 24, filled = total_ > 0 ? int(width * step / total_) : width;
    std::fprintf(out_, "\r%s [%s%s] %lld/%lld loss %.4f lr %.2e %.1f it/s %sETA %s  ", label_.c_str(),
                 std::string(size_t(filled), '#').c_str(), std::string(size_t(width - filled), '.').c_str(),
                 (long long)step, (long long)total_, loss, lr, rate, note_.empty() ? "" : (note_ + " ").c_str(),
                 format_duration(eta).c_str());
  } else {
    if (!plain_due) return;
    std::fprintf(out_, "%s step %lld/%lld loss %.4f lr %.2e %.1f it/s %sETA %s\n", label_.c_str(), (long long)step,
                 (long long)total_, loss, lr, rate, note_.empty() ? "" : (note_ + " ").c_str(),
                 format_duration(eta).c_str());
  }
  std::fflush(out_);
}

void Progress::message(const std::string& text) {
  std::fprintf(out_, "%s%s %s\n", tty_ ? "\r\033[K" : "", label_.c_str(), text.c_str());
  std::fflush(out_);
  if (log_) {
    std::fprintf(log_, "%s %s\n", label_.c_str(), text.c_str());
    std::fflush(log_);
  }
}

void Progress::finish(const std::string& summary) {
  const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::fprintf(out_, "%s%s %s (%s)\n", tty_ ? "\r\033[K" : "", label_.c_str(), summary.c_str(),
               format_duration(t).c_str());
  std::fflush(out_);
  if (log_) {
    std::fprintf(log_, "%s %s (%s)\n", label_.c_str(), summary.c_str(), format_duration(t).c_str());
    std::fflush(log_);
  }
}

ThroughputWindow::Rate ThroughputWindow::take(Clock::time_point now) {
  const Rate r{tokens_, std::chrono::duration<double>(now - start_).count(), steps_};
  restart(now);
  return r;
}

void ThroughputWindow::restart(Clock::time_point now) {
  start_ = now;
  tokens_ = steps_ = 0;
}

}  // namespace qkv::loops
