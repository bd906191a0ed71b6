// waker.h (internal) — one thread waiting on several streams at once (a
// PlannedStream consumed by pull whose failed reads are being re-read).
//
// A Waker is the listener of every stream of the unit: each change bumps
// its counter and wakes the waiting thread. The thread reads the counter,
// polls every stream, and sleeps only if the counter has not moved since:
//
//   uint64_t seen = waker->changes();
//   ... Poll each stream until it is pending or at its end ...
//   if (nothing was delivered) waker->WaitForChange(seen, timeout);
//
// Thread-safety: thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "stream/stream_base.h"
#include "util/mutex.h"

namespace rangeio::detail {

class Waker final : public StreamListener {
 public:
  uint64_t changes() const { return changes_.load(std::memory_order_acquire); }

  void OnStreamChange() override EXCLUDES(mu_) {
    changes_.fetch_add(1, std::memory_order_release);
    MutexLock lk(mu_);
    if (waiting_) cv_.NotifyOne();
  }

  // Returns once changes() != seen, or after `timeout` (so that a stalled
  // stream's deadline is checked even when nothing changes).
  void WaitForChange(uint64_t seen, std::chrono::nanoseconds timeout)
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

}  // namespace rangeio::detail
