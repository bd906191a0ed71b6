// The consumer's side of Scheduler (scheduler.h): handing out results in
// request or completion order, and waiting for them. scheduler.cc holds the
// admission and completion side, run by the limiter's and backends' threads.
#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include "stream/scheduler.h"
#include "util/clock.h"

namespace rangeio::detail {

// --- Delivery ---

Result<std::optional<RangeResult>> Scheduler::Poll(bool* pending) {
  RANGEIO_ASSIGN_OR_RETURN(std::optional<RawResult> raw, NextRaw(pending));
  if (!raw) return std::optional<RangeResult>();
  if (!raw->status.ok()) {  // a range's own error (per-range errors)
    return std::optional<RangeResult>(
        RangeResult{raw->index, Slice(), std::move(raw->status)});
  }
  const std::byte* data = raw->lease->bytes.data();
  const size_t size = raw->lease->bytes.size();
  // The lease becomes the Slice's owner: no extra refcount traffic.
  return std::optional<RangeResult>(
      RangeResult{raw->index, Slice(std::move(raw->lease), data, size), {}});
}

// Hands out the next result as soon as there is one; otherwise, in this
// order: resumes a paused admission, gives up on a stall past its deadline,
// helps the source run its queued reads, spins briefly, and sleeps.
Result<std::optional<RawResult>> Scheduler::NextRaw(bool* pending) {
  MutexLock lk(mu_, MutexLock::Spin::kYes);
  int spins = 0;
  bool assisted = false;  // Assist found nothing since the last result
  for (;;) {
    if (!final_status_.ok()) return final_status_;
    if (delivered_ == ranges_.size()) return EndLocked();
    if (std::optional<uint64_t> tag = ReadyTagLocked()) {
      if (slots_[*tag].error && per_range_errors_) {
        RawResult failed = TakeRangeErrorLocked(*tag);
        lk.Unlock();
        // Its lease keeps the read's budget, made here on the consumer's
        // thread as a result's: a PlannedStream hands it to the ranges it
        // reads again (their stream is queued before the budget comes back).
        failed.lease = std::make_shared<Lease>(
            limiter_.get(), ranges_[failed.index].length, Slice());
        return std::optional<RawResult>(std::move(failed));
      }
      if (slots_[*tag].error) {
        const uint64_t cost = TakeErrorLocked(*tag);
        Status error = final_status_;
        lk.Unlock();
        Finish();
        limiter_->ReleaseResponses(1, cost);
        return error;
      }
      Taken taken = TakeResultLocked(*tag);
      lk.Unlock();
      if (taken.extend) ExtendAdmission();
      return std::optional<RawResult>(MakeRaw(std::move(taken)));
    }
    FlushStatsLocked();
    if (paused_) {  // nothing ready: never wait on a pause
      const bool extend = ResumeLocked();
      lk.Unlock();
      if (extend) ExtendAdmission();
      lk.Lock();
      continue;
    }
    if (StalledLocked()) {
      const uint64_t now = NowNanos();
      if (StallExpiredLocked(now)) {
        Status error = final_status_;
        lk.Unlock();
        Finish();
        return error;
      }
      if (pending) {
        *pending = true;
        return std::optional<RawResult>();
      }
      SleepUntilStallDeadlineLocked(lk, now);
      continue;
    }
    stall_deadline_ = 0;
    if (in_flight_ > 0 && !assisted && !listener_) {
      assisted = AssistLocked();
      continue;
    }
    if (pending) {
      *pending = true;
      return std::optional<RawResult>();
    }
    if (spins < spin_limit_ && in_flight_ > 0) {
      SpinLocked(&spins);
      continue;
    }
    if (WaitsForAdmissionLocked()) {
      // Only this stream's own events wake it, and a stall can begin
      // without one (another stream's last read completes into the
      // budget): look again after a while rather than sleep for ever.
      SleepAtMostLocked(lk, kStallRecheck);
      continue;
    }
    SleepLocked(lk);
  }
}

std::optional<uint64_t> Scheduler::ReadyTagLocked() {
  if (delivery_ == Delivery::kAsCompleted) {
    if (ready_.empty()) return std::nullopt;
    const uint64_t tag = ready_.front();
    ready_.pop_front();
    return tag;
  }
  const uint64_t tag = delivered_ % slots_.size();
  const Slot& s = slots_[tag];
  if (s.state == Slot::kDone && s.index == delivered_) return tag;
  return std::nullopt;
}

// Frees the slot of a delivered result and counts the delivery; resumes a
// paused admission once the consumer has taken half the backlog.
Scheduler::Taken Scheduler::TakeResultLocked(uint64_t tag) {
  Slot& s = slots_[tag];
  Taken taken{s.index, ranges_[s.index].length, std::move(s.bytes), false};
  stall_deadline_ = 0;
  if (record_deliveries_) unflushed_bytes_ += taken.cost;
  s.state = Slot::kFree;
  ReleaseSlot(tag);
  ++delivered_;
  Delivered(1);
  if (record_deliveries_) ++unflushed_;
  if (delivered_ == ranges_.size() || unflushed_ >= kFlushEvery) {
    FlushStatsLocked();
  }
  if (paused_ && BacklogLocked() <= kInlineBacklog / 2) {
    taken.extend = ResumeLocked();
  }
  return taken;
}

// With per-range errors, a failed read is its range's result: delivered (and
// counted as a delivery, of no bytes) with its error, the stream going on.
// Its budget goes with it (the caller makes the lease).
RawResult Scheduler::TakeRangeErrorLocked(uint64_t tag) {
  Slot& s = slots_[tag];
  RawResult out{s.index, nullptr, std::move(*s.error)};
  s.error.reset();
  s.state = Slot::kFree;
  ReleaseSlot(tag);
  stall_deadline_ = 0;
  ++delivered_;
  Delivered(1);
  if (record_deliveries_) ++unflushed_;
  if (delivered_ == ranges_.size()) FlushStatsLocked();
  return out;
}

// A failed read's error becomes the stream's final status: the error is
// this read's delivery (the read is not "cancelled"). Returns the budget
// its slot held, to be released after unlocking.
uint64_t Scheduler::TakeErrorLocked(uint64_t tag) {
  Slot& s = slots_[tag];
  final_status_ = std::move(*s.error);
  s.error.reset();
  const uint64_t cost = ranges_[s.index].length;
  s.state = Slot::kFree;
  ReleaseSlot(tag);
  return cost;
}

// Every range is delivered: the stream's stats are final and it lets go of
// itself (the caller's RangeStream still holds it).
Result<std::optional<RawResult>> Scheduler::EndLocked() {
  FlushStatsLocked();
  std::shared_ptr<Scheduler> self;
  ReleaseSelfIfDoneLocked(&self);
  return std::optional<RawResult>();
}

// Made here, on the consumer's thread, which also frees it: the allocator's
// per-thread cache serves both ends.
RawResult Scheduler::MakeRaw(Taken taken) {
  return RawResult{taken.index,
                   std::make_shared<Lease>(limiter_.get(), taken.cost,
                                           std::move(taken.bytes)),
                   {}};
}

// --- Waiting for a result ---

// Rather than wait, runs reads the source has queued for its own threads
// (page-cache hits), with mu_ dropped: this thread's results come sooner and
// the source's threads are not the only ones working. True when the source
// had nothing to run.
bool Scheduler::AssistLocked() {
  mu_.Unlock();
  const bool nothing = source_->Assist(kAssistReads) == 0;
  mu_.LockSpinning();
  return nothing;
}

// Results from other threads often arrive within microseconds; a futex sleep
// and wake-up would cost more than the wait. The spin drops mu_ and watches
// a counter, not the lock: a completion never has to wait for the
// consumer's lock (bench local shows the cost when it did).
//
// Adaptive, as an adaptive mutex is: where results come in bursts with long
// gaps (a disk's completions reaped together, an object store's tens of
// milliseconds) spinning only burns the core, so a spin that found nothing
// halves the next one and one that found a result doubles it, within
// 1..kSpins.
void Scheduler::SpinLocked(int* spins) {
  const uint64_t seen = changes_.load(std::memory_order_relaxed);
  const int limit = spin_limit_;
  mu_.Unlock();
  bool changed = false;
  do {
    ++*spins;
    std::this_thread::yield();
    changed = changes_.load(std::memory_order_acquire) != seen;
  } while (!changed && *spins < limit);
  mu_.LockSpinning();
  spin_limit_ = changed ? std::min(kSpins, spin_limit_ * 2)
                        : std::max(1, spin_limit_ / 2);
}

void Scheduler::SleepLocked(MutexLock& lk) {
  consumer_waiting_ = true;
  cv_.Wait(lk);
  consumer_waiting_ = false;
}

void Scheduler::SleepAtMostLocked(MutexLock& lk,
                                  std::chrono::nanoseconds timeout) {
  consumer_waiting_ = true;
  cv_.WaitFor(lk, timeout);
  consumer_waiting_ = false;
}

// Nothing of this stream is in flight and reads are left to admit: what it
// waits for is the limiter, whose stall StalledLocked checks.
bool Scheduler::WaitsForAdmissionLocked() const {
  return in_flight_ == 0 && !failed_ && n_submitted_ < ranges_.size();
}

uint64_t Scheduler::RecheckAt() const {
  MutexLock lk(mu_);
  if (stall_deadline_ != 0) return stall_deadline_;
  if (WaitsForAdmissionLocked()) {
    return NowNanos() +
           std::chrono::duration_cast<std::chrono::nanoseconds>(kStallRecheck)
               .count();
  }
  return 0;
}

// A stalled consumer waits up to stall_timeout_ from the first time it
// finds the stream stalled; past that, the stream fails with StallError.
bool Scheduler::StallExpiredLocked(uint64_t now) {
  if (stall_deadline_ == 0) {
    stall_deadline_ =
        now +
        std::chrono::duration_cast<std::chrono::nanoseconds>(stall_timeout_)
            .count();
  }
  if (now < stall_deadline_) return false;
  final_status_ = StallError();
  return true;
}

void Scheduler::SleepUntilStallDeadlineLocked(MutexLock& lk, uint64_t now) {
  SleepAtMostLocked(lk, std::chrono::nanoseconds(stall_deadline_ - now));
}

// This stream waits for admission while no read is in flight anywhere on
// its limiter: no completion can free anything, only consumers releasing
// results can (this caller's held slices, or other streams' undelivered
// results, e.g. a k-way merge consuming many streams from one thread).
bool Scheduler::StalledLocked() const {
  if (in_flight_ != 0 || failed_ || n_submitted_ >= ranges_.size()) {
    return false;
  }
  return limiter_->Occupancy().in_flight == 0;
}

Status Scheduler::StallError() const {
  const LimiterCore::Usage u = limiter_->Occupancy();
  return Status::ResourceExhausted(
      "reading '" + source_->name() + "': no read could be admitted for " +
      std::to_string(stall_timeout_.count()) +
      " ms because the response budget (" +
      std::to_string(limiter_->budget_count()) + " responses, " +
      std::to_string(limiter_->budget_bytes()) +
      " bytes) is held by results read but not released: " +
      std::to_string(u.retained_count) + " responses (" +
      std::to_string(u.retained_bytes) +
      " bytes): slices the caller still "
      "holds, or results waiting in other streams; release slices, consume "
      "the other streams on this limiter "
      "concurrently, or raise response-budget-count / response-budget-bytes");
}

}  // namespace rangeio::detail
