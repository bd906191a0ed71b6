#include "rangeio/reader.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "clock.h"
#include "limiter_core.h"
#include "rangeio/local_file.h"
#include "rangeio/planner.h"
#include "spin_lock.h"
#include "stats_recorder.h"
#include "stream_poll.h"

namespace rangeio {
namespace detail {

// What a RangeStream drives: a StreamState (ranges read as requested) or a
// PlannedStream (ranges read through a Plan).
class StreamBase {
 public:
  virtual ~StreamBase() = default;
  virtual Result<std::optional<RangeResult>> Next() = 0;
  // Next() that returns std::nullopt with *pending set instead of waiting.
  virtual Result<std::optional<RangeResult>> Poll(bool* pending) = 0;
  // Every later change a consumer may wait for also notifies `waker`.
  virtual void SetWaker(std::shared_ptr<Waker> waker) = 0;
  // Cancels what is not yet delivered; idempotent.
  virtual void Finish() = 0;
  virtual size_t size() const = 0;
};

namespace {

// Owns one admitted read's share of the response budget from completion until
// the last Slice of its buffer is gone. The limiter keeps itself alive while
// any response is retained, so a raw pointer is enough here.
struct Lease {
  Lease(LimiterCore* l, uint64_t c, Slice b)
      : limiter(l), cost(c), bytes(std::move(b)) {}
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  ~Lease() { limiter->ReleaseResponse(cost); }
  LimiterCore* limiter;
  uint64_t cost;
  Slice bytes;
};

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

// A physical result as the stream hands it to a PlannedStream: the read's
// index and its lease (bytes plus budget).
struct RawResult {
  uint64_t index = 0;
  std::shared_ptr<Lease> lease;
};

}  // namespace

// The state machine behind a RangeStream. Admission state is O(1) (the
// limiter's cursor); per-read state lives in at most budget-count slots.
//
// Thread-safety: mu_ guards everything mutable; the limiter and backends
// call in from their threads. Lifetime: owned by the RangeStream and, while
// it has work, by itself (keepalive_), so a dropped stream's late
// completions land safely.
class StreamState final : public StreamBase,
                          public PermitClient,
                          public ReadSink,
                          public std::enable_shared_from_this<StreamState> {
 public:
  StreamState(std::shared_ptr<Source> source,
              std::shared_ptr<LimiterCore> limiter,
              std::shared_ptr<StatsRecorder> stats,
              std::vector<ByteRange> ranges, Delivery delivery,
              const Options& options,
              std::function<std::string(uint64_t)> describe = nullptr)
      : PermitClient(ranges.size()),
        source_(std::move(source)),
        limiter_(std::move(limiter)),
        stats_(std::move(stats)),
        ranges_(std::move(ranges)),
        delivery_(delivery),
        chunked_(options.scheduling == Scheduling::kChunked),
        stall_timeout_(options.response_stall_timeout),
        describe_(std::move(describe)),
        record_deliveries_(describe_ == nullptr),
        slots_(std::min<uint64_t>(ranges_.size(), limiter_->budget_count())) {
    if (delivery_ == Delivery::kAsCompleted) {
      free_slots_.reserve(slots_.size());
      for (size_t i = slots_.size(); i > 0; --i) free_slots_.push_back(i - 1);
    }
  }

  void Start() {
    if (ranges_.empty()) return;
    {
      std::lock_guard lk(mu_);
      keepalive_ = shared_from_this();
    }
    const uint64_t window =
        chunked_ ? limiter_->io_concurrency() : ranges_.size();
    limiter_->Extend(shared_from_this(), window);
  }

  uint64_t CostOf(uint64_t i) const override { return ranges_[i].length; }

  void OnGrant(uint64_t first, uint64_t n) override {
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
        return;
      }
      for (uint64_t j = 0; j < k; ++j) reads[j] = {ranges_[first + j], tags[j]};
      source_->ReadMany({reads.data(), k}, this);
      first += k;
      n -= k;
    }
  }

  void OnReadDone(uint64_t tag, Result<Slice> bytes) override {
    ReadCompletion done{tag, std::move(bytes)};
    CompleteReads<1>({&done, 1});
  }

  void OnReadsDone(std::span<ReadCompletion> done) override {
    while (done.size() > kCompletionChunk) {
      CompleteReads<kCompletionChunk>(done.first(kCompletionChunk));
      done = done.subspan(kCompletionChunk);
    }
    CompleteReads<kCompletionChunk>(done);
  }

  Result<std::optional<RangeResult>> Next() override { return Poll(nullptr); }

  Result<std::optional<RangeResult>> Poll(bool* pending) override {
    RANGEIO_ASSIGN_OR_RETURN(std::optional<RawResult> raw, NextRaw(pending));
    if (!raw) return std::optional<RangeResult>();
    const std::byte* data = raw->lease->bytes.data();
    const size_t size = raw->lease->bytes.size();
    // The lease becomes the Slice's owner: no extra refcount traffic.
    return std::optional<RangeResult>(
        RangeResult{raw->index, Slice(std::move(raw->lease), data, size)});
  }

  void SetWaker(std::shared_ptr<Waker> waker) override {
    std::lock_guard lk(mu_);
    waker_ = std::move(waker);
  }

  // Next() for a PlannedStream: the physical result's lease itself. With
  // `pending` non-null, sets *pending and returns std::nullopt instead of
  // waiting for a result.
  Result<std::optional<RawResult>> NextRaw(bool* pending = nullptr) {
    auto lk = LockSpinning(mu_);
    int spins = 0;
    bool assisted = false;  // Assist found nothing since the last result
    for (;;) {
      if (!final_status_.ok()) return final_status_;
      if (delivered_ == ranges_.size()) {
        FlushStatsLocked();
        std::shared_ptr<StreamState> self;  // the caller's RangeStream holds us
        ReleaseSelfIfDoneLocked(&self);
        return std::optional<RawResult>();
      }
      if (std::optional<uint64_t> tag = ReadyTagLocked()) {
        Slot& s = slots_[*tag];
        if (s.error) {
          // The error is this read's delivery: the read is not "cancelled".
          final_status_ = std::move(*s.error);
          s.error.reset();
          const uint64_t cost = ranges_[s.index].length;
          s.state = Slot::kFree;
          ReleaseSlot(*tag);
          Status error = final_status_;
          lk.unlock();
          Finish();
          limiter_->ReleaseResponses(1, cost);
          return error;
        }
        const uint64_t index = s.index;
        const uint64_t cost = ranges_[index].length;
        Slice bytes = std::move(s.bytes);
        stall_deadline_ = 0;
        if (record_deliveries_) unflushed_bytes_ += cost;
        s.state = Slot::kFree;
        ReleaseSlot(*tag);
        ++delivered_;
        Delivered(1);
        if (record_deliveries_) ++unflushed_;
        if (delivered_ == ranges_.size() || unflushed_ >= 64) {
          FlushStatsLocked();
        }
        if (paused_ && BacklogLocked() <= kInlineBacklog / 2) {
          ResumeAdmission(lk);  // unlocks
        } else {
          lk.unlock();
        }
        // Made here, on the consumer's thread, which also frees it: the
        // allocator's per-thread cache serves both ends.
        return std::optional<RawResult>(RawResult{
            index,
            std::make_shared<Lease>(limiter_.get(), cost, std::move(bytes))});
      }
      FlushStatsLocked();
      if (paused_) {  // nothing ready: never wait on a pause
        ResumeAdmission(lk);
        RelockSpinning(lk);
        continue;
      }
      if (!StalledLocked()) {
        stall_deadline_ = 0;
        if (in_flight_ > 0 && !assisted) {
          // Rather than wait, run reads the source has queued for its own
          // threads (page-cache hits): this thread's results come sooner
          // and the source's threads are not the only ones working.
          lk.unlock();
          assisted = source_->Assist(kAssistReads) == 0;
          RelockSpinning(lk);
          continue;
        }
        if (pending) {
          *pending = true;
          return std::optional<RawResult>();
        }
        if (spins < spin_limit_ && in_flight_ > 0) {
          // Results from other threads often arrive within microseconds; a
          // futex sleep and wake-up would cost more than the wait. The spin
          // watches a counter, not the lock: a completion never has to wait
          // for the consumer's lock (a futex sleep on the thread that
          // submits the next reads: 4.5% of the io_uring thread's samples
          // when the spin re-took the lock each turn).
          const uint64_t seen = changes_.load(std::memory_order_relaxed);
          const int limit = spin_limit_;
          lk.unlock();
          bool changed = false;
          do {
            ++spins;
            std::this_thread::yield();
            changed = changes_.load(std::memory_order_acquire) != seen;
          } while (!changed && spins < limit);
          RelockSpinning(lk);
          // Adaptive, as an adaptive mutex is: where results come in
          // bursts with long gaps (a disk's completions reaped together,
          // an object store's tens of milliseconds) spinning only burns
          // the core, so a spin that found nothing halves the next one
          // and one that found a result doubles it, within 1..kSpins.
          // 4 KiB O_DIRECT reads on io_uring spent ~64 sched_yield calls
          // per reaped batch before sleeping anyway.
          spin_limit_ = changed ? std::min(kSpins, spin_limit_ * 2)
                                : std::max(1, spin_limit_ / 2);
          continue;
        }
        consumer_waiting_ = true;
        cv_.wait(lk);
        consumer_waiting_ = false;
        continue;
      }
      const uint64_t now = NowNanos();
      if (stall_deadline_ == 0) {
        stall_deadline_ =
            now +
            std::chrono::duration_cast<std::chrono::nanoseconds>(stall_timeout_)
                .count();
      }
      if (now >= stall_deadline_) {
        final_status_ = StallError();
        Status error = final_status_;
        lk.unlock();
        Finish();
        return error;
      }
      if (pending) {
        *pending = true;
        return std::optional<RawResult>();
      }
      consumer_waiting_ = true;
      cv_.wait_for(lk, std::chrono::nanoseconds(stall_deadline_ - now));
      consumer_waiting_ = false;
    }
  }

  // Stops admission, drops undelivered results (their budget goes back) and
  // lets in-flight reads return their permits as they complete.
  void Finish() override {
    uint64_t dropped = 0;
    uint64_t dropped_bytes = 0;
    std::shared_ptr<StreamState> self;  // the caller's RangeStream holds us
    {
      std::lock_guard lk(mu_);
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
      FlushStatsLocked();
      ReleaseSelfIfDoneLocked(&self);
      ChangedLocked();
    }
    limiter_->Withdraw(this);
    if (dropped > 0) limiter_->ReleaseResponses(dropped, dropped_bytes);
    cv_.notify_all();
  }

  size_t size() const override { return ranges_.size(); }

 private:
  static constexpr int kSpins = 64;
  // Reads one call of Source::Assist may run for a waiting consumer.
  static constexpr size_t kAssistReads = 8;
  // Completions handled under one lock (OnReadsDone splits larger batches).
  static constexpr size_t kCompletionChunk = 32;

  // Files up to N finished reads under one lock of the stream and hands
  // their permits back with one call to the limiter.
  template <size_t N>
  void CompleteReads(std::span<ReadCompletion> done) {
    std::shared_ptr<StreamState> keepalive;  // destroyed last: may free this
    const uint64_t now = NowNanos();
    const size_t n = done.size();
    std::array<uint64_t, N> latency;
    uint64_t got = 0;
    uint64_t errors = 0;
    for (size_t i = 0; i < n; ++i) {
      // A slot's index is stable while its read is in flight.
      const ByteRange range = ranges_[slots_[done[i].tag].index];
      Result<Slice>& bytes = done[i].bytes;
      if (bytes.ok() && bytes->size() != range.length) {
        bytes = Status::IoError(
            "backend returned " + std::to_string(bytes->size()) +
            " bytes instead of " + std::to_string(range.length));
      }
      if (bytes.ok()) {
        got += range.length;
      } else {
        ++errors;
      }
    }
    // A result keeps its share of the response budget until it is handed
    // out (then its Lease, made on the consumer's thread, keeps it) or
    // dropped; a failed read's too, until its error is delivered: occupied
    // slots never exceed the budget. A dropped stream's go back below.
    uint64_t dropped = 0;
    uint64_t dropped_bytes = 0;
    const bool inline_done = tls_granting == this;
    bool next_chunk = false;
    {
      auto lk = LockSpinning(mu_);
      for (size_t i = 0; i < n; ++i) {
        const uint64_t tag = done[i].tag;
        Slot& s = slots_[tag];
        latency[i] = now - s.submit_ns;
        --in_flight_;
        reads_.Add(latency[i], done[i].bytes.ok() ? ranges_[s.index].length : 0,
                   done[i].bytes.ok());
        if (reads_.full()) FlushStatsLocked();
        if (finished_) {
          ++cancelled_;
          ++dropped;
          dropped_bytes += ranges_[s.index].length;
          s.state = Slot::kFree;
          ReleaseSlot(tag);
          continue;
        }
        s.state = Slot::kDone;
        if (done[i].bytes.ok()) {
          s.bytes = std::move(*done[i].bytes);
        } else {
          s.error = std::make_unique<Status>(
              done[i].bytes.status().WithContext(RangeContext(s.index)));
          if (!failed_) {
            // Admit nothing more, before this read's permit comes back.
            failed_ = true;
            limiter_->Withdraw(this);
          }
        }
        if (delivery_ == Delivery::kAsCompleted) ready_.push_back(tag);
      }
      if (finished_) {
        if (in_flight_ == 0) FlushStatsLocked();  // the stream's last word
      } else {
        next_chunk = chunked_ && in_flight_ == 0 && !failed_;
        if (!chunked_) NoteCompletionLocked(inline_done);
        ChangedLocked();
        if (consumer_waiting_) cv_.notify_one();
      }
      // This call still uses the stream after unlocking, while another
      // thread's completion may bring in_flight_ to 0 and the consumer then
      // drop the stream, its reader and its limiter: hold the stream until
      // the call returns (and release it then if it is done). Inside this
      // stream's OnGrant the pump's reference does that: an atomic increment
      // and decrement fewer per inline read.
      if (in_flight_ == 0 && DoneLocked()) {
        keepalive = std::move(keepalive_);
      } else if (!inline_done) {
        keepalive = keepalive_;
      }
    }
    // The permits go back last: they may admit this stream's next reads.
    limiter_->ReadsDone(latency.data(), n, got, errors);
    if (next_chunk)
      limiter_->Extend(shared_from_this(), limiter_->io_concurrency());
    if (dropped > 0) limiter_->ReleaseResponses(dropped, dropped_bytes);
  }

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
    enum State { kFree, kInFlight, kDone };
    State state = kFree;
    uint64_t index = 0;
    uint64_t submit_ns = 0;
    Slice bytes;                    // a result not yet handed out
    std::unique_ptr<Status> error;  // a failed read's, until delivered
  };
  static_assert(sizeof(Slot) == 64);

  // Ordered delivery: the undelivered admitted reads are a contiguous run of
  // at most budget-count indexes, so index % slots is collision-free. In
  // completion order they are not contiguous: slots come from a free list.
  // Every occupied slot holds response budget, so a free slot always exists
  // for an admitted read; std::nullopt means that invariant broke (a bug).
  std::optional<uint64_t> AcquireSlot(uint64_t index) {
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
  // Marks reads [first, first + k) in flight in fresh slots, writing their
  // tags to `tags`; false when the stream takes no more reads (nothing is
  // taken then).
  bool TakeSlots(uint64_t first, uint64_t k, uint64_t* tags) {
    const uint64_t now = NowNanos();
    auto lk = LockSpinning(mu_);
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
        cv_.notify_all();
        return false;
      }
      const uint64_t tag = *slot;
      Slot& s = slots_[tag];
      s.index = first + j;
      s.state = Slot::kInFlight;
      s.submit_ns = now;
      tags[j] = tag;
    }
    in_flight_ += k;
    n_submitted_ = first + k;
    return true;
  }
  void UntakeSlot(uint64_t tag) {
    slots_[tag].state = Slot::kFree;
    ReleaseSlot(tag);
  }
  void ReleaseSlot(uint64_t tag) {
    if (delivery_ == Delivery::kAsCompleted) free_slots_.push_back(tag);
  }

  // Something the consumer may wait for changed: bumps the counter its spin
  // watches and wakes its Waker, if any (its condition variable is the
  // caller's to signal). changes_ is written only under mu_, so a load and a
  // store do (no atomic read-modify-write on the per-read path).
  void ChangedLocked() {
    changes_.store(changes_.load(std::memory_order_relaxed) + 1,
                   std::memory_order_release);
    if (waker_) waker_->Notify();
  }

  // Reads that complete inline (memory, page-cache hits) would otherwise
  // run ahead of the consumer as far as the response budget allows (2C):
  // every result would then wait for 2C others, its buffer long out of the
  // CPU's caches when the consumer gets it and when the pool hands it to the
  // next read. So while this stream's reads complete inline and none is in
  // flight, admission pauses once kInlineBacklog results wait, and resumes
  // when the consumer has taken half of them; a pump grants such a stream
  // kInlineBacklog reads at a time. Measured with 51,200 4 KiB reads at
  // C = 64, three alternating pairs of processes (best 8 of 15 runs each),
  // before and after: from the page cache 110-112 / 90-96, 94-101 / 97-103
  // and 103-116 / 84-92 ms; from memory with a copy 65-68 / 63-70, 58-63 /
  // 51-59 and 63-69 / 58-63 ms. Reads that complete on other threads (real
  // I/O) never pause admission.
  static constexpr uint64_t kInlineBacklog = 8;

  // Completed results not yet delivered.
  uint64_t BacklogLocked() const {
    return n_submitted_ - delivered_ - in_flight_;
  }

  void NoteCompletionLocked(bool inline_done) {
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

  // Un-pauses and extends admission again (a pump may have dropped the
  // stream from the limiter's queue meanwhile). Unlocks `lk`: the pump may
  // issue reads that complete inline, on this thread.
  void ResumeAdmission(std::unique_lock<std::mutex>& lk) {
    paused_ = false;
    SetPaused(false);
    const bool extend = !failed_ && !finished_;
    lk.unlock();
    if (extend) limiter_->Extend(shared_from_this(), ranges_.size());
  }

  std::optional<uint64_t> ReadyTagLocked() {
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

  // The stream keeps itself alive from Start() until it is done (finished,
  // or everything delivered) with nothing in flight, so that late
  // completions of a dropped stream land safely; each completion also holds
  // its own reference while it runs (OnReadDone).
  void ReleaseSelfIfDoneLocked(std::shared_ptr<StreamState>* out) {
    if (in_flight_ == 0 && DoneLocked()) *out = std::move(keepalive_);
  }
  bool DoneLocked() const { return finished_ || delivered_ == ranges_.size(); }

  // This stream waits for admission while no read is in flight anywhere on
  // its limiter: no completion can free anything, only consumers releasing
  // results can (this caller's held slices, or other streams' undelivered
  // results, e.g. a k-way merge consuming many streams from one thread).
  bool StalledLocked() const {
    if (in_flight_ != 0 || failed_ || n_submitted_ >= ranges_.size()) {
      return false;
    }
    return limiter_->Occupancy().in_flight == 0;
  }

  Status StallError() const {
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

  std::string RangeContext(uint64_t index) const {
    if (describe_) return describe_(index);
    return "reading range " + ranges_[index].ToString() + " (request index " +
           std::to_string(index) + ") of '" + source_->name() + "'";
  }

  void FlushStatsLocked() {
    if (reads_.n != 0) {
      stats_->RecordReads(reads_.latency.data(), reads_.n, reads_.bytes,
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

  const std::shared_ptr<Source> source_;
  const std::shared_ptr<LimiterCore> limiter_;
  const std::shared_ptr<StatsRecorder> stats_;
  const std::vector<ByteRange> ranges_;
  const Delivery delivery_;
  const bool chunked_;
  const std::chrono::milliseconds stall_timeout_;
  // Set for the physical reads of a PlannedStream: names a read by the
  // requested ranges it serves. Such a stream leaves counting deliveries
  // (ranges and logical bytes) to the PlannedStream.
  const std::function<std::string(uint64_t)> describe_;
  const bool record_deliveries_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Slot> slots_;           // GUARDED_BY(mu_)
  std::vector<uint64_t> free_slots_;  // GUARDED_BY(mu_), as-completed
  std::deque<uint64_t> ready_;        // GUARDED_BY(mu_), as-completed
  uint64_t in_flight_ = 0;            // GUARDED_BY(mu_)
  uint64_t n_submitted_ = 0;          // GUARDED_BY(mu_)
  uint64_t delivered_ = 0;            // GUARDED_BY(mu_)
  UnflushedReads reads_;              // GUARDED_BY(mu_)
  uint64_t unflushed_ = 0;            // GUARDED_BY(mu_)
  uint64_t unflushed_bytes_ = 0;      // GUARDED_BY(mu_)
  uint64_t cancelled_ = 0;            // GUARDED_BY(mu_)
  bool finished_ = false;             // GUARDED_BY(mu_)
  bool failed_ = false;               // GUARDED_BY(mu_): a read failed
  bool paused_ = false;               // GUARDED_BY(mu_): see kInlineBacklog
  bool inline_pass_ = false;          // GUARDED_BY(mu_): the pass limit is set
  bool consumer_waiting_ = false;     // GUARDED_BY(mu_)
  int spin_limit_ = kSpins;           // GUARDED_BY(mu_)
  // Bumped (under mu_) by every change the consumer may be waiting for;
  // read without mu_ by its spin.
  std::atomic<uint64_t> changes_{0};
  std::shared_ptr<Waker> waker_;  // GUARDED_BY(mu_), may be null
  // When a stalled consumer gives up (0: not stalled).
  uint64_t stall_deadline_ = 0;             // GUARDED_BY(mu_)
  Status final_status_;                     // GUARDED_BY(mu_)
  std::shared_ptr<StreamState> keepalive_;  // GUARDED_BY(mu_)
};

// The plan of a PlannedStream plus the index from reads back to the
// requested ranges they serve. Shared with the physical stream's error
// messages, which may be built after the PlannedStream is gone.
struct PlanMap {
  Plan plan;
  std::vector<ByteRange> ranges;
  // The requested ranges that need read p: users[user_begin[p] ..
  // user_begin[p + 1]).
  std::vector<uint64_t> user_begin;
  std::vector<uint64_t> users;
  std::string source_name;

  void Index() {
    user_begin.assign(plan.reads.size() + 1, 0);
    for (const RangeLocation& loc : plan.locations) {
      for (size_t p = loc.read; p < loc.read + loc.read_count; ++p) {
        ++user_begin[p + 1];
      }
    }
    for (size_t p = 0; p < plan.reads.size(); ++p) {
      user_begin[p + 1] += user_begin[p];
    }
    users.resize(user_begin.back());
    std::vector<uint64_t> fill(user_begin.begin(), user_begin.end() - 1);
    for (size_t i = 0; i < plan.locations.size(); ++i) {
      const RangeLocation& loc = plan.locations[i];
      for (size_t p = loc.read; p < loc.read + loc.read_count; ++p) {
        users[fill[p]++] = i;
      }
    }
  }

  // How an error of read p names what it was reading.
  std::string Describe(uint64_t p) const {
    const PhysicalRead& r = plan.reads[p];
    const uint64_t n = user_begin[p + 1] - user_begin[p];
    std::string s = "reading range " + r.range().ToString() + " of '" +
                    source_name + "' (" + std::string(ReadKindName(r.kind)) +
                    " read " + std::to_string(p) + " of the plan, for " +
                    (n == 1 ? "request index " : "request indexes ");
    constexpr uint64_t kNamed = 8;
    for (uint64_t k = 0; k < std::min(n, kNamed); ++k) {
      if (k) s += ", ";
      s += std::to_string(users[user_begin[p] + k]);
    }
    if (n > kNamed) s += " and " + std::to_string(n - kNamed) + " more";
    return s + ")";
  }
};

// A range spanning several reads of a split, copied together once. It keeps
// the parts' leases, so their budget stays held until this range is
// released; a part no other range needs has its buffer freed at once.
struct AssembledRange {
  Slice bytes;
  std::vector<std::shared_ptr<Lease>> parts;
};

// Requested ranges read through a Plan: a StreamState reads the plan's
// physical reads, and this maps each result back to the ranges it serves,
// as zero-copy slices of the read's buffer or, for a range spanning split
// parts, as one assembled copy. A physical buffer's budget is held until the
// last slice of it is released.
//
// Ordered delivery reads the physical reads in plan order, and the plan is
// made run by run (see Reader::ReadRanges), so a read's ranges are
// consecutive requests and at most the reads of the next undelivered range
// are held here. In completion order, a range is handed out as soon as its
// last read arrives.
//
// Thread-safety: used by one thread at a time, like its RangeStream.
class PlannedStream final : public StreamBase {
 public:
  PlannedStream(std::shared_ptr<const PlanMap> map,
                std::vector<std::optional<Slice>> hits, Delivery delivery,
                std::shared_ptr<StatsRecorder> stats,
                std::shared_ptr<LimiterCore> limiter)
      : map_(std::move(map)),
        hits_(std::move(hits)),
        delivery_(delivery),
        stats_(std::move(stats)),
        limiter_(std::move(limiter)),
        held_(map_->plan.reads.size()),
        needs_(map_->plan.reads.size()),
        missing_(map_->ranges.size()) {
    for (size_t p = 0; p < needs_.size(); ++p) {
      needs_[p] = map_->user_begin[p + 1] - map_->user_begin[p];
    }
    for (size_t i = 0; i < missing_.size(); ++i) {
      missing_[i] = map_->plan.locations[i].read_count;
      if (missing_[i] == 0 && delivery_ == Delivery::kAsCompleted) {
        ready_.push_back(i);
      }
    }
  }
  ~PlannedStream() override { Finish(); }

  void Start(std::shared_ptr<StreamState> physical) {
    physical_ = std::move(physical);
    physical_->Start();
  }

  Result<std::optional<RangeResult>> Next() override { return Poll(nullptr); }

  void SetWaker(std::shared_ptr<Waker> waker) override {
    physical_->SetWaker(std::move(waker));
  }

  Result<std::optional<RangeResult>> Poll(bool* pending) override {
    if (!status_.ok()) return status_;
    for (;;) {
      if (delivered_ == map_->ranges.size()) {
        if (!physical_done_) {
          // Every read was needed by some range, so the physical stream is
          // at its end too; this lets it finish its stats and let go.
          Result<std::optional<RawResult>> end = physical_->NextRaw();
          if (!end.ok()) return Fail(end.status());
          if (*end) {
            return Fail(Status::Internal(
                "rangeio: a read of '" + map_->source_name +
                "' was left over after every range was delivered"));
          }
          physical_done_ = true;
        }
        Flush();
        return std::optional<RangeResult>();
      }
      if (std::optional<uint64_t> i = NextReady()) {
        return std::optional<RangeResult>(Deliver(*i));
      }
      Flush();  // the consumer is about to wait: bring stats up to date
      bool physical_pending = false;
      Result<std::optional<RawResult>> raw =
          physical_->NextRaw(pending ? &physical_pending : nullptr);
      if (!raw.ok()) return Fail(raw.status());
      if (physical_pending) {
        *pending = true;
        return std::optional<RangeResult>();
      }
      if (!*raw) {
        return Fail(Status::Internal(
            "rangeio: the physical reads of '" + map_->source_name +
            "' ended before request index " + std::to_string(delivered_) +
            " was complete (plan accounting is broken)"));
      }
      Arrive(std::move(**raw));
    }
  }

  void Finish() override {
    if (physical_) physical_->Finish();
    for (std::shared_ptr<Lease>& l : held_) l.reset();
    hits_.clear();
    ready_.clear();
    Flush();
    if (status_.ok() && delivered_ < map_->ranges.size()) {
      status_ = Status::Cancelled("stream over '" + map_->source_name +
                                  "' was cancelled");
    }
  }

  size_t size() const override { return map_->ranges.size(); }

 private:
  Status Fail(Status st) {
    status_ = std::move(st);
    Finish();
    return status_;
  }

  std::optional<uint64_t> NextReady() {
    if (delivery_ == Delivery::kOrdered) {
      if (missing_[delivered_] == 0) return delivered_;
      return std::nullopt;
    }
    if (ready_.empty()) return std::nullopt;
    const uint64_t i = ready_.front();
    ready_.pop_front();
    return i;
  }

  void Arrive(RawResult r) {
    const uint64_t p = r.index;
    held_[p] = std::move(r.lease);
    for (uint64_t k = map_->user_begin[p]; k < map_->user_begin[p + 1]; ++k) {
      const uint64_t i = map_->users[k];
      if (--missing_[i] == 0 && delivery_ == Delivery::kAsCompleted) {
        ready_.push_back(i);
      }
    }
  }

  RangeResult Deliver(uint64_t i) {
    const RangeLocation& loc = map_->plan.locations[i];
    ++delivered_;
    ++unflushed_;
    unflushed_bytes_ += loc.length;
    if (unflushed_ >= 64) Flush();
    if (loc.read_count == 0) {
      // A hit, or an empty range.
      if (!hits_.empty() && hits_[i]) return {i, *std::exchange(hits_[i], {})};
      return {i, Slice()};
    }
    if (loc.read_count == 1) {
      const std::shared_ptr<Lease>& lease = held_[loc.read];
      Slice s(lease, lease->bytes.data() + loc.offset, loc.length);
      Done(loc.read);
      return {i, std::move(s)};
    }
    return {i, Assemble(i, loc)};
  }

  // Range i no longer needs read p; its buffer goes when no range does.
  void Done(uint64_t p) {
    if (--needs_[p] == 0) held_[p].reset();
  }

  Slice Assemble(uint64_t i, const RangeLocation& loc) {
    auto out = std::make_shared<AssembledRange>();
    std::byte* dst = nullptr;
    out->bytes = Slice::Allocate(loc.length, &dst);
    for (const RangePart& part : map_->plan.Parts(i)) {
      std::memcpy(dst + part.offset_in_range,
                  held_[part.read]->bytes.data() + part.offset_in_read,
                  part.length);
    }
    for (size_t p = loc.read; p < loc.read + loc.read_count; ++p) {
      std::shared_ptr<Lease> part = held_[p];
      if (--needs_[p] == 0) {
        held_[p].reset();
        // Nothing else refers to the part: free its bytes now; its budget
        // stays with the assembled range.
        if (part.use_count() == 1) part->bytes.Reset();
      }
      out->parts.push_back(std::move(part));
    }
    const std::byte* data = out->bytes.data();
    return Slice(std::move(out), data, loc.length);
  }

  void Flush() {
    if (unflushed_ == 0) return;
    stats_->RecordDelivered(unflushed_, unflushed_bytes_, 0);
    limiter_->RecordDelivered(unflushed_, unflushed_bytes_, 0);
    unflushed_ = 0;
    unflushed_bytes_ = 0;
  }

  const std::shared_ptr<const PlanMap> map_;
  // Ranges served from memory (empty when none): handed out in turn.
  std::vector<std::optional<Slice>> hits_;
  const Delivery delivery_;
  const std::shared_ptr<StatsRecorder> stats_;
  const std::shared_ptr<LimiterCore> limiter_;
  std::shared_ptr<StreamState> physical_;
  std::vector<std::shared_ptr<Lease>> held_;  // per read, while needed
  std::vector<uint64_t> needs_;    // per read: ranges not yet handed out
  std::vector<uint64_t> missing_;  // per range: reads not yet arrived
  std::deque<uint64_t> ready_;     // as-completed: complete, not handed out
  uint64_t delivered_ = 0;
  uint64_t unflushed_ = 0;
  uint64_t unflushed_bytes_ = 0;
  bool physical_done_ = false;
  Status status_;
};

// Plans `ranges`. In completion order the whole request is planned at once.
// In request order it is planned run by run, a run being consecutive
// requests with non-decreasing offsets (one run for a sorted request), so
// that a read only ever serves consecutive requests: the ordered stream
// then holds at most the reads of its next range, never a growing backlog
// of reads whose other ranges come later.
Result<Plan> PlanInOrder(std::span<const ByteRange> ranges,
                         const PlannerOptions& o, Delivery delivery) {
  if (delivery == Delivery::kAsCompleted) return PlanReads(ranges, o);
  Plan out;
  out.locations.reserve(ranges.size());
  for (size_t a = 0; a < ranges.size();) {
    size_t b = a + 1;
    while (b < ranges.size() && ranges[b].offset >= ranges[b - 1].offset) ++b;
    const ByteRange& r = ranges[a];
    if (b == a + 1 && r.length <= o.max_merged_bytes &&
        r.length <= o.split_bytes) {
      // A run of one range that needs no split: its own read (or none).
      if (r.length == 0) {
        out.locations.push_back({});
      } else {
        out.locations.push_back({out.reads.size(), 0, r.length, 1});
        out.reads.push_back({r.offset, r.length, ReadKind::kWhole});
        out.requested_bytes += r.length;
        out.physical_bytes += r.length;
      }
      a = b;
      continue;
    }
    RANGEIO_ASSIGN_OR_RETURN(Plan run, PlanReads(ranges.subspan(a, b - a), o));
    const size_t base = out.reads.size();
    out.reads.insert(out.reads.end(), run.reads.begin(), run.reads.end());
    for (RangeLocation loc : run.locations) {
      if (loc.read_count != 0) loc.read += base;
      out.locations.push_back(loc);
    }
    out.requested_bytes += run.requested_bytes;
    out.physical_bytes += run.physical_bytes;
    a = b;
  }
  return out;
}

// The largest response budget one range's split parts need at once: they
// are all held until the range is assembled.
bool SplitsFit(const Plan& plan, uint64_t budget_count, uint64_t budget_bytes) {
  for (const RangeLocation& loc : plan.locations) {
    if (loc.read_count < 2) continue;
    uint64_t bytes = 0;
    for (size_t p = loc.read; p < loc.read + loc.read_count; ++p) {
      bytes += plan.reads[p].length;
    }
    if (loc.read_count > budget_count || bytes > budget_bytes) return false;
  }
  return true;
}

// `hits` (empty, or one entry per range) marks the ranges served from
// memory: they get no read, and the plan covers the others.
Result<std::shared_ptr<const PlanMap>> MakePlanMap(
    std::span<const ByteRange> ranges,
    const std::vector<std::optional<Slice>>& hits, PlannerOptions o,
    Delivery delivery, uint64_t budget_count, uint64_t budget_bytes,
    const std::string& name) {
  // A coalesced read or a split part larger than the byte budget would be
  // admitted alone and exceed it; only a requested range may do that.
  o.max_merged_bytes = std::min(o.max_merged_bytes, budget_bytes);
  if (o.split_bytes != PlannerOptions::kNoSplit) {
    o.split_bytes = std::min(o.split_bytes, o.max_merged_bytes);
  }
  std::vector<ByteRange> misses;
  if (!hits.empty()) {
    for (size_t i = 0; i < ranges.size(); ++i) {
      if (!hits[i]) misses.push_back(ranges[i]);
    }
  }
  const std::span<const ByteRange> to_read =
      hits.empty() ? ranges : std::span<const ByteRange>(misses);
  auto map = std::make_shared<PlanMap>();
  RANGEIO_ASSIGN_OR_RETURN(map->plan, PlanInOrder(to_read, o, delivery));
  if (!SplitsFit(map->plan, budget_count, budget_bytes)) {
    // The parts of a split range are all held until it is assembled; when
    // they cannot all fit in the response budget, the range is read whole
    // instead (admitted alone when it exceeds the byte budget).
    o.split_bytes = PlannerOptions::kNoSplit;
    RANGEIO_ASSIGN_OR_RETURN(map->plan, PlanInOrder(to_read, o, delivery));
  }
  if (!hits.empty()) {
    // Back to one location per requested range; a hit has none.
    std::vector<RangeLocation> all(ranges.size());
    for (size_t i = 0, m = 0; i < ranges.size(); ++i) {
      if (!hits[i]) all[i] = map->plan.locations[m++];
    }
    map->plan.locations = std::move(all);
  }
  map->ranges.assign(ranges.begin(), ranges.end());
  map->source_name = name;
  map->Index();
  return std::shared_ptr<const PlanMap>(std::move(map));
}

}  // namespace detail
}  // namespace rangeio

namespace rangeio {

RangeStream::RangeStream(std::shared_ptr<detail::StreamBase> state)
    : state_(std::move(state)) {}
RangeStream::RangeStream(RangeStream&&) noexcept = default;
RangeStream& RangeStream::operator=(RangeStream&& other) noexcept {
  if (this != &other) {
    Cancel();
    state_ = std::move(other.state_);
  }
  return *this;
}
RangeStream::~RangeStream() { Cancel(); }

Result<std::optional<RangeResult>> RangeStream::Next() {
  if (!state_) return Status::Cancelled("stream was moved from");
  return state_->Next();
}

namespace detail {

void StreamAccess::SetWaker(RangeStream& stream, std::shared_ptr<Waker> waker) {
  if (stream.state_) stream.state_->SetWaker(std::move(waker));
}

Result<std::optional<RangeResult>> StreamAccess::Poll(RangeStream& stream,
                                                      bool* pending) {
  if (!stream.state_) return Status::Cancelled("stream was moved from");
  return stream.state_->Poll(pending);
}

}  // namespace detail

void RangeStream::Cancel() {
  if (state_) state_->Finish();
}

size_t RangeStream::size() const { return state_ ? state_->size() : 0; }

Result<Reader> Reader::Open(std::shared_ptr<Source> source,
                            const Options& options,
                            std::shared_ptr<Limiter> limiter) {
  if (!source) return Status::InvalidArgument("Reader::Open: source is null");
  RANGEIO_RETURN_NOT_OK(options.Validate());
  if (!limiter) {
    RANGEIO_ASSIGN_OR_RETURN(limiter, Limiter::Make(options));
  }
  Reader r;
  r.source_ = std::move(source);
  r.limiter_ = std::move(limiter);
  r.stats_ = std::make_shared<detail::StatsRecorder>();
  r.options_ = options;
  return r;
}

Result<Reader> Reader::OpenFile(const std::string& path, const Options& options,
                                std::shared_ptr<Limiter> limiter) {
  RANGEIO_RETURN_NOT_OK(options.Validate());
  LocalFileOptions lo;
  lo.threads = limiter ? limiter->io_concurrency() : options.io_concurrency;
  RANGEIO_ASSIGN_OR_RETURN(std::shared_ptr<Source> source,
                           OpenLocalFile(path, lo));
  return Open(std::move(source), options, std::move(limiter));
}

Reader Reader::Clone() const { return *this; }

Result<RangeStream> Reader::ReadRanges(std::span<const ByteRange> ranges,
                                       Delivery delivery) const {
  RANGEIO_ASSIGN_OR_RETURN(const uint64_t size, source_->Size());
  for (size_t i = 0; i < ranges.size(); ++i) {
    if (ranges[i].length > UINT64_MAX - ranges[i].offset) {
      return Status::InvalidArgument(
          "range " + std::to_string(i) + " of '" + source_->name() +
          "': offset " + std::to_string(ranges[i].offset) + " + length " +
          std::to_string(ranges[i].length) + " overflows 64 bits");
    }
    Status st = ranges[i].CheckWithin(size, source_->name());
    if (!st.ok()) {
      return st.WithContext("request index " + std::to_string(i));
    }
  }
  const PlannerOptions planner =
      options_.planner ? *options_.planner : source_->DefaultPlannerOptions();
  // Ranges the source holds in memory are handed out with no read at all.
  std::vector<std::optional<Slice>> hits;
  const size_t n_hits = source_->ReadCached(ranges, &hits);
  if (n_hits == 0 && !planner.coalesce &&
      planner.split_bytes == PlannerOptions::kNoSplit) {
    // Nothing to plan: each range is one read, as requested.
    auto state = std::make_shared<detail::StreamState>(
        source_, limiter_->core(), stats_,
        std::vector<ByteRange>(ranges.begin(), ranges.end()), delivery,
        options_);
    state->Start();
    return RangeStream(std::move(state));
  }
  const std::shared_ptr<detail::LimiterCore>& core = limiter_->core();
  RANGEIO_ASSIGN_OR_RETURN(
      std::shared_ptr<const detail::PlanMap> map,
      detail::MakePlanMap(ranges, hits, planner, delivery, core->budget_count(),
                          core->budget_bytes(), source_->name()));
  std::vector<ByteRange> reads;
  reads.reserve(map->plan.reads.size());
  for (const PhysicalRead& r : map->plan.reads) reads.push_back(r.range());
  auto physical = std::make_shared<detail::StreamState>(
      source_, core, stats_, std::move(reads), delivery, options_,
      [map](uint64_t p) { return map->Describe(p); });
  auto planned = std::make_shared<detail::PlannedStream>(
      map, std::move(hits), delivery, stats_, core);
  planned->Start(std::move(physical));
  return RangeStream(std::move(planned));
}

Stats Reader::GetStats() const { return stats_->Snapshot(); }

}  // namespace rangeio
