#include "util/deadline_timer.h"

#include <sys/prctl.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include "util/clock.h"
#include "util/thread_name.h"

namespace rangeio::detail {

DeadlineTimer& DeadlineTimer::Get() {
  // Leaked on purpose: sources may outlive static destruction.
  static auto* timer =
      new DeadlineTimer;  // NOLINT(cppcoreguidelines-owning-memory)
  return *timer;
}

DeadlineTimer::DeadlineTimer() {
  std::thread([this] {
    NameThisThread("rio-timer");
    // Deadlines are sub-millisecond: ask the kernel not to coalesce this
    // thread's wake-ups (the default slack is 50 us).
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    Run();
  }).detach();
}

uint64_t DeadlineTimer::Schedule(uint64_t due_ns, std::function<void()> fn,
                                 Precision precision) {
  bool wake = false;
  uint64_t id = 0;
  {
    MutexLock lk(mu_);
    id = next_id_++;
    pending_.emplace(id, std::move(fn));
    wake = heap_.empty() || due_ns < heap_.front().due_ns;
    heap_.push_back({due_ns, id, precision == Precision::kPrecise});
    std::push_heap(heap_.begin(), heap_.end(), std::greater<>());
  }
  if (wake) cv_.NotifyOne();
  return id;
}

bool DeadlineTimer::Cancel(uint64_t id) {
  std::function<void()> dropped;  // destroyed unlocked: it may own anything
  MutexLock lk(mu_);
  auto it = pending_.find(id);
  if (it == pending_.end()) return false;
  dropped = std::move(it->second);
  pending_.erase(it);
  return true;
}

std::function<void()> DeadlineTimer::TakeDueLocked(uint64_t now) {
  while (!heap_.empty() && heap_.front().due_ns <= now) {
    std::pop_heap(heap_.begin(), heap_.end(), std::greater<>());
    const uint64_t id = heap_.back().id;
    heap_.pop_back();
    auto it = pending_.find(id);
    if (it == pending_.end()) continue;  // cancelled
    std::function<void()> fn = std::move(it->second);
    pending_.erase(it);
    return fn;
  }
  return {};
}

void DeadlineTimer::Run() {
  MutexLock lk(mu_);
  for (;;) {
    if (heap_.empty()) {
      cv_.Wait(lk);
      continue;
    }
    const uint64_t now = NowNanos();
    if (std::function<void()> fn = TakeDueLocked(now)) {
      lk.Unlock();
      fn();
      fn = nullptr;  // its captures go before the lock is taken again
      lk.Lock();
      continue;
    }
    if (heap_.empty()) continue;
    const Entry& next = heap_.front();
    const uint64_t wait = next.due_ns - now;
    if (!next.precise || wait > kSpinWindowNanos) {
      const uint64_t sleep = next.precise ? wait - kSpinWindowNanos : wait;
      cv_.WaitFor(lk, std::chrono::nanoseconds(sleep));
      continue;
    }
    // Inside a precise callback's spin window: yield the core (without the
    // lock, so callbacks can still be scheduled) and look again.
    lk.Unlock();
    std::this_thread::yield();
    lk.Lock();
  }
}

}  // namespace rangeio::detail
