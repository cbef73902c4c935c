// The language-model loop's checkpoints: under <run>/checkpoints/, step_NNNNNNNN.safetensors
// (the model) and step_NNNNNNNN.state.safetensors (optimizer state as tensors; the loop's
// counters, the dropout generator's Philox counter, the data cursor and metrics.jsonl's length
// as metadata). Both are written atomically, the state file last: a checkpoint without it is
// incomplete and ignored. Only these exact names count: the temporary file of a write that was
// killed (io/atomic_file.h) is never taken for a checkpoint. The newest `keep` are kept.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "nn/module.h"
#include "tensor/random.h"
#include "train/data/tokens/token_batches.h"
#include "train/loops/loss_scale.h"
#include "train/loops/step_loop.h"
#include "train/optim/optimizer.h"

namespace qkv::loops {

// What a checkpoint restores besides the model and the optimizer: the loop's counters, and
// where the run's files, dropout and data were.
struct LmLoopState : LoopState {
  uint64_t metrics_bytes = 0;  // metrics.jsonl's length at the checkpoint
  GeneratorState gen;
  data::TokenCursor cursor;
};

struct LmCheckpoint {
  LmLoopState state;
  optim::NamedTensors optimizer;  // Optimizer::state_dict(), on the requested device
  std::filesystem::path model_file;
  std::filesystem::path state_file;  // where `state` and `optimizer` were read from
};

// The two files of the checkpoint of `step` in `run`: checkpoints/step_NNNNNNNN.safetensors (the
// model) and checkpoints/step_NNNNNNNN.state.safetensors (the loop's state and the optimizer's).
std::filesystem::path checkpoint_model_file(const std::filesystem::path& run, int64_t step);
std::filesystem::path checkpoint_state_file(const std::filesystem::path& run, int64_t step);
// Steps with a complete checkpoint in `run`, oldest first.
std::vector<int64_t> checkpoint_steps(const std::filesystem::path& run);
// The newest complete checkpoint's model file in `run`, if any.
std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& run);

void save_lm_checkpoint(const nn::Module& model, const optim::NamedTensors& optimizer, const LmLoopState& state,
                        const std::filesystem::path& run, int64_t keep);
// The newest complete checkpoint of `run`; IOError naming the file and key for a damaged one.
std::optional<LmCheckpoint> load_latest_lm_checkpoint(const std::filesystem::path& run, const Device& device);
// Removes every checkpoint of `run` (a run starting over).
void remove_checkpoints(const std::filesystem::path& run);

}  // namespace qkv::loops
