// latency_tracker.h (internal) — a bounded, decaying latency histogram: the
// recent read latency of one source, from which `hedge=auto` takes its delay.
//
// LatencyHistogram's log-linear buckets (a percentile within 6.25%) as
// 32-bit counts, 3.9 KiB whatever the number of reads; every kHalfLife
// samples every count is halved, so the percentile follows what the source
// does now rather than what it did an hour ago.
//
// Thread-safety: a value; the owner locks around it.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>

#include "rangeio/stats.h"

namespace rangeio::detail {

class LatencyTracker {
 public:
  // 1,024 samples: old reads weigh half after one half-life, and what stays
  // (512 to 1,024 samples) puts a 98th percentile on 10 reads or more.
  static constexpr uint32_t kHalfLife = 1024;

  void Record(uint64_t nanos) {
    ++buckets_[LatencyHistogram::BucketOf(nanos)];
    ++weight_;
    if (++since_decay_ < kHalfLife) return;
    since_decay_ = 0;
    weight_ = 0;
    for (uint32_t& b : buckets_) {
      b /= 2;
      weight_ += b;
    }
  }

  // Samples the histogram holds now (decayed).
  uint64_t weight() const { return weight_; }

  // Upper bound of the bucket holding quantile q; 0 when empty.
  uint64_t Percentile(double q) const {
    if (weight_ == 0) return 0;
    // The smallest value with at least q of the samples at or below it (the
    // epsilon keeps 0.98 x 100 from rounding up to 99).
    const auto rank = std::max<uint64_t>(
        1, static_cast<uint64_t>(
               std::ceil(q * static_cast<double>(weight_) - 1e-9)));
    uint64_t seen = 0;
    for (int b = 0; b < LatencyHistogram::kBuckets; ++b) {
      seen += buckets_[b];
      if (seen >= rank) return LatencyHistogram::BucketUpperBound(b);
    }
    return LatencyHistogram::BucketUpperBound(LatencyHistogram::kBuckets - 1);
  }

 private:
  std::array<uint32_t, LatencyHistogram::kBuckets> buckets_{};
  uint64_t weight_ = 0;
  uint32_t since_decay_ = 0;
};

}  // namespace rangeio::detail
