// tests/support/gated_source.h — an instrumented Source for scheduling tests.
//
// GatedSource is a Source of `size` synthetic bytes (PatternByteAt) that
// records how many reads are outstanding right now and at the peak, and that
// can hold every read until the test releases it: one at a time, N at a time,
// all, or a chosen one (by offset or by the scheduler's tag). A chosen offset
// can be made to fail with an IoError. With the gate held, the test decides
// exactly when each read completes, so concurrency assertions are
// deterministic instead of timing-dependent.
//
// Modes:
//   kHold        every read waits in the gate until released;
//   kPassInline  every read completes inside Read() (the memory fast path);
//   kPassAsync   every read completes on the gate's own completion thread.
//
// A released read completes on the thread that released it. The outstanding
// count drops just before the sink is called, so a scheduler that admits the
// next read from inside OnReadDone never shows C + 1 outstanding.
//
// Thread-safety: every method may be called concurrently from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "rangeio/byte_range.h"
#include "rangeio/slice.h"
#include "rangeio/source.h"
#include "rangeio/status.h"

namespace rangeio::testing {

// The byte any GatedSource holds at `offset` (a hash: neighbours differ).
std::byte PatternByteAt(uint64_t offset);
// True when `bytes` equal PatternByteAt over `range`.
bool MatchesPattern(ByteRange range, std::span<const std::byte> bytes);

class GatedSource final : public Source {
 public:
  enum class Mode { kHold, kPassInline, kPassAsync };

  GatedSource(std::string name, uint64_t size, Mode mode = Mode::kHold);
  ~GatedSource() override;

  static std::shared_ptr<GatedSource> Make(std::string name, uint64_t size,
                                           Mode mode = Mode::kHold) {
    return std::make_shared<GatedSource>(std::move(name), size, mode);
  }

  // Source.
  const std::string& name() const override { return name_; }
  Result<uint64_t> Size() override;
  void Read(ByteRange range, ReadSink* sink, uint64_t tag) override;
  // A held read of (sink, tag), or every held read of `sink` with
  // kAllReads, completes at once with Cancelled (counted by cancelled()); a
  // read no longer held is left alone.
  void Cancel(ReadSink* sink, uint64_t tag) override;

  // Switching to a pass mode releases every held read (kPassInline: on this
  // thread; kPassAsync: on the completion thread).
  void SetMode(Mode mode);

  // Switches every live GatedSource to kPassAsync: how a test that stops
  // early (a failed ASSERT) lets its consumers finish instead of hanging.
  static void PassAllLiveGates();

  // Releases up to `n` held reads, oldest first; returns how many.
  size_t ReleaseOldest(size_t n = 1);
  // Releases up to `n` held reads, oldest first, completing each run of
  // reads of one sink with one ReadSink::OnReadsDone; returns how many.
  size_t ReleaseOldestTogether(size_t n);
  // Releases the newest held read; false when none is held.
  bool ReleaseNewest();
  // Releases the oldest held read starting at `offset`; false when none.
  bool ReleaseOffset(uint64_t offset);
  // Releases the held read submitted with `tag`; false when none.
  bool ReleaseTag(uint64_t tag);
  // Releases every held read; returns how many.
  size_t ReleaseAll();

  // Reads starting at `offset` complete with IoError(cause) from now on.
  // The cause deliberately does not name the range: the library must.
  void FailOffset(uint64_t offset, std::string cause = "injected failure");
  // Size() fails with `status` from now on.
  void FailSize(Status status);

  // Observations.
  size_t outstanding() const;       // submitted, not yet completed
  size_t peak_outstanding() const;  // max of outstanding() ever
  size_t held() const;              // waiting in the gate
  uint64_t reads_started() const;
  uint64_t reads_completed() const;
  uint64_t reads_failed() const;
  uint64_t cancelled() const;       // held reads that Cancel completed
  uint64_t bytes_returned() const;  // bytes of successful reads
  std::vector<ByteRange> started_ranges() const;  // in submission order
  void ClearStarted();  // forgets started_ranges() so far
  std::vector<ByteRange> held_ranges() const;  // oldest first
  std::vector<uint64_t> held_tags() const;     // oldest first

  // Waits until `pred(*this)` holds (re-evaluated on every gate event);
  // false after `timeout`. The timeout only guards against a hang.
  bool WaitFor(const std::function<bool(const GatedSource&)>& pred,
               std::chrono::milliseconds timeout = std::chrono::seconds(10));
  bool WaitForOutstanding(
      size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(10));
  bool WaitForHeld(
      size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(10));
  bool WaitForStarted(
      uint64_t n, std::chrono::milliseconds timeout = std::chrono::seconds(10));

 private:
  struct Pending {
    ByteRange range;
    ReadSink* sink = nullptr;
    uint64_t tag = 0;
  };
  // Everything the completion thread touches, shared with it: the last
  // reference to a GatedSource may be dropped inside a completion callback on
  // that very thread (the scheduler lets go of its source once its last read
  // is done), which must then neither join itself nor outlive the state.
  struct State {
    std::mutex mu;
    std::condition_variable changed;
    Mode mode = Mode::kHold;
    std::deque<Pending> held;
    std::deque<Pending> async_queue;
    std::set<uint64_t> fail_offsets;
    std::string fail_cause;
    Status size_status;
    size_t outstanding = 0;
    size_t peak_outstanding = 0;
    uint64_t reads_started = 0;
    uint64_t reads_completed = 0;
    uint64_t reads_failed = 0;
    uint64_t cancelled = 0;
    uint64_t bytes_returned = 0;
    std::vector<ByteRange> started;
    bool stopping = false;
  };

  // Completes `p` on this thread. Must be called without State::mu held.
  static void Complete(State& st, const Pending& p);
  // The result of `p` (its bytes or its injected failure), counted.
  static Result<Slice> Finish(State& st, const Pending& p);
  static void CompletionLoop(std::shared_ptr<State> st);
  // Takes the held read chosen by `pick` (an index into held, or -1).
  bool ReleaseWhere(
      const std::function<long(const std::deque<Pending>&)>& pick);

  const std::string name_;
  const uint64_t size_;
  const std::shared_ptr<State> st_;
  std::thread completer_;
};

}  // namespace rangeio::testing
