// clock.h (internal) — a cheap monotonic clock for per-read latency stats.
#pragma once

#include <cstdint>

namespace rangeio::detail {

// Monotonic nanoseconds (arbitrary epoch). On x86-64 with an invariant TSC
// (CPUID 0x80000007 EDX bit 8) it reads the TSC, scaled by a ratio measured
// against steady_clock at first use: about half the cost of
// steady_clock::now(), and every range reads the clock
// twice. Elsewhere it is steady_clock. Thread-safe.
uint64_t NowNanos();

}  // namespace rangeio::detail
