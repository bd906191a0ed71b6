// Polling RangeStreams: one thread consuming several streams as one
// as-completed unit (a BatchedReader's batch spanning several sources).
//
// A Waker is shared by the streams of one unit: every change a consumer may
// wait for (a read completed, the stream failed or was cancelled) bumps its
// counter and wakes the consumer. The consumer reads the counter, polls
// every stream, and sleeps only if the counter has not moved since:
//
//   uint64_t seen = waker->changes();
//   ... Poll each stream until it is pending or at its end ...
//   if (nothing was delivered) waker->WaitForChange(seen);
//
// Thread-safety: Waker is thread-safe. Poll follows RangeStream: one thread
// at a time per stream.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>

#include "util/mutex.h"
#include "rangeio/reader.h"

namespace rangeio::detail {

class Waker {
 public:
  uint64_t changes() const { return changes_.load(std::memory_order_acquire); }

  // Called by a stream (under its own lock: mu_ is a leaf).
  void Notify() EXCLUDES(mu_) {
    changes_.fetch_add(1, std::memory_order_release);
    MutexLock lk(mu_);
    if (waiting_) cv_.NotifyOne();
  }

  // Returns once changes() != seen, or after `timeout` (so that a stalled
  // stream's deadline is checked even when nothing changes). No spinning:
  // a batch's reads are typically remote (milliseconds), and with one
  // dispatcher per batch in flight, yield loops take the cores from the
  // HTTP loop thread that completes the reads (bench blob shows it).
  void WaitForChange(uint64_t seen, std::chrono::milliseconds timeout)
      EXCLUDES(mu_) {
    MutexLock lk(mu_);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    waiting_ = true;
    while (changes() == seen) {
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) break;
      cv_.WaitFor(lk, deadline - now);
    }
    waiting_ = false;
  }

 private:
  std::atomic<uint64_t> changes_{0};
  Mutex mu_;
  CondVar cv_;
  bool waiting_ GUARDED_BY(mu_) = false;
};

struct StreamAccess {
  // From now on every change of `stream` notifies `waker` too.
  static void SetWaker(RangeStream& stream, std::shared_ptr<Waker> waker);
  // Next() that does not block: sets *pending and returns std::nullopt when
  // no result is ready yet; otherwise as Next() (std::nullopt at the end).
  static Result<std::optional<RangeResult>> Poll(RangeStream& stream,
                                                 bool* pending);
};

}  // namespace rangeio::detail
