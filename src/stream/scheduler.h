// scheduler.h (internal) — the completion-driven state machine behind a
// RangeStream: a rolling window of admitted reads over one source.
//
// The limiter grants reads (OnGrant), the source completes them
// (OnReadDone/OnReadsDone) on its own threads or inline, and the consumer
// takes results (Next/Poll/NextRaw) in request or completion order. A
// completion hands its I/O permit back at once, which admits the next read:
// no batch waits for another. Admission state is O(1) (the limiter's
// cursor); per-read state lives in at most budget-count slots. The
// scheduler also decides when a read is late and hedges it
// (hedge_policy.h): the second copy goes to the same source, the first
// answer wins and the other is cancelled.
// scheduler.cc holds the admission and completion side, scheduler_hedge.cc
// the hedges, scheduler_delivery.cc the consumer's side.
//
// Thread-safety: mu_ guards everything mutable; the limiter and backends call
// in from their threads, one consumer thread at a time calls Next/Poll.
// Lifetime: owned by the RangeStream and, while it has work, by itself
// (keepalive_), so a dropped stream's late completions land safely.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "limiter/limiter_core.h"
#include "rangeio/byte_range.h"
#include "rangeio/options.h"
#include "rangeio/reader.h"
#include "rangeio/source.h"
#include "stream/hedge_policy.h"
#include "stream/stream_base.h"
#include "util/mutex.h"
#include "util/stats_recorder.h"

namespace rangeio::detail {

// How one Scheduler reads.
struct SchedulerConfig {
  Delivery delivery = Delivery::kOrdered;
  Priority priority = Priority::kNormal;
  std::chrono::milliseconds stall_timeout{10'000};
  // A failed read is delivered as its range's error and the stream goes on
  // (ReadOptions::per_range_errors); otherwise it ends the stream.
  bool per_range_errors = false;
  std::shared_ptr<HedgePolicy> hedge;  // null: no hedging
  // Set for the physical reads of a PlannedStream: names a read by the
  // requested ranges it serves; such a stream leaves counting deliveries
  // (ranges and logical bytes) to the PlannedStream.
  std::function<std::string(uint64_t)> describe;
};

class Scheduler final : public StreamBase,
                        public PermitClient,
                        public ReadSink,
                        public std::enable_shared_from_this<Scheduler> {
 public:
  Scheduler(std::shared_ptr<Source> source,
            std::shared_ptr<LimiterCore> limiter,
            std::shared_ptr<StatsRecorder> stats, std::vector<ByteRange> ranges,
            SchedulerConfig config);

  // Asks the limiter for the first window of reads.
  void Start() EXCLUDES(mu_);

  // PermitClient.
  uint64_t CostOf(uint64_t i) const override { return ranges_[i].length; }
  void OnGrant(uint64_t first, uint64_t n) override EXCLUDES(mu_);

  // ReadSink.
  void OnReadDone(uint64_t tag, Result<Slice> bytes) override EXCLUDES(mu_);
  void OnReadsDone(std::span<ReadCompletion> done) override EXCLUDES(mu_);

  // StreamBase.
  Result<std::optional<RangeResult>> Poll(bool* pending) override EXCLUDES(mu_);
  void SetListener(std::shared_ptr<StreamListener> listener) override
      EXCLUDES(mu_);
  uint64_t RecheckAt() const override EXCLUDES(mu_);
  // Stops admission, drops undelivered results (their budget goes back) and
  // lets in-flight reads return their permits as they complete.
  void Finish() override EXCLUDES(mu_);
  size_t size() const override { return ranges_.size(); }

  // Next() for a PlannedStream: the physical result's lease itself. With
  // `pending` non-null, sets *pending and returns std::nullopt instead of
  // waiting for a result.
  Result<std::optional<RawResult>> NextRaw(bool* pending = nullptr)
      EXCLUDES(mu_);

 private:
  // A consumer spins at most this many yields before sleeping.
  static constexpr int kSpins = 64;
  // Reads one call of Source::Assist may complete for a waiting consumer:
  // a few io_uring batches (the pread pool runs at most 16 at a time).
  static constexpr size_t kAssistReads = 256;
  // Completions handled under one lock (OnReadsDone splits larger batches).
  static constexpr size_t kCompletionChunk = 32;
  // Results a stream whose reads complete inline may run ahead of its
  // consumer before admission pauses (see NoteCompletionLocked).
  static constexpr uint64_t kInlineBacklog = 8;
  // How often a consumer waiting for admission looks for a stall that began
  // without waking it. 50 ms: 1/200 of the default response_stall_timeout
  // added to its detection, 20 wake-ups a second of a thread that waits.
  static constexpr std::chrono::milliseconds kStallRecheck{50};
  // Deliveries counted before they are flushed to the stats.
  static constexpr uint64_t kFlushEvery = 64;

  // Completed reads not yet added to the reader's stats: one lock there per
  // 64 reads instead of one per read.
  struct UnflushedReads {
    std::array<uint64_t, 64> latency;
    uint32_t n = 0;
    uint64_t bytes = 0;
    uint64_t errors = 0;
    bool full() const { return n == latency.size(); }
    void Add(uint64_t latency_ns, uint64_t got, bool ok) {
      latency[n++] = latency_ns;
      bytes += got;
      errors += ok ? 0 : 1;
    }
  };

  // One cache line: a completion on one thread writes it and the consumer
  // on another reads it, once per read.
  struct alignas(64) Slot {
    enum State : uint8_t { kFree, kInFlight, kDone };
    State state = kFree;
    uint8_t out = 0;      // bit c: copy c (0 primary, 1 hedge) is out
    bool hedged = false;  // a hedge was issued for this read
    uint32_t gen = 0;     // bumped per read: a tag names one read's copy
    uint64_t index = 0;
    uint64_t submit_ns = 0;
    Slice bytes;                    // a result not yet handed out
    std::unique_ptr<Status> error;  // a failed read's, until delivered
  };
  static_assert(sizeof(Slot) == 64);

  // A copy still in the backend whose read was settled by the other copy:
  // its completion is dropped, and its hedge permit then returned.
  struct Loser {
    uint64_t tag;
    uint64_t bytes;
  };

  // What a batch of completions leaves to do once mu_ is dropped.
  struct Settled {
    uint64_t reads = 0;  // reads settled: their I/O permits go back
    uint64_t dropped = 0;
    uint64_t dropped_bytes = 0;
    uint64_t won = 0;          // settled by their hedge
    uint64_t hedge_bytes = 0;  // hedge permits to return, by bytes
    uint64_t hedges_done = 0;
    std::vector<uint64_t> cancel;        // losers to cancel in the backend
    std::vector<Result<Slice>> garbage;  // losers' bytes, freed unlocked
  };

  // A read's tag: its slot, the slot's generation and the copy.
  static uint64_t TagOf(uint64_t slot, uint32_t gen, unsigned copy) {
    return (uint64_t{gen} << 32) | (slot << 1) | copy;
  }
  static uint64_t SlotOf(uint64_t tag) { return (tag & 0xffffffffu) >> 1; }

  // A result taken out of its slot, to be handed out once mu_ is dropped.
  struct Taken {
    uint64_t index;
    uint64_t cost;
    Slice bytes;
    bool extend;  // admission was resumed: extend it after unlocking
  };

  // --- Admission (scheduler.cc) ---
  bool TakeSlots(uint64_t first, uint64_t k, uint64_t* tags) EXCLUDES(mu_);
  std::optional<uint64_t> AcquireSlot(uint64_t index) REQUIRES(mu_);
  void UntakeSlot(uint64_t tag) REQUIRES(mu_);
  void ReleaseSlot(uint64_t tag) REQUIRES(mu_);
  void NoteCompletionLocked(bool inline_done) REQUIRES(mu_);
  bool ResumeLocked() REQUIRES(mu_);
  void ExtendAdmission() EXCLUDES(mu_);

  // --- Completion ---
  void CompleteReads(std::span<ReadCompletion> done) EXCLUDES(mu_);
  static void NotifyListener(const std::shared_ptr<StreamListener>& listener);
  void CheckLength(ReadCompletion& done) const REQUIRES(mu_);
  bool SettleLocked(ReadCompletion& done, uint64_t now, Settled* out)
      REQUIRES(mu_);
  void FileCompletionLocked(ReadCompletion& done, uint64_t latency_ns,
                            Settled* out) REQUIRES(mu_);
  void AfterCompletionsLocked(bool inline_done) REQUIRES(mu_);
  std::shared_ptr<Scheduler> HoldSelfLocked(bool inline_done) REQUIRES(mu_);
  void FinishSettling(Settled& s);

  // --- Hedging (scheduler_hedge.cc) ---
  enum class HedgeRoom { kIssued, kNoBudget, kNoReserve };
  using HedgeWakes = HedgePolicy::Waiters;
  void ArmHedges(const uint64_t* tags, uint64_t n, uint64_t delay_ns);
  void FireHedges(const std::vector<uint64_t>& tags) EXCLUDES(mu_);
  bool DueForHedgeLocked(uint64_t tag) const REQUIRES(mu_);
  HedgeRoom TryHedgeLocked(uint64_t tag, std::vector<ReadRequest>* hedges,
                           uint64_t* bytes, HedgeWakes* wake) REQUIRES(mu_);
  void WaitForRoomLocked(uint64_t tag) REQUIRES(mu_);
  void ArmRetry();
  void WakeForHedges(HedgeWakes* wake);
  void RecheckHedges(bool retry) EXCLUDES(mu_);
  bool TakeLoserLocked(uint64_t tag, Settled* out) REQUIRES(mu_);

  // --- Delivery ---
  std::optional<uint64_t> ReadyTagLocked() REQUIRES(mu_);
  Taken TakeResultLocked(uint64_t tag) REQUIRES(mu_);
  uint64_t TakeErrorLocked(uint64_t tag) REQUIRES(mu_);
  RawResult TakeRangeErrorLocked(uint64_t tag) REQUIRES(mu_);
  Result<std::optional<RawResult>> EndLocked() REQUIRES(mu_);
  RawResult MakeRaw(Taken taken);

  // --- Waiting ---
  bool AssistLocked() REQUIRES(mu_);
  void SpinLocked(int* spins) REQUIRES(mu_);
  void SleepLocked(MutexLock& lk) REQUIRES(mu_);
  void SleepAtMostLocked(MutexLock& lk, std::chrono::nanoseconds timeout)
      REQUIRES(mu_);
  bool WaitsForAdmissionLocked() const REQUIRES(mu_);
  bool StallExpiredLocked(uint64_t now) REQUIRES(mu_);
  void SleepUntilStallDeadlineLocked(MutexLock& lk, uint64_t now) REQUIRES(mu_);

  // --- State ---
  void ChangedLocked() REQUIRES(mu_);
  uint64_t BacklogLocked() const REQUIRES(mu_) {
    return n_submitted_ - delivered_ - in_flight_;
  }
  void ReleaseSelfIfDoneLocked(std::shared_ptr<Scheduler>* out) REQUIRES(mu_);
  // Nothing of this stream is in the backend (no read, no losing copy).
  bool IdleLocked() const REQUIRES(mu_) {
    return in_flight_ == 0 && losers_.empty();
  }
  bool DoneLocked() const REQUIRES(mu_) {
    return finished_ || delivered_ == ranges_.size();
  }
  bool StalledLocked() const REQUIRES(mu_);
  Status StallError() const;
  std::string RangeContext(uint64_t index) const;
  void FlushStatsLocked() REQUIRES(mu_);

  const std::shared_ptr<Source> source_;
  const std::shared_ptr<LimiterCore> limiter_;
  const std::shared_ptr<StatsRecorder> stats_;
  const std::vector<ByteRange> ranges_;
  const Delivery delivery_;
  const bool per_range_errors_;
  const std::shared_ptr<HedgePolicy> hedge_;  // null: no hedging
  const std::chrono::milliseconds stall_timeout_;
  const std::function<std::string(uint64_t)> describe_;
  const bool record_deliveries_;

  mutable Mutex mu_;
  CondVar cv_;
  std::vector<Slot> slots_ GUARDED_BY(mu_);
  std::vector<uint64_t> free_slots_ GUARDED_BY(mu_);  // as-completed
  std::deque<uint64_t> ready_ GUARDED_BY(mu_);        // as-completed
  std::vector<Loser> losers_ GUARDED_BY(mu_);
  // Reads due for a hedge that found no room (scheduler_hedge.cc), at most
  // one entry per slot; whether the stream waits for room in the budget
  // (registered with hedge_), and whether a reserve retry is on the timer.
  std::vector<uint64_t> hedge_waiting_ GUARDED_BY(mu_);
  bool budget_waiter_ GUARDED_BY(mu_) = false;
  bool retry_armed_ GUARDED_BY(mu_) = false;
  uint64_t in_flight_ GUARDED_BY(mu_) = 0;
  uint64_t n_submitted_ GUARDED_BY(mu_) = 0;
  uint64_t delivered_ GUARDED_BY(mu_) = 0;
  UnflushedReads reads_ GUARDED_BY(mu_);
  uint64_t unflushed_ GUARDED_BY(mu_) = 0;
  uint64_t unflushed_bytes_ GUARDED_BY(mu_) = 0;
  uint64_t cancelled_ GUARDED_BY(mu_) = 0;
  bool finished_ GUARDED_BY(mu_) = false;
  bool failed_ GUARDED_BY(mu_) = false;       // a read failed
  bool paused_ GUARDED_BY(mu_) = false;       // see NoteCompletionLocked
  bool inline_pass_ GUARDED_BY(mu_) = false;  // the pass limit is set
  bool consumer_waiting_ GUARDED_BY(mu_) = false;
  int spin_limit_ GUARDED_BY(mu_) = kSpins;
  // Bumped (under mu_) by every change the consumer may be waiting for;
  // read without mu_ by its spin.
  std::atomic<uint64_t> changes_{0};
  std::shared_ptr<StreamListener> listener_ GUARDED_BY(mu_);  // may be null
  // When a stalled consumer gives up (0: not stalled).
  uint64_t stall_deadline_ GUARDED_BY(mu_) = 0;
  Status final_status_ GUARDED_BY(mu_);
  std::shared_ptr<Scheduler> keepalive_ GUARDED_BY(mu_);
};

}  // namespace rangeio::detail
