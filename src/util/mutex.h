// mutex.h (internal) — a std::mutex that clang's -Wthread-safety can check.
//
// libstdc++'s std::mutex carries no capability attributes, so members marked
// GUARDED_BY(mu_) are only checked when mu_ is a rangeio::detail::Mutex and
// it is taken through MutexLock. Under gcc the attributes expand to nothing.
// Thread-safety: Mutex and CondVar are safe to share; a MutexLock belongs to
// the thread that made it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#if defined(__clang__)
#define RANGEIO_TSA(x) __attribute__((x))
#else
#define RANGEIO_TSA(x)
#endif

#define CAPABILITY(x) RANGEIO_TSA(capability(x))
#define SCOPED_CAPABILITY RANGEIO_TSA(scoped_lockable)
#define GUARDED_BY(x) RANGEIO_TSA(guarded_by(x))
#define PT_GUARDED_BY(x) RANGEIO_TSA(pt_guarded_by(x))
#define REQUIRES(...) RANGEIO_TSA(requires_capability(__VA_ARGS__))
#define EXCLUDES(...) RANGEIO_TSA(locks_excluded(__VA_ARGS__))
#define ACQUIRE(...) RANGEIO_TSA(acquire_capability(__VA_ARGS__))
#define RELEASE(...) RANGEIO_TSA(release_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) RANGEIO_TSA(try_acquire_capability(__VA_ARGS__))
#define ASSERT_CAPABILITY(x) RANGEIO_TSA(assert_capability(x))
#define NO_THREAD_SAFETY_ANALYSIS RANGEIO_TSA(no_thread_safety_analysis)

namespace rangeio::detail {

// Tries a contended lock this many times, with a CPU pause between tries
// (about 1-5 us in all), before blocking in the kernel.
inline constexpr int kLockSpins = 64;

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  bool TryLock() TRY_ACQUIRE(true) { return mu_.try_lock(); }

  // Spins kLockSpins times before blocking. For the locks a completion
  // thread and a consumer take for every read (a stream's, the limiter's,
  // an io_uring ring's queue and its registered-buffer free lists):
  // their critical sections last well under a microsecond, so a spin nearly
  // always wins where blocking costs a futex sleep and a wake-up
  // (bench local, 4 KiB O_DIRECT reads, shows the difference).
  void LockSpinning() ACQUIRE() {
    for (int i = 0; i < kLockSpins; ++i) {
      if (mu_.try_lock()) return;
      CpuRelax();
    }
    mu_.lock();
  }

  // Tells the analysis that the caller holds this mutex (checked nowhere).
  void AssertHeld() const ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds a Mutex for its scope; Unlock()/Lock() let a scope drop it around a
// call that must run unlocked (a callback, a backend submit).
class SCOPED_CAPABILITY MutexLock {
 public:
  enum class Spin { kNo, kYes };
  explicit MutexLock(Mutex& mu, Spin spin = Spin::kNo) ACQUIRE(mu)
      : mu_(mu), spin_(spin) {
    Lock();
  }
  ~MutexLock() RELEASE() {
    if (held_) mu_.Unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Lock() ACQUIRE() { Lock(spin_); }
  // Re-locks spinning or not, whatever this lock was made with.
  void Lock(Spin spin) ACQUIRE() {
    spin == Spin::kYes ? mu_.LockSpinning() : mu_.Lock();
    held_ = true;
  }
  void Unlock() RELEASE() {
    held_ = false;
    mu_.Unlock();
  }

 private:
  friend class CondVar;
  Mutex& mu_;
  const Spin spin_;
  bool held_ = false;
};

// A condition variable over Mutex. Waits take the held MutexLock; write the
// predicate as a loop around Wait() in the caller, where the analysis sees
// the lock held (a predicate lambda is analysed as a function of its own).
class CondVar {
 public:
  void Wait(MutexLock& lock) {
    std::unique_lock<std::mutex> lk(lock.mu_.mu_, std::adopt_lock);
    cv_.wait(lk);
    lk.release();
  }
  // Returns false if `timeout` passed without a notification.
  template <class Rep, class Period>
  bool WaitFor(MutexLock& lock, std::chrono::duration<Rep, Period> timeout) {
    std::unique_lock<std::mutex> lk(lock.mu_.mu_, std::adopt_lock);
    const bool notified =
        cv_.wait_for(lk, timeout) == std::cv_status::no_timeout;
    lk.release();
    return notified;
  }
  void NotifyOne() { cv_.notify_one(); }
  void NotifyAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace rangeio::detail
