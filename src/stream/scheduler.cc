// The admission and completion side of Scheduler (scheduler.h), run by
// the limiter's and the backends' threads; scheduler_hedge.cc holds the
// hedges, scheduler_delivery.cc the consumer's side.
#include "stream/scheduler.h"

#include <algorithm>
#include <utility>

#include "util/clock.h"

namespace rangeio::detail {
namespace {

// The stream whose OnGrant is running on this thread. A read it issues that
// completes inline (OnReadDone inside OnGrant) needs no reference of its own
// to the stream: the limiter's pump holds one for the OnGrant call.
thread_local const void* tls_granting = nullptr;

class GrantScope {
 public:
  explicit GrantScope(const void* stream)
      : outer_(std::exchange(tls_granting, stream)) {}
  GrantScope(const GrantScope&) = delete;
  GrantScope& operator=(const GrantScope&) = delete;
  ~GrantScope() { tls_granting = outer_; }

 private:
  const void* const outer_;
};

}  // namespace

Scheduler::Scheduler(std::shared_ptr<Source> source,
                     std::shared_ptr<LimiterCore> limiter,
                     std::shared_ptr<StatsRecorder> stats,
                     std::vector<ByteRange> ranges, SchedulerConfig config)
    : PermitClient(ranges.size()),
      source_(std::move(source)),
      limiter_(std::move(limiter)),
      stats_(std::move(stats)),
      ranges_(std::move(ranges)),
      delivery_(config.delivery),
      per_range_errors_(config.per_range_errors),
      hedge_(std::move(config.hedge)),
      stall_timeout_(config.stall_timeout),
      describe_(std::move(config.describe)),
      record_deliveries_(describe_ == nullptr),
      slots_(std::min<uint64_t>(ranges_.size(), limiter_->budget_count())) {
  SetHighPriority(config.priority == Priority::kHigh);
  if (delivery_ == Delivery::kAsCompleted) {
    free_slots_.reserve(slots_.size());
    for (size_t i = slots_.size(); i > 0; --i) free_slots_.push_back(i - 1);
  }
}

void Scheduler::Start() {
  if (ranges_.empty()) return;
  {
    MutexLock lk(mu_);
    keepalive_ = shared_from_this();
  }
  limiter_->Extend(shared_from_this(), ranges_.size());
}

void Scheduler::SetListener(std::shared_ptr<StreamListener> listener) {
  MutexLock lk(mu_);
  listener_ = std::move(listener);
}

// Tells the listener (copied under mu_) of a change, with mu_ released.
void Scheduler::NotifyListener(
    const std::shared_ptr<StreamListener>& listener) {
  if (listener) listener->OnStreamChange();
}

// --- Admission ---

void Scheduler::OnGrant(uint64_t first, uint64_t n) {
  // Slots are taken under the lock in batches and the reads issued outside
  // it: a backend may complete a read inline, re-entering OnReadDone.
  constexpr uint64_t kBatch = 64;
  std::array<uint64_t, kBatch> tags;
  std::array<ReadRequest, kBatch> reads;
  const GrantScope scope(this);
  while (n > 0) {
    const uint64_t k = std::min(n, kBatch);
    if (!TakeSlots(first, k, tags.data())) {
      for (uint64_t i = first; i < first + n; ++i) {
        limiter_->ReturnUnused(ranges_[i].length);
      }
      std::shared_ptr<StreamListener> listener;
      {
        MutexLock lk(mu_);
        listener = listener_;
      }
      NotifyListener(listener);
      return;
    }
    for (uint64_t j = 0; j < k; ++j) reads[j] = {ranges_[first + j], tags[j]};
    // The delay is taken before the reads go out: one that completes
    // inline must find its hedge state counted.
    HedgeWakes wake;  // streams these reads make room for a hedge for
    const uint64_t delay = hedge_ ? hedge_->OnIssue(k, &wake) : 0;
    source_->ReadMany({reads.data(), k}, this);
    // Armed once the reads are out, so no hedge reaches the backend before
    // its primary; a read that completed meanwhile leaves it nothing to do.
    if (delay != 0) ArmHedges(tags.data(), k, delay);
    if (!wake.empty()) WakeForHedges(&wake);
    first += k;
    n -= k;
  }
}

// Marks reads [first, first + k) in flight in fresh slots, writing their
// tags to `tags`; false when the stream takes no more reads (nothing is
// taken then).
bool Scheduler::TakeSlots(uint64_t first, uint64_t k, uint64_t* tags) {
  const uint64_t now = NowNanos();
  MutexLock lk(mu_, MutexLock::Spin::kYes);
  if (finished_ || failed_) return false;
  for (uint64_t j = 0; j < k; ++j) {
    const std::optional<uint64_t> slot = AcquireSlot(first + j);
    if (!slot) {
      for (uint64_t u = 0; u < j; ++u) UntakeSlot(tags[u]);
      failed_ = true;
      final_status_ = Status::Internal(
          "rangeio: no free result slot for " + RangeContext(first + j) +
          " (response budget accounting is broken)");
      ChangedLocked();
      cv_.NotifyAll();
      return false;
    }
    Slot& s = slots_[*slot];
    s.index = first + j;
    s.state = Slot::kInFlight;
    s.out = 1;
    s.hedged = false;
    s.submit_ns = now;
    tags[j] = TagOf(*slot, ++s.gen, 0);
  }
  in_flight_ += k;
  n_submitted_ = first + k;
  return true;
}

// Ordered delivery: the undelivered admitted reads are a contiguous run of
// at most budget-count indexes, so index % slots is collision-free. In
// completion order they are not contiguous: slots come from a free list.
// Every occupied slot holds response budget, so a free slot always exists
// for an admitted read; std::nullopt means that invariant broke (a bug).
std::optional<uint64_t> Scheduler::AcquireSlot(uint64_t index) {
  if (delivery_ == Delivery::kOrdered) {
    const uint64_t slot = index % slots_.size();
    if (slots_[slot].state != Slot::kFree) return std::nullopt;
    return slot;
  }
  if (free_slots_.empty()) return std::nullopt;
  const uint64_t slot = free_slots_.back();
  free_slots_.pop_back();
  return slot;
}

void Scheduler::UntakeSlot(uint64_t tag) {
  slots_[SlotOf(tag)].state = Slot::kFree;
  ReleaseSlot(SlotOf(tag));
}

void Scheduler::ReleaseSlot(uint64_t slot) {
  if (delivery_ == Delivery::kAsCompleted) free_slots_.push_back(slot);
}

// Reads that complete inline (memory, page-cache hits) would otherwise run
// ahead of the consumer as far as the response budget allows (2C): every
// result would then wait for 2C others, its buffer long out of the CPU's
// caches when the consumer gets it and when the pool hands it to the next
// read. So while this stream's reads complete inline and none is in flight,
// admission pauses once kInlineBacklog results wait, and resumes when the
// consumer has taken half of them; a pump grants such a stream
// kInlineBacklog reads at a time (bench hot-cache shows the gain). Reads
// that complete on other threads (real I/O) never pause admission.
void Scheduler::NoteCompletionLocked(bool inline_done) {
  if (inline_done != inline_pass_) {
    inline_pass_ = inline_done;
    SetPassLimit(inline_done ? kInlineBacklog : UINT32_MAX);
  }
  if (inline_done && !paused_ && !failed_ && in_flight_ == 0 &&
      BacklogLocked() >= kInlineBacklog) {
    paused_ = true;
    SetPaused(true);
  }
}

// Un-pauses admission; true when it must then be extended (after dropping
// mu_: the pump may issue reads that complete inline, on this thread).
bool Scheduler::ResumeLocked() {
  paused_ = false;
  SetPaused(false);
  return !failed_ && !finished_;
}

// A pump may have dropped a paused stream from the limiter's queue: extend
// admission again.
void Scheduler::ExtendAdmission() {
  limiter_->Extend(shared_from_this(), ranges_.size());
}

// --- Completion ---

void Scheduler::OnReadDone(uint64_t tag, Result<Slice> bytes) {
  ReadCompletion done{tag, std::move(bytes)};
  CompleteReads({&done, 1});
}

void Scheduler::OnReadsDone(std::span<ReadCompletion> done) {
  while (done.size() > kCompletionChunk) {
    CompleteReads(done.first(kCompletionChunk));
    done = done.subspan(kCompletionChunk);
  }
  CompleteReads(done);
}

// Settles finished reads (at most kCompletionChunk) under one lock of the
// stream and hands their permits back with one call to the limiter.
//
// A result keeps its share of the response budget until it is handed out
// (then its Lease, made on the consumer's thread, keeps it) or dropped; a
// failed read's too, until its error is delivered: occupied slots never
// exceed the budget. A dropped stream's go back here.
void Scheduler::CompleteReads(std::span<ReadCompletion> done) {
  std::shared_ptr<Scheduler> keepalive;  // destroyed last: may free this
  const uint64_t now = NowNanos();
  const bool inline_done = tls_granting == this;
  Settled settled;
  std::shared_ptr<StreamListener> listener;
  {
    MutexLock lk(mu_, MutexLock::Spin::kYes);
    for (ReadCompletion& d : done) {
      if (SettleLocked(d, now, &settled)) {
        FileCompletionLocked(d, now - slots_[SlotOf(d.tag)].submit_ns,
                             &settled);
      }
    }
    AfterCompletionsLocked(inline_done);
    keepalive = HoldSelfLocked(inline_done);
    if (listener_ && settled.reads > 0) listener = listener_;
  }
  FinishSettling(settled);
  NotifyListener(listener);
}

// What a batch's settling left, without mu_: the permits go back (they may
// admit this stream's next reads), losers are cancelled in the backend.
void Scheduler::FinishSettling(Settled& s) {
  if (s.reads > 0) limiter_->ReadsDone(s.reads);
  if (s.dropped > 0) limiter_->ReleaseResponses(s.dropped, s.dropped_bytes);
  for (uint64_t tag : s.cancel) source_->Cancel(this, tag);
  if (s.hedges_done > 0) limiter_->ReleaseHedges(s.hedges_done, s.hedge_bytes);
  if (s.won > 0) {
    limiter_->RecordHedges(0, s.won, 0);
    stats_->RecordHedges(0, s.won, 0);
  }
  s.garbage.clear();
}

// A read that returned other than its range's length failed.
void Scheduler::CheckLength(ReadCompletion& done) const {
  const uint64_t length = ranges_[slots_[SlotOf(done.tag)].index].length;
  if (done.bytes.ok() && done.bytes->size() != length) {
    done.bytes = Status::IoError("backend returned " +
                                 std::to_string(done.bytes->size()) +
                                 " bytes instead of " + std::to_string(length));
  }
}

// One copy of a read came back. True when it settles the read (the first
// success, or the failure of the last copy out): the caller files it. A
// losing copy, or a failed one while the other is still out, is dropped.
bool Scheduler::SettleLocked(ReadCompletion& done, uint64_t now, Settled* out) {
  if (!losers_.empty() && TakeLoserLocked(done.tag, out)) {
    out->garbage.push_back(std::move(done.bytes));
    return false;
  }
  CheckLength(done);  // not a loser's: its slot still holds its read
  Slot& s = slots_[SlotOf(done.tag)];
  const unsigned copy = done.tag & 1;
  s.out &= ~(1u << copy);
  if (!done.bytes.ok() && s.out != 0) {
    out->garbage.push_back(std::move(done.bytes));  // the other may answer
    return false;
  }
  if (s.out != 0) {
    // The other copy loses: cancelled, its completion dropped when it comes.
    losers_.push_back({done.tag ^ 1, ranges_[s.index].length});
    out->cancel.push_back(done.tag ^ 1);
    s.out = 0;
  } else if (s.hedged) {
    out->hedge_bytes += ranges_[s.index].length;
    ++out->hedges_done;
  }
  if (hedge_) {
    hedge_->Settled(now - s.submit_ns, copy == 1);
    out->won += copy;
  }
  return true;
}

// Puts one settled read's result (or error) in its slot, or drops it if
// the stream is finished (counting its budget into `out`).
void Scheduler::FileCompletionLocked(ReadCompletion& done, uint64_t latency_ns,
                                     Settled* out) {
  const uint64_t slot = SlotOf(done.tag);
  Slot& s = slots_[slot];
  const uint64_t length = ranges_[s.index].length;
  --in_flight_;
  ++out->reads;
  reads_.Add(latency_ns, done.bytes.ok() ? length : 0, done.bytes.ok());
  if (reads_.full()) FlushStatsLocked();
  if (finished_) {
    ++cancelled_;
    ++out->dropped;
    out->dropped_bytes += length;
    s.state = Slot::kFree;
    ReleaseSlot(slot);
    out->garbage.push_back(std::move(done.bytes));
    return;
  }
  s.state = Slot::kDone;
  if (done.bytes.ok()) {
    s.bytes = std::move(*done.bytes);
  } else {
    s.error = std::make_unique<Status>(
        done.bytes.status().WithContext(RangeContext(s.index)));
    if (!failed_ && !per_range_errors_) {
      // Admit nothing more, before this read's permit comes back.
      failed_ = true;
      limiter_->Withdraw(this);
    }
  }
  if (delivery_ == Delivery::kAsCompleted) ready_.push_back(slot);
}

// Wakes the consumer after a batch of completions.
void Scheduler::AfterCompletionsLocked(bool inline_done) {
  if (finished_) {
    if (IdleLocked()) FlushStatsLocked();  // the stream's last word
    return;
  }
  NoteCompletionLocked(inline_done);
  ChangedLocked();
  if (consumer_waiting_) cv_.NotifyOne();
}

// A completion still uses the stream after unlocking, while another
// thread's completion may leave nothing in flight and the consumer then
// drop the stream, its reader and its limiter: the completion holds the
// stream until it returns (and releases the stream's hold on itself if it
// is done). Inside this stream's OnGrant the pump's reference does that: an
// atomic increment and decrement fewer per inline read.
std::shared_ptr<Scheduler> Scheduler::HoldSelfLocked(bool inline_done) {
  if (IdleLocked() && DoneLocked()) return std::move(keepalive_);
  if (!inline_done) return keepalive_;
  return nullptr;
}

// --- Ending ---

void Scheduler::Finish() {
  uint64_t dropped = 0;
  uint64_t dropped_bytes = 0;
  std::shared_ptr<Scheduler> self;  // the caller's RangeStream holds us
  std::shared_ptr<StreamListener> listener;
  bool cancel_reads = false;
  {
    MutexLock lk(mu_);
    if (finished_) return;
    finished_ = true;
    if (final_status_.ok() && delivered_ < ranges_.size()) {
      final_status_ = Status::Cancelled("stream over '" + source_->name() +
                                        "' was cancelled");
    }
    for (Slot& s : slots_) {
      if (s.state != Slot::kDone) continue;
      ++dropped;
      dropped_bytes += ranges_[s.index].length;
      s.bytes.Reset();
      s.error.reset();
      s.state = Slot::kFree;
      ++cancelled_;
    }
    ready_.clear();
    cancel_reads = !IdleLocked();
    FlushStatsLocked();
    ReleaseSelfIfDoneLocked(&self);
    ChangedLocked();
    listener = std::move(listener_);  // no change comes after this one
  }
  NotifyListener(listener);
  limiter_->Withdraw(this);
  // Reads in flight keep this stream alive (keepalive_) until they complete.
  if (cancel_reads) source_->Cancel(this, Source::kAllReads);
  if (dropped > 0) limiter_->ReleaseResponses(dropped, dropped_bytes);
  cv_.NotifyAll();
}

// Something the consumer may wait for changed: bumps the counter its spin
// watches (its condition variable and its listener are the caller's to
// signal). changes_ is written only under mu_, so a load and a store do (no
// atomic read-modify-write on the per-read path).
void Scheduler::ChangedLocked() {
  changes_.store(changes_.load(std::memory_order_relaxed) + 1,
                 std::memory_order_release);
}

// The stream keeps itself alive from Start() until it is done (finished, or
// everything delivered) with nothing in flight, so that late completions of
// a dropped stream land safely; each completion also holds its own
// reference while it runs (HoldSelfLocked).
void Scheduler::ReleaseSelfIfDoneLocked(std::shared_ptr<Scheduler>* out) {
  if (IdleLocked() && DoneLocked()) *out = std::move(keepalive_);
}

std::string Scheduler::RangeContext(uint64_t index) const {
  if (describe_) return describe_(index);
  return "reading range " + ranges_[index].ToString() + " (request index " +
         std::to_string(index) + ") of '" + source_->name() + "'";
}

void Scheduler::FlushStatsLocked() {
  if (reads_.n != 0) {
    stats_->RecordReads(reads_.latency.data(), reads_.n, reads_.bytes,
                        reads_.errors);
    limiter_->RecordReads(reads_.latency.data(), reads_.n, reads_.bytes,
                          reads_.errors);
    reads_ = {};
  }
  if (unflushed_ == 0 && cancelled_ == 0) return;
  stats_->RecordDelivered(unflushed_, unflushed_bytes_, cancelled_);
  limiter_->RecordDelivered(unflushed_, unflushed_bytes_, cancelled_);
  unflushed_ = 0;
  unflushed_bytes_ = 0;
  cancelled_ = 0;
}

}  // namespace rangeio::detail
