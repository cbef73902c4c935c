// Resuming a data-parallel language-model run whose output folder only rank 0's host may see.
// Rank 0 names its newest checkpoint; when every rank sees that checkpoint's files, each reads
// them itself; otherwise rank 0 reads them and sends their bytes (in pieces, any size) to the
// others, which load them from a scratch folder of their own, removed with the result.
#pragma once
#include <filesystem>
#include <memory>
#include <optional>

#include "train/dist/communicator.h"
#include "train/loops/lm_checkpoint.h"

namespace qkv::loops {

struct ResumedCheckpoint {
  std::optional<LmCheckpoint> checkpoint;  // its model_file stays readable while this lives
  bool received = false;                   // this rank got the files from rank 0
  int sent_to = 0;                         // ranks that could not see them and got them from rank 0
  std::shared_ptr<void> scratch;           // removes the scratch folder of received files
};

// load_latest_lm_checkpoint of `run` on every rank of `comm` (null: this process alone). A
// collective: every rank calls it. IOError naming the file for a damaged checkpoint.
ResumedCheckpoint resume_lm_checkpoint(const std::filesystem::path& run, const Device& device,
                                       dist::Communicator* comm);

}  // namespace qkv::loops
