#include "train/loops/shared_checkpoint.h"

#include <cstdlib>
#include <fstream>

#include "tensor/error.h"

namespace qkv::loops {

namespace fs = std::filesystem;

namespace {

constexpr size_t kPiece = size_t(256) << 20;  // bytes a broadcast carries (MPI counts are ints)

// Rank 0's file `from` (its name given) written at `to` on every other rank.
void send_file(dist::Communicator& comm, const fs::path& from, const fs::path& to) {
  const bool root = comm.rank() == 0;
  std::ifstream in;
  if (root) {
    in.open(from, std::ios::binary);
    check<IOError>(bool(in), from.string(), ": cannot open for reading");
  }
  const uint64_t size = root ? uint64_t(fs::file_size(from)) : 0;
  const uint64_t total =
      uint64_t(comm.all_reduce(std::vector<double>{double(size)}, dist::ReduceOp::sum, "checkpoint size").at(0));
  std::ofstream out;
  if (!root) {
    out.open(to, std::ios::binary);
    check<IOError>(bool(out), to.string(), ": cannot create (the scratch copy of rank 0's checkpoint)");
  }
  std::string piece;
  for (uint64_t done = 0; done < total;) {
    const size_t n = size_t(std::min<uint64_t>(kPiece, total - done));
    if (root) {
      piece.resize(n);
      in.read(piece.data(), std::streamsize(n));
      check<IOError>(bool(in), from.string(), ": read failed");
    }
    piece = comm.broadcast(piece, 0, cat("rank 0's checkpoint ", from.filename().string()));
    if (!root) out.write(piece.data(), std::streamsize(piece.size()));
    done += n;
  }
  if (!root) {
    out.close();
    check<IOError>(bool(out), to.string(), ": write failed (the scratch copy of rank 0's checkpoint)");
  }
}

}  // namespace

ResumedCheckpoint resume_lm_checkpoint(const fs::path& run, const Device& device, dist::Communicator* comm) {
  ResumedCheckpoint r;
  if (!comm || comm->size() == 1) {
    r.checkpoint = load_latest_lm_checkpoint(run, device);
    return r;
  }
  std::vector<int64_t> steps;
  if (comm->rank() == 0) steps = checkpoint_steps(run);
  const std::string newest =
      comm->broadcast(steps.empty() ? "" : std::to_string(steps.back()), 0, "the newest checkpoint");
  if (newest.empty()) return r;
  const int64_t step = std::stoll(newest);
  std::error_code ec;
  const bool sees = fs::is_regular_file(checkpoint_model_file(run, step), ec) &&
                    fs::is_regular_file(checkpoint_state_file(run, step), ec);
  const double blind =
      comm->all_reduce(std::vector<double>{sees ? 0.0 : 1.0}, dist::ReduceOp::sum, "who sees the checkpoint").at(0);
  if (blind == 0) {
    r.checkpoint = load_latest_lm_checkpoint(run, device);
    return r;
  }
  // Some rank cannot see the run folder: rank 0 sends the files to every other rank.
  fs::path scratch;
  if (comm->rank() != 0) {
    std::string tmpl = (fs::temp_directory_path() / "qkvlab-checkpoint-XXXXXX").string();
    check<IOError>(::mkdtemp(tmpl.data()) != nullptr, "cannot create a scratch folder under ",
                   fs::temp_directory_path().string(), " for rank 0's checkpoint");
    scratch = tmpl;
    fs::create_directories(checkpoint_model_file(scratch, step).parent_path());
    r.scratch = std::shared_ptr<void>(nullptr, [scratch](void*) {
      std::error_code ignored;
      fs::remove_all(scratch, ignored);
    });
  }
  send_file(*comm, checkpoint_model_file(run, step), checkpoint_model_file(scratch, step));
  send_file(*comm, checkpoint_state_file(run, step), checkpoint_state_file(scratch, step));
  r.received = comm->rank() != 0;
  r.sent_to = int(blind);
  r.checkpoint = load_latest_lm_checkpoint(r.received ? scratch : run, device);
  return r;
}

}  // namespace qkv::loops
