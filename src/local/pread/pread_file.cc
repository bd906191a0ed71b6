// The pread-pool engine: inline with preadv2(RWF_NOWAIT) when the bytes are
// in the page cache, otherwise on a pool of blocking threads.
#include "local/pread/pread_file.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <deque>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "rangeio/planner.h"
#include "util/mutex.h"
#include "util/thread_name.h"

namespace rangeio::detail {
namespace {

// Grants the right to poll to one thread per core across every pool of the
// process: with many files open, more pollers than cores only take the
// cores from threads that have work.
class PollSlot {
 public:
  PollSlot()
      : held_(Pollers().fetch_add(1, std::memory_order_relaxed) < Cores()) {
    if (!held_) Pollers().fetch_sub(1, std::memory_order_relaxed);
  }
  PollSlot(const PollSlot&) = delete;
  PollSlot& operator=(const PollSlot&) = delete;
  ~PollSlot() {
    if (held_) Pollers().fetch_sub(1, std::memory_order_relaxed);
  }
  bool held() const { return held_; }

 private:
  static std::atomic<unsigned>& Pollers() {
    static std::atomic<unsigned> pollers{0};
    return pollers;
  }
  static unsigned Cores() {
    static const unsigned cores =
        std::max(1U, std::thread::hardware_concurrency());
    return cores;
  }
  const bool held_;
};

// Workers are started on demand up to `max_threads`. A worker that runs out
// of tasks polls (yielding its core) for a while before it sleeps: on a VM a
// futex sleep and wake-up costs several microseconds, more than a cached
// pread, so a read queued while a worker polls costs no system call at all.
// Workers hold a shared_ptr to the pool: if a completion callback drops the
// last reference to the file on a worker, the worker detaches itself
// instead of joining itself.
//
// The pool also runs page-cache hits for PreadFile: reads queued with
// SubmitHits are tried with preadv2(RWF_NOWAIT) by up to max_hit_threads
// helper threads, a batch at a time, and by consumers that would otherwise
// wait (RunHits through Source::Assist); a miss goes on to the blocking
// workers. Each batch's completions reach their sink in one OnReadsDone.
class PreadPool : public std::enable_shared_from_this<PreadPool> {
 public:
  PreadPool(std::shared_ptr<const FileHandle> file, uint32_t max_threads,
            uint32_t max_hit_threads)
      : file_(std::move(file)),
        max_threads_(max_threads),
        max_hit_threads_(max_hit_threads) {}

  // Reads one helper takes at a time.
  static constexpr size_t kHitBatch = 16;

  // Queues `reads` for `sink` under one lock. None is empty.
  void SubmitHits(std::span<const ReadRequest> reads, ReadSink* sink)
      EXCLUDES(hit_mu_) {
    MutexLock lk(hit_mu_, MutexLock::Spin::kYes);
    for (const ReadRequest& r : reads) hits_.push_back({r.range, sink, r.tag});
    queued_.store(hits_.size(), std::memory_order_relaxed);
    if (tls_helper_of == this) return;  // a helper: it takes it next
    if (hit_polling_ + hit_sleeping_ == 0) {
      // Every helper is busy: start the first at once, more once a batch
      // waits for each.
      if ((hit_threads_.empty() || hits_.size() >= kHitBatch) &&
          hit_threads_.size() < max_hit_threads_) {
        StartHelperLocked();
      }
      return;
    }
    const bool wake = hit_sleeping_ > 0 && hits_.size() > hit_polling_;
    lk.Unlock();
    if (wake) hit_cv_.NotifyOne();
  }

  // Runs up to `max` queued hits on this thread; returns how many.
  size_t RunHits(size_t max) EXCLUDES(hit_mu_) {
    if (queued_.load(std::memory_order_relaxed) == 0) return 0;
    MutexLock lk(hit_mu_, MutexLock::Spin::kYes);
    const HitBatch batch = TakeHitsLocked(max);
    lk.Unlock();
    return RunTakenHits(batch);
  }

  // False once a batch of queued hits mostly missed the page cache.
  bool hits_likely() const {
    return hits_likely_.load(std::memory_order_relaxed);
  }
  void NoteHits(bool likely) {
    if (hits_likely() != likely) {
      hits_likely_.store(likely, std::memory_order_relaxed);
    }
  }
  uint32_t max_hit_threads() const { return max_hit_threads_; }

  void Submit(LocalRead task) EXCLUDES(mu_) {
    MutexLock lk(mu_);
    queue_.push_back(std::move(task));
    if (polling_ + sleeping_ >= queue_.size()) {
      // Polling workers take tasks without a wake-up; a sleeper is woken
      // for every task beyond them, so blocking preads run side by side.
      const bool wake = queue_.size() > polling_;
      lk.Unlock();
      if (wake) cv_.NotifyOne();
      return;
    }
    if (threads_.size() < max_threads_) StartWorkerLocked();
  }

  void Shutdown() EXCLUDES(mu_, hit_mu_) {
    std::vector<std::thread> threads;
    {
      MutexLock lk(mu_);
      stop_ = true;
      threads.swap(threads_);
    }
    {
      MutexLock lk(hit_mu_);
      hit_stop_ = true;
      hit_stop_seen_.store(true, std::memory_order_relaxed);
      for (std::thread& t : hit_threads_) threads.push_back(std::move(t));
      hit_threads_.clear();
    }
    cv_.NotifyAll();
    hit_cv_.NotifyAll();
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
  // A queued hit: what Read was given, 32 bytes.
  struct Hit {
    ByteRange range;
    ReadSink* sink = nullptr;
    uint64_t tag = 0;
  };
  // Hits taken off the queue to run without the lock.
  struct HitBatch {
    std::array<Hit, kHitBatch> hits;
    size_t n = 0;
  };

  void StartWorkerLocked() REQUIRES(mu_) {
    threads_.emplace_back([self = shared_from_this()] {
      NameThisThread("rio-pread");
      self->Work();
    });
  }

  void Work() EXCLUDES(mu_) {
    MutexLock lk(mu_);
    for (;;) {
      if (const PollSlot slot; slot.held()) {
        ++polling_;
        for (int i = 0; queue_.empty() && !stop_ && i < kPolls; ++i) {
          lk.Unlock();
          std::this_thread::yield();
          lk.Lock();
        }
        --polling_;
      }
      while (queue_.empty() && !stop_) {
        ++sleeping_;
        cv_.Wait(lk);
        --sleeping_;
      }
      if (stop_) return;
      LocalRead t = std::move(queue_.front());
      queue_.pop_front();
      lk.Unlock();
      Finish(t);
      lk.Lock();
    }
  }

  void StartHelperLocked() REQUIRES(hit_mu_) {
    hit_threads_.emplace_back([self = shared_from_this()] {
      NameThisThread("rio-hits");
      tls_helper_of = self.get();
      self->Help();
    });
  }

  void Help() EXCLUDES(hit_mu_) {
    own_fd_ = ReopenDescription(*file_);
    struct CloseOwn {
      ~CloseOwn() {
        if (own_fd_ >= 0) ::close(own_fd_);
      }
    } close_own;
    MutexLock lk(hit_mu_, MutexLock::Spin::kYes);
    for (;;) {
      if (const PollSlot slot; slot.held() && hits_.empty() && !hit_stop_) {
        // Polls the queue's length, not the lock, so that a thread queueing
        // a read never waits for it.
        ++hit_polling_;
        lk.Unlock();
        for (int i = 0;
             queued_.load(std::memory_order_relaxed) == 0 &&
             !hit_stop_seen_.load(std::memory_order_relaxed) && i < kPolls;
             ++i) {
          std::this_thread::yield();
        }
        lk.Lock();
        --hit_polling_;
      }
      while (hits_.empty() && !hit_stop_) {
        ++hit_sleeping_;
        hit_cv_.Wait(lk);
        --hit_sleeping_;
      }
      if (hit_stop_) return;
      const HitBatch batch = TakeHitsLocked(kHitBatch);
      lk.Unlock();
      RunTakenHits(batch);
      lk.Lock(MutexLock::Spin::kNo);  // a spin would take a core from queuers
    }
  }

  // Takes up to `max` queued hits off the queue.
  HitBatch TakeHitsLocked(size_t max) REQUIRES(hit_mu_) {
    HitBatch batch;
    batch.n = std::min({max, kHitBatch, hits_.size()});
    for (size_t i = 0; i < batch.n; ++i) {
      batch.hits[i] = hits_.front();
      hits_.pop_front();
    }
    queued_.store(hits_.size(), std::memory_order_relaxed);
    return batch;
  }

  // Runs hits taken off the queue; returns how many: each is tried once
  // without blocking; those done go to their sinks, a batch per run of reads
  // of one sink, and misses to the blocking workers.
  size_t RunTakenHits(const HitBatch& batch) EXCLUDES(hit_mu_) {
    const size_t n = batch.n;
    std::array<ReadCompletion, kHitBatch> done;
    size_t n_done = 0;
    size_t misses = 0;
    ReadSink* sink = nullptr;
    for (size_t i = 0; i < n; ++i) {
      const Hit& hit = batch.hits[i];
      LocalRead r = StartLocalRead(*file_, hit.range, hit.sink, hit.tag);
      Result<Slice> bytes = Slice();
      if (!TryReadNowait(*file_, r, &bytes, own_fd_)) {
        ++misses;
        Submit(std::move(r));
        continue;
      }
      if (r.sink != sink && n_done > 0) {
        sink->OnReadsDone({done.data(), n_done});
        n_done = 0;
      }
      sink = r.sink;
      done[n_done++] = {r.tag, std::move(bytes)};
    }
    if (n_done > 0) sink->OnReadsDone({done.data(), n_done});
    if (n > 0) NoteHits(misses * 2 <= n);
    return n;
  }

  // The pool whose helper this thread is, if any.
  static thread_local const PreadPool* tls_helper_of;
  // A helper's own description of the file (ReopenDescription), or -1.
  static thread_local int own_fd_;

  // Polls before sleeping: tens of microseconds of sched_yield, more than
  // a futex sleep and wake-up would cost a read queued meanwhile.
  static constexpr int kPolls = 256;
  const std::shared_ptr<const FileHandle> file_;
  const uint32_t max_threads_;
  const uint32_t max_hit_threads_;
  std::atomic<bool> hits_likely_{true};
  // hits_.size() and hit_stop_, for threads that poll without the lock.
  std::atomic<size_t> queued_{0};
  std::atomic<bool> hit_stop_seen_{false};
  Mutex hit_mu_;
  CondVar hit_cv_;
  std::deque<Hit> hits_ GUARDED_BY(hit_mu_);
  std::vector<std::thread> hit_threads_ GUARDED_BY(hit_mu_);
  size_t hit_polling_ GUARDED_BY(hit_mu_) = 0;
  size_t hit_sleeping_ GUARDED_BY(hit_mu_) = 0;
  bool hit_stop_ GUARDED_BY(hit_mu_) = false;
  Mutex mu_;
  CondVar cv_;
  std::deque<LocalRead> queue_ GUARDED_BY(mu_);
  std::vector<std::thread> threads_ GUARDED_BY(mu_);
  size_t polling_ GUARDED_BY(mu_) = 0;
  size_t sleeping_ GUARDED_BY(mu_) = 0;
  bool stop_ GUARDED_BY(mu_) = false;
};

thread_local const PreadPool* PreadPool::tls_helper_of = nullptr;
thread_local int PreadPool::own_fd_ = -1;

class PreadFile final : public Source {
 public:
  PreadFile(std::shared_ptr<PreadPool> pool, bool try_inline, std::string why)
      : pool_(std::move(pool)),
        try_inline_(try_inline && !pool_->file().direct()),
        why_(std::move(why)) {}
  ~PreadFile() override { pool_->Shutdown(); }

  const std::string& name() const override { return pool_->file().path(); }
  Result<uint64_t> Size() override { return pool_->file().size(); }
  SourceInfo Info() const override {
    return {name(), PlannerOptions::Local(), Description()};
  }

  // With try_inline and no hit helpers, a page-cache hit completes on the
  // calling thread; only a miss goes to the pool. With hit helpers (the
  // default on more than one core), while reads keep hitting the cache they
  // are queued instead, and the helpers and the consumers waiting for them
  // (Assist) run them a batch at a time: one lock of the queue, the stream
  // and the limiter per batch, not per read. Handing each hit to a worker on
  // its own is slower than inline (the stream's and limiter's locks bounce
  // between cores on every read); in batches, with the consumer reading too,
  // it is faster than inline (bench hot-cache).
  void Read(ByteRange range, ReadSink* sink, uint64_t tag) override {
    if (range.length == 0) {
      sink->OnReadDone(tag, Slice());
      return;
    }
    if (QueueHits()) {
      const ReadRequest r{range, tag};
      pool_->SubmitHits({&r, 1}, sink);
      return;
    }
    LocalRead r = StartLocalRead(pool_->file(), range, sink, tag);
    if (try_inline_) {
      const bool done = TryReadInline(pool_->file(), r);
      pool_->NoteHits(done);
      if (done) return;
    }
    pool_->Submit(std::move(r));
  }

  void ReadMany(std::span<const ReadRequest> reads, ReadSink* sink) override {
    if (!QueueHits()) {
      for (const ReadRequest& r : reads) Read(r.range, sink, r.tag);
      return;
    }
    for (const ReadRequest& r : reads) {
      if (r.range.length == 0) {  // rare: each on its own
        for (const ReadRequest& q : reads) Read(q.range, sink, q.tag);
        return;
      }
    }
    pool_->SubmitHits(reads, sink);
  }

  // Only QueueHits() queues hits: otherwise there are none to run.
  size_t Assist(size_t max_reads) override { return pool_->RunHits(max_reads); }

  // Whether reads go to the hit queue (see LocalFileOptions::hit_threads)
  // rather than inline first.
  bool QueueHits() const {
    return try_inline_ && pool_->max_hit_threads() > 0 && pool_->hits_likely();
  }

  std::string Description() const {
    std::string d = "pread pool, up to " +
                    std::to_string(pool_->max_threads()) + " threads, " +
                    pool_->file().Describe();
    if (try_inline_) {
      d += ", inline preadv2(RWF_NOWAIT) first";
      if (pool_->max_hit_threads() > 0) {
        d += ", page-cache hits shared with up to " +
             std::to_string(pool_->max_hit_threads()) + " helper thread" +
             (pool_->max_hit_threads() == 1 ? "" : "s");
      }
    }
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
  const uint32_t cores = std::max(1u, std::thread::hardware_concurrency());
  const uint32_t hit_threads =
      options.hit_threads ? *options.hit_threads
                          : std::min(options.ThreadsOrDefault(), cores - 1);
  auto pool = std::make_shared<PreadPool>(
      std::move(file), options.ThreadsOrDefault(), hit_threads);
  return std::make_shared<PreadFile>(std::move(pool), options.try_inline,
                                     std::move(why));
}

}  // namespace rangeio::detail
