// hedge_policy.h (internal) — when a reader's reads may be hedged
// (ReaderOptions::hedge), shared by the reader, its clones and their
// streams; the scheduler (scheduler_hedge.cc) issues and settles the hedges.
//
// The rule. `hedge=DURATION` hedges after that delay; `hedge=auto` after
// the 98th percentile of the reader's recent read latency (LatencyTracker),
// never below kFloorNanos, and not before kMinSamples reads have been seen.
// A read is hedged at most once, and only while the hedges issued stay
// within hedge-budget x the reads issued. A hedge the budget has no room
// for waits, with nothing on the timer, until reads issued make room: the
// stream registers here (TakeBudget) and OnIssue hands it back to be woken.
// One the limiter's hedge reserve has no room for is tried again
// RetryDelay() later while its read is outstanding.
//
// Thread-safety: thread-safe (one mutex, a leaf: taken under a stream's).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rangeio/options.h"
#include "stream/latency_tracker.h"
#include "util/mutex.h"

namespace rangeio {
class Reader;
}  // namespace rangeio

namespace rangeio::detail {

class Scheduler;

class HedgePolicy {
 public:
  // Streams waiting for room in the budget, to be woken.
  using Waiters = std::vector<std::weak_ptr<Scheduler>>;

  // `hedge=auto`: the percentile of recent latency a read must outlast.
  // Not p95 ("The Tail at Scale"): that hedges 5% of reads even with no
  // straggler at all; p98 hedges about 2%.
  static constexpr double kAutoPercentile = 0.98;
  // Never sooner: below a millisecond a read is a page-cache or local
  // device read, where a second copy joins the same queue and wins nothing.
  static constexpr uint64_t kFloorNanos = 1'000'000;
  // Fewer samples put a 98th percentile on fewer than 2 reads.
  static constexpr uint64_t kMinSamples = 100;
  // The cached auto delay is recomputed every this many samples (a scan of
  // 976 buckets).
  static constexpr uint32_t kRefreshEvery = 32;
  // A hedge the reserve had no room for is retried after delay / 4 (at
  // least the floor): soon enough to still cut a 10x straggler's tail,
  // rarely enough that the timer stays a small cost per waiting stream.
  static constexpr uint64_t kRetryDivisor = 4;

  explicit HedgePolicy(const ReaderOptions& o)
      : auto_(o.hedge == ReaderOptions::Hedge::kAuto),
        fixed_ns_(static_cast<uint64_t>(
            std::chrono::nanoseconds(o.hedge_after).count())),
        budget_(o.hedge_budget) {}

  // `n` reads go out: counts them and returns the delay after which they
  // may be hedged, or 0 when they will not be (no budget; `auto` before
  // kMinSamples reads). When they make room for a hedge, the streams
  // waiting for it move to *wake.
  uint64_t OnIssue(uint64_t n, Waiters* wake) EXCLUDES(mu_) {
    MutexLock lk(mu_);
    primaries_ += n;
    TakeWaitersIfRoomLocked(wake);
    return budget_ > 0 ? DelayLocked() : 0;
  }

  // Takes the budget of one hedge. False when the budget is spent; then
  // `waiter`, unless null, is handed back by the OnIssue (or ReturnBudget)
  // that makes room, so that its stream looks at its waiting reads again
  // only when one of them may be hedged.
  bool TakeBudget(const std::weak_ptr<Scheduler>* waiter) EXCLUDES(mu_) {
    MutexLock lk(mu_);
    if (!RoomLocked()) {
      if (waiter != nullptr) AddWaiterLocked(*waiter);
      return false;
    }
    ++hedges_;
    return true;
  }
  // Gives back a hedge TakeBudget allowed but that was not issued; the
  // streams waiting for that room move to *wake.
  void ReturnBudget(Waiters* wake) EXCLUDES(mu_) {
    MutexLock lk(mu_);
    --hedges_;
    TakeWaitersIfRoomLocked(wake);
  }

  uint64_t RetryDelay() EXCLUDES(mu_) {
    MutexLock lk(mu_);
    return std::max(kFloorNanos, DelayLocked() / kRetryDivisor);
  }

  // One sample per read, when its first copy answers (or its last fails):
  // the primary's latency, or how long it had been out when the hedge won.
  void Settled(uint64_t latency_ns, bool hedge_won) EXCLUDES(mu_) {
    MutexLock lk(mu_);
    won_ += hedge_won ? 1 : 0;
    tracker_.Record(latency_ns);
    if (++since_refresh_ >= kRefreshEvery) {
      since_refresh_ = 0;
      auto_ns_ = tracker_.Percentile(kAutoPercentile);
    }
  }

  // How often the hedge timer looked at reads (a firing of an entry, for a
  // stream still reading) and how many entries it was given to look again
  // at reads it had already seen: what a hedge that cannot go out costs.
  // Counted for Describe() and for tests, which bound them.
  void CountCheck() { checks_.fetch_add(1, std::memory_order_relaxed); }
  void CountRecheck() { rechecks_.fetch_add(1, std::memory_order_relaxed); }
  uint64_t checks() const { return checks_.load(std::memory_order_relaxed); }
  uint64_t rechecks() const {
    return rechecks_.load(std::memory_order_relaxed);
  }

  // "hedged auto (p98, floor 1 ms, now 24000 us), budget 0.05: 3 hedges of
  // 200 reads, 2 won".
  std::string Describe() const EXCLUDES(mu_) {
    MutexLock lk(mu_);
    const std::string rule =
        auto_ ? "auto (p98, floor 1 ms, now " +
                    std::to_string(DelayLocked() / 1000) + " us)"
              : "after " + std::to_string(fixed_ns_ / 1000) + " us";
    return "hedged " + rule + ", budget " + std::to_string(budget_) + ": " +
           std::to_string(hedges_) + " hedges of " +
           std::to_string(primaries_) + " reads, " + std::to_string(won_) +
           " won; " + std::to_string(checks()) + " timer checks, " +
           std::to_string(rechecks()) + " again";
  }

 private:
  // The waiters list is pruned of streams gone once it doubles.
  static constexpr size_t kMinPrune = 16;

  bool RoomLocked() const REQUIRES(mu_) {
    return static_cast<double>(hedges_ + 1) <=
           budget_ * static_cast<double>(primaries_);
  }
  void TakeWaitersIfRoomLocked(Waiters* wake) REQUIRES(mu_) {
    if (waiters_.empty() || !RoomLocked()) return;
    wake->insert(wake->end(), waiters_.begin(), waiters_.end());
    waiters_.clear();
  }
  // Registers a waiting stream (each registers once until woken). Streams
  // that ended while waiting are dropped when the list has doubled, so it
  // holds at most about twice the streams that wait.
  void AddWaiterLocked(const std::weak_ptr<Scheduler>& waiter) REQUIRES(mu_) {
    if (waiters_.size() >= prune_at_) {
      std::erase_if(waiters_, [](const std::weak_ptr<Scheduler>& w) {
        return w.expired();
      });
      prune_at_ = std::max(kMinPrune, 2 * waiters_.size());
    }
    waiters_.push_back(waiter);
  }

  uint64_t DelayLocked() const REQUIRES(mu_) {
    if (!auto_) return fixed_ns_;
    if (tracker_.weight() < kMinSamples) return 0;  // not yet: no hedge
    return std::max(kFloorNanos, auto_ns_);
  }

  const bool auto_;
  const uint64_t fixed_ns_;
  const double budget_;

  mutable Mutex mu_;
  uint64_t primaries_ GUARDED_BY(mu_) = 0;  // reads issued
  uint64_t hedges_ GUARDED_BY(mu_) = 0;     // hedges issued
  uint64_t won_ GUARDED_BY(mu_) = 0;
  LatencyTracker tracker_ GUARDED_BY(mu_);
  uint64_t auto_ns_ GUARDED_BY(mu_) = 0;
  uint32_t since_refresh_ GUARDED_BY(mu_) = 0;
  Waiters waiters_ GUARDED_BY(mu_);
  size_t prune_at_ GUARDED_BY(mu_) = kMinPrune;
  std::atomic<uint64_t> checks_{0};
  std::atomic<uint64_t> rechecks_{0};
};

// The hedge policy of `reader` (shared with its clones), or null when it
// does not hedge: for tests.
std::shared_ptr<HedgePolicy> HedgePolicyOf(const Reader& reader);

}  // namespace rangeio::detail
