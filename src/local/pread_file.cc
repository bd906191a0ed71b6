// The pread-pool engine: inline with preadv2(RWF_NOWAIT) when the bytes are
// in the page cache, otherwise on a pool of blocking threads.
#include "local/pread_file.h"

#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "thread_name.h"

namespace rangeio::detail {
namespace {

// Workers are started on demand up to `max_threads`. A worker that runs out
// of tasks polls (yielding its core) for a while before it sleeps: on a VM a
// futex sleep and wake-up costs several microseconds, more than a cached
// pread, so a read queued while a worker polls costs no system call at all.
// Workers hold a shared_ptr to the pool: if a completion callback drops the
// last reference to the file on a worker, the worker detaches itself
// instead of joining itself.
class PreadPool : public std::enable_shared_from_this<PreadPool> {
 public:
  PreadPool(std::shared_ptr<const FileHandle> file, uint32_t max_threads)
      : file_(std::move(file)), max_threads_(max_threads) {}

  void Submit(LocalRead task) {
    std::unique_lock lk(mu_);
    queue_.push_back(std::move(task));
    if (polling_ + sleeping_ >= queue_.size()) {
      // Polling workers take tasks without a wake-up; a sleeper is woken
      // for every task beyond them, so blocking preads run side by side.
      const bool wake = queue_.size() > polling_;
      lk.unlock();
      if (wake) cv_.notify_one();
      return;
    }
    if (threads_.size() < max_threads_) StartWorkerLocked();
  }

  void Shutdown() {
    std::vector<std::thread> threads;
    {
      std::lock_guard lk(mu_);
      stop_ = true;
      threads.swap(threads_);
    }
    cv_.notify_all();
    for (std::thread& t : threads) {
      if (t.get_id() == std::this_thread::get_id()) {
        t.detach();
      } else {
        t.join();
      }
    }
  }

  // Reads the rest of `r` with blocking pread and completes it.
  void Finish(LocalRead& r) {
    Status error;
    for (;;) {
      const ssize_t n = ::pread(file_->fd(), r.next_dst(), r.remaining(),
                                static_cast<off_t>(r.next_offset()));
      switch (Advance(*file_, r, n < 0 ? -errno : n, "pread", &error)) {
        case ReadStep::kDone:
          Complete(r, Status::OK());
          return;
        case ReadStep::kFailed:
          Complete(r, std::move(error));
          return;
        case ReadStep::kMore:
          break;
      }
    }
  }

  const FileHandle& file() const { return *file_; }
  uint32_t max_threads() const { return max_threads_; }

 private:
  void StartWorkerLocked() {
    threads_.emplace_back([self = shared_from_this()] {
      NameThisThread("rio-pread");
      self->Work();
    });
  }

  void Work() {
    std::unique_lock lk(mu_);
    for (;;) {
      ++polling_;
      for (int i = 0; queue_.empty() && !stop_ && i < kPolls; ++i) {
        lk.unlock();
        std::this_thread::yield();
        lk.lock();
      }
      --polling_;
      while (queue_.empty() && !stop_) {
        ++sleeping_;
        cv_.wait(lk);
        --sleeping_;
      }
      if (stop_) return;
      LocalRead t = std::move(queue_.front());
      queue_.pop_front();
      lk.unlock();
      Finish(t);
      lk.lock();
    }
  }

  // Polls before sleeping: about 50-100 us of sched_yield here.
  static constexpr int kPolls = 256;
  const std::shared_ptr<const FileHandle> file_;
  const uint32_t max_threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<LocalRead> queue_;       // GUARDED_BY(mu_)
  std::vector<std::thread> threads_;  // GUARDED_BY(mu_)
  size_t polling_ = 0;                // GUARDED_BY(mu_)
  size_t sleeping_ = 0;               // GUARDED_BY(mu_)
  bool stop_ = false;                 // GUARDED_BY(mu_)
};

class PreadFile final : public Source {
 public:
  PreadFile(std::shared_ptr<PreadPool> pool, bool try_inline, std::string why)
      : pool_(std::move(pool)),
        try_inline_(try_inline && !pool_->file().direct()),
        why_(std::move(why)) {}
  ~PreadFile() override { pool_->Shutdown(); }

  const std::string& name() const override { return pool_->file().path(); }
  Result<uint64_t> Size() override { return pool_->file().size(); }
  PlannerOptions DefaultPlannerOptions() const override {
    return PlannerOptions::Local();
  }

  // With try_inline, a page-cache hit completes on the calling thread;
  // only a miss goes to the pool. Handing hits to polling workers as well,
  // so that two cores share them, measured slower on this 2-core VM (1.65 us
  // against 1.3 us per cached 4 KiB read: the stream's and limiter's locks
  // then bounce between cores on every read).
  void Read(ByteRange range, ReadSink* sink, uint64_t tag) override {
    if (range.length == 0) {
      sink->OnReadDone(tag, Slice());
      return;
    }
    LocalRead r = StartLocalRead(pool_->file(), range, sink, tag);
    if (try_inline_ && TryReadInline(pool_->file(), r)) return;
    pool_->Submit(std::move(r));
  }

  std::string Describe() const override {
    std::string d = "pread pool, up to " +
                    std::to_string(pool_->max_threads()) + " threads, " +
                    pool_->file().Describe();
    if (try_inline_) d += ", inline preadv2(RWF_NOWAIT) first";
    if (!why_.empty()) d += "; " + why_;
    return d;
  }

 private:
  const std::shared_ptr<PreadPool> pool_;
  const bool try_inline_;
  const std::string why_;
};

}  // namespace

std::shared_ptr<Source> MakePreadFile(std::shared_ptr<const FileHandle> file,
                                      const LocalFileOptions& options,
                                      std::string why) {
  auto pool = std::make_shared<PreadPool>(std::move(file), options.threads);
  return std::make_shared<PreadFile>(std::move(pool), options.try_inline,
                                     std::move(why));
}

}  // namespace rangeio::detail
