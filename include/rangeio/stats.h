// rangeio/stats.h — bounded diagnostics.
//
// Every aggregate here has a fixed size, whatever the number of reads:
// counters, sums, min/max and a fixed-bucket log-linear latency histogram.
// A Limiter keeps one for all its readers and a Reader one for its source
// handle (shared with its clones). GetStats() returns a snapshot. Once a
// stream has delivered its end, both hold all of its reads and deliveries
// (a dropped stream's, once its last read in flight completed); occupancy
// (below) is live: a completing thread may return a permit just after.
//
// Thread-safety: LatencyHistogram and Stats are plain values; the recorders
// that fill them inside the library are thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "rangeio/export.h"

namespace rangeio {

// Latencies in nanoseconds: one bucket per value below 16, then 16 linear
// sub-buckets per power of two up to 2^64 - 1: 976 buckets (7.6 KiB),
// relative error of a percentile under 6.25%.
class RANGEIO_EXPORT LatencyHistogram {
 public:
  static constexpr int kSubBits = 4;
  // BucketOf(UINT64_MAX) is the last one.
  static constexpr int kBuckets = (65 - kSubBits) << kSubBits;

  void Record(uint64_t nanos);
  void Merge(const LatencyHistogram& other);

  uint64_t count() const { return count_; }
  uint64_t sum_nanos() const { return sum_; }
  uint64_t min_nanos() const { return count_ ? min_ : 0; }
  uint64_t max_nanos() const { return max_; }
  // Upper bound of the bucket holding quantile q in [0, 1]; 0 when empty.
  uint64_t Percentile(double q) const;

  static int BucketOf(uint64_t nanos);
  static uint64_t BucketUpperBound(int bucket);

 private:
  std::array<uint64_t, kBuckets> buckets_{};
  uint64_t count_ = 0;
  uint64_t sum_ = 0;
  uint64_t min_ = UINT64_MAX;
  uint64_t max_ = 0;
};

struct RANGEIO_EXPORT Stats {
  // Backend reads that completed (successfully or not) and how.
  uint64_t physical_reads = 0;
  uint64_t physical_bytes = 0;  // bytes the backends returned
  uint64_t read_errors = 0;     // backend reads that failed
  // Requested ranges handed to callers and their bytes.
  uint64_t ranges_delivered = 0;
  uint64_t logical_bytes = 0;
  // Reads admitted but dropped before they completed (stream dropped or
  // ended by an error); queued reads that were never admitted are not counted.
  uint64_t reads_cancelled = 0;
  LatencyHistogram read_latency;  // submit to completion, per backend read
  // Ranges read again alone because the read they shared with others
  // failed (ReadOptions::per_range_errors).
  uint64_t ranges_retried = 0;

  // Hedged reads (Options::hedge; the backend reads above count each
  // hedged read once, as the stream saw it): second copies issued of reads
  // still outstanding, how many of them answered first, and the bytes they
  // asked for again (a loser cancelled in flight moves fewer).
  uint64_t hedges_issued = 0;
  uint64_t hedges_won = 0;
  uint64_t hedged_bytes = 0;

  // Limiter only (zero in a Reader's stats): current and peak occupancy.
  // Hedges in flight count here too: at most the limiter's hedge reserve
  // on top of io_concurrency and the response budget (Options::hedge).
  uint64_t in_flight = 0;
  uint64_t peak_in_flight = 0;
  uint64_t retained_count = 0;
  uint64_t peak_retained_count = 0;
  uint64_t retained_bytes = 0;
  uint64_t peak_retained_bytes = 0;
  uint64_t waiting_streams = 0;  // streams queued for a permit right now

  // One line per figure, for humans.
  std::string ToString() const;
};

}  // namespace rangeio
