#include "train/dist/mpi_engine.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>

#include "train/dist/plugin_support.h"
#include "train/dist/stop_signal.h"

namespace qkv::dist::plugin {

namespace {

// Polling: at once after progress, then backing off to 1 ms while collectives wait on other
// ranks (MPI_Test is cheap, but the training threads need the cores). While a caller is blocked
// in wait() its core is free, and MPI moves a large message only as fast as it is tested: then
// the thread polls without pausing.
constexpr auto kMinPause = std::chrono::microseconds(5);
constexpr auto kMaxPause = std::chrono::microseconds(1000);

// MPI may be initialized once per process, and never again after MPI_Finalize.
std::atomic<bool> mpi_started{false};

// MPI_Abort asks the launcher to end the job; with a host unreachable (its link down) that
// request can block for as long as TCP takes to give up. The rank ends a few seconds later
// regardless.
[[noreturn]] void abort_job() {
  std::thread([] {
    std::this_thread::sleep_for(std::chrono::seconds(5));
    ::_exit(1);
  }).detach();
  MPI_Abort(MPI_COMM_WORLD, 1);
  ::_exit(1);
}

}  // namespace

std::unique_ptr<MpiEngine> MpiEngine::start(double timeout_seconds, std::string& error) {
  if (mpi_started.exchange(true)) {
    error =
        "MPI was already started in this process: it can be initialized only once, so keep the first communicator "
        "for the whole run";
    return nullptr;
  }
  std::unique_ptr<MpiEngine> e(new MpiEngine(timeout_seconds));
  e->thread_ = std::thread([p = e.get()] { p->main(); });
  std::unique_lock lock(e->mu_);
  e->done_.wait(lock, [&] { return e->initialized_ || e->finished_; });
  if (e->initialized_) return e;
  error = e->init_error_;
  lock.unlock();
  e->thread_.join();
  return nullptr;
}

MpiEngine::~MpiEngine() {
  if (thread_.joinable()) close(false);
}

std::string MpiEngine::mpi_error(int code, const std::string& what) const {
  char message[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(code, message, &len);
  return text("rank ", info_.rank, ": ", what, " failed in MPI: ", message);
}

bool MpiEngine::initialize() {
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
    init_error_ = "MPI_Init_thread failed: the launcher's messages above say why";
    return false;
  }
  // Only this thread calls MPI, and it is the thread that initialized it: FUNNELED is enough.
  if (provided < MPI_THREAD_FUNNELED) {
    init_error_ =
        "this MPI library gives no thread support (MPI_THREAD_SINGLE); qkvlab calls MPI from a communication "
        "thread and needs at least MPI_THREAD_FUNNELED: use Debian's Open MPI (apt-get install openmpi-bin "
        "libopenmpi-dev)";
    MPI_Finalize();
    return false;
  }
  MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);  // a failed collective is a DistError, not a crash
  MPI_Comm_rank(comm_, &info_.rank);
  MPI_Comm_size(comm_, &info_.size);
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, info_.rank, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &info_.local_rank);
  MPI_Comm_size(node, &info_.local_size);
  MPI_Comm_free(&node);
  // mpirun or srun SIGTERMs the ranks left when one ends; a process alone (MPI's singleton) has
  // no such launcher, and Ctrl-C there keeps its usual meaning.
  if (info_.size > 1) install_stop_handler(info_.rank);
  return true;
}

void MpiEngine::main() {
  const bool ok = initialize();
  {
    std::lock_guard lock(mu_);
    initialized_ = ok;
    finished_ = !ok;
  }
  done_.notify_all();
  if (!ok) return;

  std::vector<std::shared_ptr<MpiTask>> active;  // started, in the order posted
  std::shared_ptr<MpiTask> shown;                // the collective the stop handler names
  auto pause = kMinPause;
  bool clean = false;
  for (;;) {
    std::deque<std::shared_ptr<MpiTask>> fresh;
    bool stopping = false;
    {
      std::unique_lock lock(mu_);
      auto ready = [&] { return !queue_.empty() || stop_ || abort_; };
      if (active.empty()) wake_.wait(lock, ready);
      else if (waiters_ == 0) wake_.wait_for(lock, pause, ready);
      if (abort_) {
        lock.unlock();
        abort_job();
      }
      fresh.swap(queue_);
      stopping = stop_;
      clean = clean_;
    }
    if (stopping && !clean) {
      // An error is unwinding: leave what is in flight (MPI is not called again, so nothing
      // writes to those buffers) and let the launcher end the other ranks.
      std::lock_guard lock(mu_);
      auto drop = [&](MpiTask& t) {
        t.done = true;
        t.error = text("rank ", info_.rank, ": ", t.what, ": the communicator was closed by an error");
      };
      for (auto& t : active) drop(*t);
      for (auto& t : fresh) drop(*t);
      done_.notify_all();
      break;
    }

    bool progressed = !fresh.empty();
    for (auto& t : fresh) {
      start_task(*t);
      active.push_back(std::move(t));
    }
    for (auto it = active.begin(); it != active.end();) {
      if (test_task(**it)) {
        it = active.erase(it);
        progressed = true;
      } else {
        ++it;
      }
    }
    // Deadlines follow the posting order, so the oldest task is the first to run out.
    if (!active.empty() && Clock::now() > active.front()->deadline) timed_out(*active.front());
    std::shared_ptr<MpiTask> now_in = active.empty() ? nullptr : active.front();
    if (now_in != shown) {
      set_current_collective(now_in ? now_in->what : std::string());
      shown = std::move(now_in);
    }
    pause = progressed ? kMinPause : std::min<std::chrono::microseconds>(pause * 2, kMaxPause);
    if (stopping && active.empty()) {
      std::lock_guard lock(mu_);
      if (queue_.empty()) break;
    }
  }

  if (clean) {
    {
      std::lock_guard lock(mu_);
      finalizing_ = true;
      finalize_started_ = Clock::now();
    }
    MPI_Comm_free(&comm_);
    MPI_Finalize();
  }
  {
    std::lock_guard lock(mu_);
    finished_ = true;
  }
  done_.notify_all();
}

void MpiEngine::start_task(MpiTask& t) {
  int rc = MPI_SUCCESS;
  auto add = [&](auto&& call) {
    MPI_Request r = MPI_REQUEST_NULL;
    rc = call(&r);
    if (rc == MPI_SUCCESS) t.requests.push_back(r);
  };
  int element = 1;
  MPI_Type_size(t.type, &element);
  // MPI counts are ints: larger buffers go as several collectives, the same on every rank.
  const int64_t chunk = INT_MAX;
  switch (t.kind) {
    case MpiTask::Kind::all_reduce:
      for (int64_t off = 0; off < t.count && rc == MPI_SUCCESS; off += chunk) {
        char* p = static_cast<char*>(t.data) + off * element;
        const int n = int(std::min(chunk, t.count - off));
        add([&](MPI_Request* r) { return MPI_Iallreduce(MPI_IN_PLACE, p, n, t.type, t.op, comm_, r); });
      }
      break;
    case MpiTask::Kind::broadcast:
      for (int64_t off = 0; off < t.count && rc == MPI_SUCCESS; off += chunk) {
        char* p = static_cast<char*>(t.data) + off * element;
        const int n = int(std::min(chunk, t.count - off));
        add([&](MPI_Request* r) { return MPI_Ibcast(p, n, t.type, t.root, comm_, r); });
      }
      break;
    case MpiTask::Kind::all_gather:  // count <= INT_MAX, checked by the caller
      add([&](MPI_Request* r) {
        return MPI_Iallgather(t.send, int(t.count), t.type, t.data, int(t.count), t.type, comm_, r);
      });
      break;
    case MpiTask::Kind::barrier: add([&](MPI_Request* r) { return MPI_Ibarrier(comm_, r); }); break;
  }
  if (rc != MPI_SUCCESS) {
    // What did start must still complete before the buffer is handed back.
    MPI_Waitall(int(t.requests.size()), t.requests.data(), MPI_STATUSES_IGNORE);
    t.requests.clear();
    t.start_error = mpi_error(rc, t.what);
  }
}

bool MpiEngine::test_task(MpiTask& t) {
  if (t.requests.empty()) {
    finish(t, t.start_error);  // nothing to move (count 0), or it failed to start
    return true;
  }
  int flag = 0;
  const int rc = MPI_Testall(int(t.requests.size()), t.requests.data(), &flag, MPI_STATUSES_IGNORE);
  if (rc != MPI_SUCCESS) {
    finish(t, mpi_error(rc, t.what));
    return true;
  }
  if (!flag) return false;
  finish(t, std::string());
  return true;
}

void MpiEngine::finish(MpiTask& t, std::string error) {
  {
    std::lock_guard lock(mu_);
    t.done = true;
    t.error = std::move(error);
  }
  done_.notify_all();
}

void MpiEngine::timed_out(const MpiTask& t) {
  print_line(info_.rank, timeout_message(t.what, timeout_seconds_));
  abort_job();
}

void MpiEngine::post(const std::shared_ptr<MpiTask>& task) {
  {
    std::lock_guard lock(mu_);
    task->deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_seconds_));
    if (stop_) {
      task->done = true;
      task->error = text("rank ", info_.rank, ": ", task->what, ": the communicator is closed");
      return;
    }
    queue_.push_back(task);
  }
  wake_.notify_one();
}

void MpiEngine::wait(MpiTask& task) {
  std::unique_lock lock(mu_);
  if (task.done) return;
  ++waiters_;
  wake_.notify_one();  // poll without pausing from now on
  done_.wait(lock, [&] { return task.done; });
  --waiters_;
}

std::string MpiEngine::run(const std::shared_ptr<MpiTask>& task) {
  post(task);
  wait(*task);
  return task->error;
}

void MpiEngine::abort(const char* message) {
  if (message && *message) print_line(info_.rank, message);
  if (std::this_thread::get_id() == thread_.get_id()) abort_job();
  bool running = false;
  {
    std::lock_guard lock(mu_);
    running = initialized_ && !finished_;
    abort_ = true;
  }
  wake_.notify_all();
  // MPI_Abort ends this process too; should the communication thread be stuck, exit anyway (the
  // launcher then ends the other ranks).
  if (running) std::this_thread::sleep_for(std::chrono::seconds(10));
  ::_exit(1);
}

void MpiEngine::close(bool clean) {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    clean_ = clean;
  }
  wake_.notify_all();
  {
    std::unique_lock lock(mu_);
    while (!finished_) {
      done_.wait_for(lock, std::chrono::milliseconds(100));
      // MPI_Finalize waits for every rank: bounded like a collective.
      if (finalizing_ && !finished_ &&
          Clock::now() - finalize_started_ > std::chrono::duration<double>(timeout_seconds_)) {
        print_line(info_.rank, timeout_message("the end of the job (MPI_Finalize)", timeout_seconds_));
        ::_exit(1);
      }
    }
  }
  thread_.join();
}

}  // namespace qkv::dist::plugin
