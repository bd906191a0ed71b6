#include "rangeio/stats.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <sstream>

namespace rangeio {

// Bucket b covers a power of two split into 2^kSubBits linear steps: values
// below 2^kSubBits get a bucket each; above, the top kSubBits+1 bits decide.
int LatencyHistogram::BucketOf(uint64_t v) {
  if (v < (1u << kSubBits)) return static_cast<int>(v);
  const int msb = 63 - std::countl_zero(v);
  const int shift = msb - kSubBits;
  const int sub = static_cast<int>((v >> shift) & ((1u << kSubBits) - 1));
  return ((shift + 1) << kSubBits) + sub;
}

uint64_t LatencyHistogram::BucketUpperBound(int b) {
  if (b < (1 << kSubBits)) return static_cast<uint64_t>(b);
  const int shift = (b >> kSubBits) - 1;
  const uint64_t sub = static_cast<uint64_t>(b & ((1 << kSubBits) - 1));
  const uint64_t lower = ((uint64_t{1} << kSubBits) | sub) << shift;
  const uint64_t width = uint64_t{1} << shift;
  return lower + (width - 1);
}

void LatencyHistogram::Record(uint64_t nanos) {
  ++buckets_[BucketOf(nanos)];
  ++count_;
  sum_ += nanos;
  min_ = std::min(min_, nanos);
  max_ = std::max(max_, nanos);
}

void LatencyHistogram::Merge(const LatencyHistogram& o) {
  for (int i = 0; i < kBuckets; ++i) buckets_[i] += o.buckets_[i];
  count_ += o.count_;
  sum_ += o.sum_;
  min_ = std::min(min_, o.min_);
  max_ = std::max(max_, o.max_);
}

uint64_t LatencyHistogram::Percentile(double q) const {
  if (count_ == 0) return 0;
  q = std::clamp(q, 0.0, 1.0);
  const uint64_t rank = std::max<uint64_t>(
      1, static_cast<uint64_t>(std::ceil(q * static_cast<double>(count_))));
  uint64_t seen = 0;
  for (int b = 0; b < kBuckets; ++b) {
    seen += buckets_[b];
    if (seen >= rank) return std::min(BucketUpperBound(b), max_);
  }
  return max_;
}

std::string Stats::ToString() const {
  const auto us = [](uint64_t nanos) {
    return static_cast<double>(nanos) / 1e3;
  };
  std::ostringstream o;
  o << "physical_reads " << physical_reads << "\nphysical_bytes "
    << physical_bytes << "\nread_errors " << read_errors
    << "\nranges_delivered " << ranges_delivered << "\nlogical_bytes "
    << logical_bytes << "\nreads_cancelled " << reads_cancelled
    << "\nread_latency_p50_us " << us(read_latency.Percentile(0.5))
    << "\nread_latency_p99_us " << us(read_latency.Percentile(0.99))
    << "\nread_latency_max_us " << us(read_latency.max_nanos())
    << "\nranges_retried " << ranges_retried << "\nhedges_issued "
    << hedges_issued << "\nhedges_won " << hedges_won << "\nhedged_bytes "
    << hedged_bytes << "\nin_flight " << in_flight << "\npeak_in_flight "
    << peak_in_flight << "\nretained_count " << retained_count
    << "\npeak_retained_count " << peak_retained_count << "\nretained_bytes "
    << retained_bytes << "\npeak_retained_bytes " << peak_retained_bytes
    << "\nwaiting_streams " << waiting_streams << "\n";
  return o.str();
}

}  // namespace rangeio
