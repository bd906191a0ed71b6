#include "util/clock.h"

#include <chrono>

#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>
#endif

namespace rangeio::detail {
namespace {

uint64_t SteadyNanos() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

#if defined(__x86_64__)
bool InvariantTsc() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (static_cast<unsigned>(__get_cpuid_max(0x80000000u, nullptr)) <
      0x80000007u)
    return false;
  __cpuid(0x80000007u, a, b, c, d);
  return (d & (1u << 8)) != 0;
}

struct TscClock {
  bool usable = false;
  uint64_t tsc0 = 0;
  uint64_t ns0 = 0;
  double ns_per_tick = 0;

  TscClock() {
    if (!InvariantTsc()) return;
    ns0 = SteadyNanos();
    tsc0 = __rdtsc();
    uint64_t ns1 = ns0;
    while (ns1 - ns0 < 2'000'000) ns1 = SteadyNanos();
    const uint64_t tsc1 = __rdtsc();
    if (tsc1 <= tsc0) return;
    ns_per_tick =
        static_cast<double>(ns1 - ns0) / static_cast<double>(tsc1 - tsc0);
    usable = true;
  }
};
#endif

}  // namespace

uint64_t NowNanos() {
#if defined(__x86_64__)
  static const TscClock clock;
  if (clock.usable) {
    return clock.ns0 +
           static_cast<uint64_t>(static_cast<double>(__rdtsc() - clock.tsc0) *
                                 clock.ns_per_tick);
  }
#endif
  return SteadyNanos();
}

}  // namespace rangeio::detail
