// tests/support/test_util.h — helpers shared by the rangeio tests.
//
// WaitUntil polls a condition with a generous timeout that only guards
// against a hang (never a speed assertion). StreamConsumer drains a
// RangeStream on its own thread, as a real caller would, recording what it
// got; it can keep every slice it is handed (a stalling consumer) until told
// to let go. Drain() does the same on the calling thread. OpenReader, Iota,
// ExpectEachIndexOnce serve the reader tests; MustPlan, kMax, KiB and MiB the
// planner tests.
//
// Thread-safety: StreamConsumer's accessors may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "rangeio/rangeio.h"

namespace rangeio::testing {

inline constexpr std::chrono::milliseconds kHangGuard{10'000};

// Polls `pred` until it holds; false after `timeout`.
bool WaitUntil(const std::function<bool()>& pred,
               std::chrono::milliseconds timeout = kHangGuard);

// Gives other threads a chance to do something they must not do.
void GiveThreadsAChance(
    std::chrono::milliseconds ms = std::chrono::milliseconds(20));

// `n` ranges of `length` bytes, range i at offset i * stride: with a stride
// far above the length, no sane coalescing merges them.
std::vector<ByteRange> SpreadRanges(size_t n, uint64_t length,
                                    uint64_t stride = 1 << 20,
                                    uint64_t first_offset = 0);

// Options for a limiter of `c` permits; the rest default unless given.
Options LimitOptions(
    uint32_t c, uint32_t budget_count = 0,
    uint64_t budget_bytes = LimiterOptions::kDefaultResponseBudgetBytes);

// A memory buffer whose byte i is PatternByteAt(i).
Slice PatternBuffer(size_t size);

// Writes `bytes` to a new file at `path` (PatternBuffer(n): n pattern bytes).
Status WriteFileBytes(const std::string& path, const Slice& bytes);

// A new directory under the test temp dir, removed with the files written
// through it when it is destroyed.
class ScratchDir {
 public:
  ScratchDir();  // a failure of the test when it cannot be made
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }
  // Writes a file `name` of `size` pattern bytes (PatternByteAt) in it;
  // returns its path.
  std::string WriteFile(const std::string& name, size_t size);

 private:
  std::string path_;
  std::vector<std::string> files_;
};

// Bytes of `slice` as a vector (for EXPECT_EQ with good messages).
std::vector<std::byte> Bytes(const Slice& slice);

struct DrainResult {
  Status status;                // OK when the stream ended normally
  std::vector<size_t> indexes;  // in delivery order
  std::vector<size_t> sizes;    // parallel to indexes
  size_t bad_bytes = 0;         // results whose bytes did not match
  std::vector<Slice> slices;    // parallel to indexes, with keep_slices
};

// The content function of a synthetic source (PatternByteAt,
// SimulatedByteAt).
using ByteAtFn = std::byte (*)(uint64_t);

// True when `bytes` equal `byte_at` over `range`.
bool MatchesBytes(ByteRange range, std::span<const std::byte> bytes,
                  ByteAtFn byte_at);

// Calls Next() until the end or an error. With `ranges`, checks each
// result's bytes against `byte_at` over ranges[index]. Releases each slice at
// once unless `keep_slices` (which holds response budget: only for requests
// smaller than the budget).
DrainResult Drain(RangeStream& stream, std::span<const ByteRange> ranges = {},
                  ByteAtFn byte_at = nullptr, bool keep_slices = false);

// Waits until nothing is in flight or retained on `l` and no stream waits:
// every permit and every byte of response budget came back.
void ExpectLimiterDrains(const Limiter& l);

// Reader::Open that expects success (a test failure otherwise).
Reader OpenReader(std::shared_ptr<Source> source, const Options& o = {},
                  std::shared_ptr<Limiter> limiter = nullptr);

// 0, 1, ..., n - 1.
std::vector<size_t> Iota(size_t n);

// Every index in [0, n) exactly once.
void ExpectEachIndexOnce(std::vector<size_t> idx, size_t n);

// The planner tests' sizes: the last offset there is, and binary units.
inline constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
inline constexpr uint64_t KiB = 1024;
inline constexpr uint64_t MiB = 1024 * KiB;

// PlanReads that expects success (a test failure and an empty plan
// otherwise).
Plan MustPlan(const std::vector<ByteRange>& ranges, const PlannerOptions& o);

// A thread that is joined however the test exits: if it is still running at
// destruction (a failed ASSERT left reads held), every live GatedSource is
// switched to pass mode first so that it can finish.
class ScopedThread {
 public:
  template <typename F>
  explicit ScopedThread(F&& f) : thread_(std::forward<F>(f)) {}
  ScopedThread(const ScopedThread&) = delete;
  ScopedThread& operator=(const ScopedThread&) = delete;
  ~ScopedThread();
  void join() { thread_.join(); }

 private:
  std::thread thread_;
};

class StreamConsumer {
 public:
  // Drains `stream` on a new thread. With `ranges`, checks every result's
  // bytes against `byte_at` (default PatternByteAt). With hold_slices, keeps
  // every slice until ReleaseSlices() (a consumer that stalls).
  StreamConsumer(RangeStream stream, std::vector<ByteRange> ranges = {},
                 bool hold_slices = false, ByteAtFn byte_at = nullptr);
  // Joins the thread. Aborts loudly if it does not finish within the hang
  // guard (the test left reads held, or the library hangs).
  ~StreamConsumer();

  StreamConsumer(const StreamConsumer&) = delete;
  StreamConsumer& operator=(const StreamConsumer&) = delete;

  bool WaitForCount(size_t n, std::chrono::milliseconds timeout = kHangGuard);
  bool WaitForDone(std::chrono::milliseconds timeout = kHangGuard);

  size_t count() const;
  bool done() const;
  std::vector<size_t> indexes() const;
  size_t bad_bytes() const;  // results whose bytes did not match
  size_t held_slices() const;
  // Valid once done(): OK when the stream ended with nullopt.
  Status final_status() const;
  // Drops every held slice (and stops holding new ones if `stop_holding`).
  void ReleaseSlices(bool stop_holding = true);

 private:
  void Run();

  RangeStream stream_;
  const std::vector<ByteRange> ranges_;
  const ByteAtFn byte_at_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool hold_;
  std::vector<size_t> indexes_;
  std::vector<Slice> held_;
  size_t bad_bytes_ = 0;
  bool done_ = false;
  Status final_status_;
  std::thread thread_;
};

}  // namespace rangeio::testing
