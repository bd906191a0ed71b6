// one_cpu.h (internal to bench/) — runs a measurement's threads on one CPU.
#pragma once

#include <sched.h>

namespace rangeio::bench {

// Pins the calling thread to the CPU it runs on, and so every thread it
// starts meanwhile (they inherit the mask); restores its mask when
// destroyed. The no-disk rows use it to put the consumer and the io_uring
// ring thread on one CPU, which tells the library's work per read from the
// cost of handing each read between two cores. cpu() is -1 where affinity
// cannot be set.
class OneCpu {
 public:
  OneCpu() {
    const int cpu = ::sched_getcpu();
    if (cpu < 0 || cpu >= CPU_SETSIZE ||
        ::sched_getaffinity(0, sizeof saved_, &saved_) != 0) {
      return;
    }
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (::sched_setaffinity(0, sizeof one, &one) == 0) cpu_ = cpu;
  }
  ~OneCpu() {
    if (cpu_ >= 0) (void)::sched_setaffinity(0, sizeof saved_, &saved_);
  }
  OneCpu(const OneCpu&) = delete;
  OneCpu& operator=(const OneCpu&) = delete;

  int cpu() const { return cpu_; }

 private:
  int cpu_ = -1;
  cpu_set_t saved_{};
};

}  // namespace rangeio::bench
