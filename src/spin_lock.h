// spin_lock.h (internal) — take a std::mutex, spinning briefly first.
#pragma once

#include <mutex>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace rangeio::detail {

// Tries the lock this many times, with a CPU pause between tries (about
// 1-5 us in all), before blocking in the kernel.
inline constexpr int kLockSpins = 64;

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

// Re-locks `lk` (unlocked), first trying kLockSpins times with a CPU pause
// between tries. For the locks a completion thread and a consumer thread
// take for every read (a stream's, the limiter's): their critical sections
// last tens to hundreds of nanoseconds, so a thread that finds the lock
// taken nearly always gets it within a few tries, where blocking costs a
// futex sleep on this thread and a futex wake-up on the holder's (measured
// on 4 KiB O_DIRECT reads through io_uring: 2/3 of all futex calls were such
// contention on the stream's lock between the ring thread and the
// consumer). Stays a std::mutex, so std::condition_variable still works.
inline void RelockSpinning(std::unique_lock<std::mutex>& lk) {
  for (int i = 0; i < kLockSpins; ++i) {
    if (lk.try_lock()) return;
    CpuRelax();
  }
  lk.lock();
}

// Locks `m` like std::unique_lock does, spinning first as RelockSpinning.
inline std::unique_lock<std::mutex> LockSpinning(std::mutex& m) {
  std::unique_lock<std::mutex> lk(m, std::defer_lock);
  RelockSpinning(lk);
  return lk;
}

}  // namespace rangeio::detail
