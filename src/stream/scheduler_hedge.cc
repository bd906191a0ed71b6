// The hedges of Scheduler (scheduler.h): a batch of reads is armed on the
// process's deadline timer when it goes out; at its deadline each read still
// out gets a second copy (within the reader's budget, hedge_policy.h, and
// the limiter's hedge reserve); the first copy to answer settles the read
// (Scheduler::SettleLocked) and the other is cancelled as a loser.
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

// Hedges each read of `tags` still out on its first copy. A read that
// finds no room (the budget spent, the reserve taken) is looked at again a
// little later, while it is out: a straggler stays one.
void Scheduler::FireHedges(const std::vector<uint64_t>& tags) {
  std::vector<ReadRequest> hedges;
  std::vector<uint64_t> later;
  uint64_t bytes = 0;
  {
    MutexLock lk(mu_, MutexLock::Spin::kYes);
    if (finished_ || failed_) return;
    hedge_->CountCheck();
    bool room = true;
    for (uint64_t tag : tags) {
      Slot& s = slots_[SlotOf(tag)];
      if (TagOf(SlotOf(tag), s.gen, 0) != tag || s.state != Slot::kInFlight ||
          s.hedged || s.out != 1) {
        continue;  // settled (the slot may hold another read now)
      }
      const uint64_t length = ranges_[s.index].length;
      if (room && hedge_->TakeBudget()) {
        if (limiter_->TryAcquireHedge(length)) {
          s.hedged = true;
          s.out |= 2;
          bytes += length;
          hedges.push_back({ranges_[s.index], tag | 1});
          continue;
        }
        hedge_->ReturnBudget();
      }
      room = false;
      later.push_back(tag);
    }
  }
  if (!later.empty()) {
    const uint64_t retry = hedge_->RetryDelay();
    hedge_->CountRecheck();
    ArmHedges(later.data(), later.size(), retry);
  }
  if (hedges.empty()) return;
  limiter_->RecordHedges(hedges.size(), 0, bytes);
  stats_->RecordHedges(hedges.size(), 0, bytes);
  source_->ReadMany(hedges, this);
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
