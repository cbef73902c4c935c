// Whether ops record the graph. Off inside a NoGradGuard (optimizer steps, evaluation) and
// while backward rules run.
#pragma once

namespace qkv {

bool grad_enabled();
void set_grad_enabled(bool on);

class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

}  // namespace qkv
