// deadline_timer.h (internal) — the process's one deadline timer: callbacks
// run at their deadlines by one thread that keeps them in a min-heap.
//
// Every part of the library that waits for a time rather than an event
// schedules here: the simulated store's reads, hedged reads, a push
// stream's stall check. One thread for all of them, whatever the number
// of sources; a callback runs on it, so it must be short (complete a read,
// issue a hedge) and may schedule or cancel others.
//
// Precision: a precise callback (a simulated read of 1 ms) is run within
// microseconds of its deadline: the thread sleeps until kSpinWindow before
// it and yields in a loop for the rest, since a futex wake-up lands tens of
// microseconds late on a VM. A coarse one (a hedge, a stall check) is run
// when a plain timed wait returns, which costs no spinning.
//
// Thread-safety: thread-safe. Lifetime: created on first use and never
// destroyed (callbacks may be scheduled during static destruction).
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

#include "util/mutex.h"

namespace rangeio::detail {

class DeadlineTimer {
 public:
  enum class Precision { kCoarse, kPrecise };

  static DeadlineTimer& Get();

  // Runs `fn` on the timer thread at `due_ns` (NowNanos' clock), after the
  // callbacks due earlier and those due at the same time scheduled before
  // it. Returns its id for Cancel.
  uint64_t Schedule(uint64_t due_ns, std::function<void()> fn,
                    Precision precision = Precision::kCoarse) EXCLUDES(mu_);

  // Removes a callback that has not started; true when it was removed (it
  // never runs), false when it ran, runs now or never existed.
  bool Cancel(uint64_t id) EXCLUDES(mu_);

 private:
  // A futex wake-up on a timer lands tens of microseconds late on a VM,
  // which adds up along a chain of reads (bench straggler's 1 ms reads).
  static constexpr uint64_t kSpinWindowNanos = 200'000;

  struct Entry {
    uint64_t due_ns;
    uint64_t id;  // also the order among equal deadlines
    bool precise;
    bool operator>(const Entry& o) const {
      return due_ns != o.due_ns ? due_ns > o.due_ns : id > o.id;
    }
  };

  DeadlineTimer();
  void Run() EXCLUDES(mu_);
  // The next callback due now, removed from the heap; empty when none is.
  std::function<void()> TakeDueLocked(uint64_t now) REQUIRES(mu_);

  Mutex mu_;
  CondVar cv_;
  std::vector<Entry> heap_ GUARDED_BY(mu_);  // std::push_heap, std::greater
  // Callbacks not yet started; an entry whose id is missing was cancelled.
  std::unordered_map<uint64_t, std::function<void()>> pending_ GUARDED_BY(mu_);
  uint64_t next_id_ GUARDED_BY(mu_) = 1;
};

}  // namespace rangeio::detail
