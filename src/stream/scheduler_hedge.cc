// The hedges of Scheduler (scheduler.h): a batch of reads is armed on the
// process's deadline timer when it goes out; at its deadline each read still
// out gets a second copy (within the reader's budget, hedge_policy.h, and
// the limiter's hedge reserve); the first copy to answer settles the read
// (Scheduler::SettleLocked) and the other is cancelled as a loser.
//
// A read due for a hedge that finds no room waits in the stream's
// hedge_waiting_ list, looked at again only when room may have come: when
// reads issued raise the budget (the policy wakes the stream, once however
// many of its reads wait), or RetryDelay() later when the limiter's reserve
// was taken. A spent budget puts nothing on the timer.
#include <utility>
#include <vector>

#include "stream/scheduler.h"
#include "util/clock.h"
#include "util/deadline_timer.h"

namespace rangeio::detail {

// One timer entry per batch of reads (one OnGrant's ReadMany); it holds the
// stream weakly, so a stream that is done is not kept alive by it.
void Scheduler::ArmHedges(const uint64_t* tags, uint64_t n, uint64_t delay_ns) {
  std::vector<uint64_t> batch(tags, tags + n);
  DeadlineTimer::Get().Schedule(
      NowNanos() + delay_ns,
      [self = weak_from_this(), batch = std::move(batch)] {
        if (std::shared_ptr<Scheduler> s = self.lock()) s->FireHedges(batch);
      });
}

// Hedges each read of `tags` still out on its first copy, until one finds
// no room; that one and the rest wait for room (hedge_waiting_).
void Scheduler::FireHedges(const std::vector<uint64_t>& tags) {
  std::vector<ReadRequest> hedges;
  uint64_t bytes = 0;
  HedgeWakes wake;
  bool arm_retry = false;
  {
    MutexLock lk(mu_, MutexLock::Spin::kYes);
    if (finished_ || failed_) return;
    hedge_->CountCheck();
    HedgeRoom room = HedgeRoom::kIssued;
    for (uint64_t tag : tags) {
      if (!DueForHedgeLocked(tag)) continue;  // settled, or hedged
      if (room == HedgeRoom::kIssued) {
        room = TryHedgeLocked(tag, &hedges, &bytes, &wake);
      }
      if (room != HedgeRoom::kIssued) WaitForRoomLocked(tag);
    }
    if (room == HedgeRoom::kNoReserve && !retry_armed_) {
      retry_armed_ = true;
      arm_retry = true;
    }
  }
  if (arm_retry) ArmRetry();
  if (!wake.empty()) WakeForHedges(&wake);
  if (hedges.empty()) return;
  limiter_->RecordHedges(hedges.size(), 0, bytes);
  stats_->RecordHedges(hedges.size(), 0, bytes);
  source_->ReadMany(hedges, this);
}

// The read of `tag` is still out on its first copy alone (its slot may
// hold another read now).
bool Scheduler::DueForHedgeLocked(uint64_t tag) const {
  const Slot& s = slots_[SlotOf(tag)];
  return TagOf(SlotOf(tag), s.gen, 0) == tag && s.state == Slot::kInFlight &&
         !s.hedged && s.out == 1;
}

// Issues the hedge of `tag` if the budget and the reserve have room for it.
// The stream registers with the policy (once) when the budget has none.
Scheduler::HedgeRoom Scheduler::TryHedgeLocked(uint64_t tag,
                                               std::vector<ReadRequest>* hedges,
                                               uint64_t* bytes,
                                               HedgeWakes* wake) {
  Slot& s = slots_[SlotOf(tag)];
  const uint64_t length = ranges_[s.index].length;
  bool took = false;
  if (budget_waiter_) {
    took = hedge_->TakeBudget(nullptr);
  } else {
    const std::weak_ptr<Scheduler> self = weak_from_this();
    took = hedge_->TakeBudget(&self);
    budget_waiter_ = !took;
  }
  if (!took) return HedgeRoom::kNoBudget;
  if (!limiter_->TryAcquireHedge(length)) {
    hedge_->ReturnBudget(wake);
    return HedgeRoom::kNoReserve;
  }
  s.hedged = true;
  s.out |= 2;
  *bytes += length;
  hedges->push_back({ranges_[s.index], tag | 1});
  return HedgeRoom::kIssued;
}

// Puts a read due for a hedge among those waiting for room. Settled reads'
// tags are dropped when the list reaches the number of slots: a read is in
// it at most once, so it never holds more.
void Scheduler::WaitForRoomLocked(uint64_t tag) {
  if (hedge_waiting_.size() >= slots_.size()) {
    size_t kept = 0;
    for (uint64_t t : hedge_waiting_) {
      if (DueForHedgeLocked(t)) hedge_waiting_[kept++] = t;
    }
    hedge_waiting_.resize(kept);
  }
  hedge_waiting_.push_back(tag);
}

// The reserve was taken: the waiting reads are looked at again a little
// later, one timer entry for the whole stream.
void Scheduler::ArmRetry() {
  hedge_->CountRecheck();
  DeadlineTimer::Get().Schedule(
      NowNanos() + hedge_->RetryDelay(), [self = weak_from_this()] {
        if (std::shared_ptr<Scheduler> s = self.lock()) s->RecheckHedges(true);
      });
}

// Streams of this reader whose waiting reads the budget now has room for
// look at them again, on the timer thread (the caller may be a pump inside
// OnGrant, or a stream holding none of theirs).
void Scheduler::WakeForHedges(HedgeWakes* wake) {
  const uint64_t now = NowNanos();
  for (std::weak_ptr<Scheduler>& w : *wake) {
    if (w.expired()) continue;
    hedge_->CountRecheck();
    DeadlineTimer::Get().Schedule(now, [w = std::move(w)] {
      if (std::shared_ptr<Scheduler> s = w.lock()) s->RecheckHedges(false);
    });
  }
}

// Looks again at the reads waiting for room: after a reserve retry's delay
// (`retry`), or woken by room in the budget.
void Scheduler::RecheckHedges(bool retry) {
  std::vector<uint64_t> tags;
  {
    MutexLock lk(mu_);
    if (retry) {
      retry_armed_ = false;
    } else {
      budget_waiter_ = false;
    }
    tags.swap(hedge_waiting_);
  }
  FireHedges(tags);
}

// A losing copy came back: forgets it, and returns its read's hedge permit
// (the loser is the last copy out). False when `tag` is no loser.
bool Scheduler::TakeLoserLocked(uint64_t tag, Settled* out) {
  for (size_t i = 0; i < losers_.size(); ++i) {
    if (losers_[i].tag != tag) continue;
    out->hedge_bytes += losers_[i].bytes;
    ++out->hedges_done;
    losers_[i] = losers_.back();
    losers_.pop_back();
    return true;
  }
  return false;
}

}  // namespace rangeio::detail
