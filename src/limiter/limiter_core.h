// limiter_core.h (internal) — permits, response budget and fair admission.
//
// A stream (a PermitClient) asks for admission of its reads [next, stop) by
// calling Extend(); it then waits in the queue as one entry. The pump admits
// reads while an I/O permit is free and the response budget can take the next
// read's size, one read per turn to the waiting client with the fewest
// undelivered results when several wait,
// and calls OnGrant() without holding the lock. Any thread may pump; one that
// is already pumping this limiter further up its stack leaves the work to
// that outer loop, so inline completions (memory, page cache) iterate instead
// of recursing.
//
// Thread-safety: every method is thread-safe. Lock order: a client's own
// mutex may be held when calling into LimiterCore; LimiterCore never calls a
// client while holding its mutex.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "rangeio/limiter.h"
#include "rangeio/stats.h"
#include "util/mutex.h"
#include "util/stats_recorder.h"

namespace rangeio::detail {

class LimiterCore;

class PermitClient {
 public:
  explicit PermitClient(uint64_t total) : total_(total) {}
  virtual ~PermitClient() = default;

  // Reads [first, first + n) are admitted: each holds an I/O permit and its
  // share of the response budget. Called without the limiter's lock, possibly
  // after the client withdrew (it must then hand the permits back).
  virtual void OnGrant(uint64_t first, uint64_t n) = 0;
  // Budget bytes of read i. Must be immutable: called under the limiter lock.
  virtual uint64_t CostOf(uint64_t i) const = 0;

  // The client calls this as it hands a result to its consumer (or drops
  // one): admission favours clients with fewer undelivered results. Calls
  // must not overlap (the client makes them under its own lock): the count
  // advances with a load and a store, as an atomic read-modify-write on
  // every read cost about as much as a lock.
  void Delivered(uint64_t n) {
    delivered_.store(delivered_.load(std::memory_order_relaxed) + n,
                     std::memory_order_relaxed);
  }

  // A paused client is taken out of the queue by the next pump that meets
  // it and granted nothing until it calls Extend() again, which it must do
  // after un-pausing (a pump may have dropped it meanwhile). A pass of the
  // pump grants a client at most its pass limit before calling OnGrant.
  // Both are set by the client (Scheduler: reads that complete inline
  // wait for the consumer a few at a time, see kInlineBacklog).
  void SetPaused(bool paused) {
    paused_.store(paused, std::memory_order_release);
  }
  void SetPassLimit(uint32_t n) {
    pass_limit_.store(n, std::memory_order_relaxed);
  }
  // Priority::kHigh: served before every other waiting client. Set before
  // the first Extend().
  void SetHighPriority(bool high) {
    high_priority_.store(high, std::memory_order_relaxed);
  }

 private:
  friend class LimiterCore;
  const uint64_t total_;
  // Guarded by the mu_ of the LimiterCore the client waits in, which the
  // analysis cannot name from here: only LimiterCore touches them, under it.
  uint64_t next_ = 0;
  uint64_t stop_ = 0;
  bool queued_ = false;
  // Reads delivered (or dropped): written by the client under its own lock,
  // read under the limiter's. Admitted reads not yet delivered are next_
  // minus this; a delivery is never seen before its read's admission.
  std::atomic<uint64_t> delivered_{0};
  std::atomic<bool> paused_{false};
  std::atomic<uint32_t> pass_limit_{UINT32_MAX};
  std::atomic<bool> high_priority_{false};
  uint64_t UndeliveredLocked() const {
    const uint64_t d = delivered_.load(std::memory_order_relaxed);
    return next_ > d ? next_ - d : 0;
  }
};

class LimiterCore : public std::enable_shared_from_this<LimiterCore> {
 public:
  // `hedge_reserve`: permits for hedged reads only (Options::HedgeReserve).
  LimiterCore(uint32_t io_concurrency, uint32_t budget_count,
              uint64_t budget_bytes, uint32_t hedge_reserve = 1);

  uint32_t io_concurrency() const { return io_; }
  uint32_t budget_count() const { return count_; }
  uint64_t budget_bytes() const { return bytes_; }

  // Lets `c` be admitted up to min(total, next + count) reads, queues it and
  // pumps (possibly calling c->OnGrant on this thread before returning).
  void Extend(const std::shared_ptr<PermitClient>& c, uint64_t count)
      EXCLUDES(mu_);
  // Removes `c` from the queue; it is granted nothing more.
  void Withdraw(PermitClient* c) EXCLUDES(mu_);

  // `n` backend reads finished together: their I/O permits come back (one
  // lock for all).
  void ReadsDone(size_t n) EXCLUDES(mu_);
  // A stream adds its finished reads to the stats under its own lock, with
  // its deliveries, so that a consumer that has seen the end of a stream
  // sees all of its reads counted here too.
  void RecordReads(const uint64_t* latency_ns, size_t n, uint64_t bytes,
                   uint64_t errors) EXCLUDES(mu_);
  // A response's budget comes back (its last Slice was released, or it
  // failed or was dropped before delivery).
  void ReleaseResponse(uint64_t bytes) { ReleaseResponses(1, bytes); }
  // `n` responses of `bytes` in all, under one lock.
  void ReleaseResponses(uint64_t n, uint64_t bytes) EXCLUDES(mu_);
  // Both of the above for a granted read that was never issued.
  void ReturnUnused(uint64_t bytes) EXCLUDES(mu_);
  void RecordDelivered(uint64_t ranges, uint64_t bytes, uint64_t cancelled)
      EXCLUDES(mu_);
  void RecordRetried(uint64_t ranges) EXCLUDES(mu_) {
    MutexLock lk(mu_);
    stats_.ranges_retried += ranges;
  }

  // A hedge (the scheduler's, scheduler_hedge.cc) takes one of the
  // hedge_reserve permits, which also stands for its response of `bytes`,
  // outside the I/O permits and the response budget, so hedges never delay
  // admission and admission never blocks a hedge: occupancy peaks at the
  // budgets plus the reserve. False (no hedge) when the reserve is taken.
  bool TryAcquireHedge(uint64_t bytes) EXCLUDES(mu_);
  // Both copies of `n` hedged reads of `bytes` in all are out of the
  // backend.
  void ReleaseHedges(uint64_t n, uint64_t bytes) EXCLUDES(mu_);
  void RecordHedges(uint64_t issued, uint64_t won, uint64_t bytes)
      EXCLUDES(mu_);
  uint32_t hedge_reserve() const { return hedge_reserve_; }

  Stats GetStats() const EXCLUDES(mu_);

  struct Usage {
    uint64_t in_flight;
    uint64_t retained_count;
    uint64_t retained_bytes;
  };
  bool Stalled() const EXCLUDES(mu_) {
    MutexLock lk(mu_);
    return in_flight_ == 0 && !queue_.empty();
  }
  Usage Occupancy() const EXCLUDES(mu_) {
    MutexLock lk(mu_);
    return {in_flight_, retained_count_, retained_bytes_};
  }

 public:
  struct Grant {
    std::shared_ptr<PermitClient> client;
    uint64_t first;
    uint64_t n;
  };
  struct PumpFrame;  // limiter.cc

 private:
  void ApplyInlineDoneLocked(PumpFrame& frame) REQUIRES(mu_);
  std::shared_ptr<LimiterCore> ReleaseResponsesLocked(uint64_t n,
                                                      uint64_t bytes)
      REQUIRES(mu_);
  // Takes a client out of queue_.
  void EraseLocked(
      const std::deque<std::shared_ptr<PermitClient>>::iterator& it)
      REQUIRES(mu_);
  std::deque<std::shared_ptr<PermitClient>>::iterator NextClientLocked()
      REQUIRES(mu_);
  bool Fits(uint64_t cost) const REQUIRES(mu_);
  // Admits and issues what fits; drops mu_ around the OnGrant calls and
  // returns with it released.
  void PumpAndUnlock() RELEASE(mu_);
  // Takes the next grant off the queue; false when nothing (more) fits.
  bool AdmitOneLocked(std::vector<Grant>& grants, bool* pass_full)
      REQUIRES(mu_);
  void UpdatePeaksLocked() REQUIRES(mu_);

  const uint32_t io_;
  const uint32_t count_;
  const uint64_t bytes_;
  const uint32_t hedge_reserve_;

  mutable Mutex mu_;
  uint64_t hedges_ GUARDED_BY(mu_) = 0;  // hedge reserve permits taken
  uint64_t hedge_bytes_ GUARDED_BY(mu_) = 0;
  std::deque<std::shared_ptr<PermitClient>> queue_ GUARDED_BY(mu_);
  size_t high_queued_ GUARDED_BY(mu_) = 0;  // high-priority clients in queue_
  uint64_t in_flight_ GUARDED_BY(mu_) = 0;
  uint64_t retained_count_ GUARDED_BY(mu_) = 0;
  uint64_t retained_bytes_ GUARDED_BY(mu_) = 0;
  Stats stats_ GUARDED_BY(mu_);
  // Set while retained_count_ > 0 (see AdmitOneLocked).
  std::shared_ptr<LimiterCore> self_ GUARDED_BY(mu_);
};

// The library's way to a Limiter's core (the public header hands out no
// detail:: type).
struct LimiterAccess {
  static const std::shared_ptr<LimiterCore>& Core(const Limiter& limiter) {
    return limiter.core_;
  }
};

}  // namespace rangeio::detail
