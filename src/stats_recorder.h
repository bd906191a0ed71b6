// stats_recorder.h (internal) — thread-safe accumulation of Stats.
#pragma once

#include <cstdint>
#include <mutex>

#include "rangeio/stats.h"

namespace rangeio::detail {

// Fixed-size aggregates behind one mutex. Thread-safe.
class StatsRecorder {
 public:
  void RecordReads(const uint64_t* latency_ns, uint32_t n, uint64_t bytes,
                   uint64_t errors) {
    std::lock_guard lk(mu_);
    s_.physical_reads += n;
    s_.physical_bytes += bytes;
    s_.read_errors += errors;
    for (uint32_t i = 0; i < n; ++i) s_.read_latency.Record(latency_ns[i]);
  }
  void RecordDelivered(uint64_t ranges, uint64_t bytes, uint64_t cancelled) {
    std::lock_guard lk(mu_);
    s_.ranges_delivered += ranges;
    s_.logical_bytes += bytes;
    s_.reads_cancelled += cancelled;
  }
  Stats Snapshot() const {
    std::lock_guard lk(mu_);
    return s_;
  }

  static void RecordReadLocked(Stats* s, uint64_t latency_ns, uint64_t bytes,
                               bool ok) {
    ++s->physical_reads;
    s->physical_bytes += bytes;
    if (!ok) ++s->read_errors;
    s->read_latency.Record(latency_ns);
  }

 private:
  mutable std::mutex mu_;
  Stats s_;
};

}  // namespace rangeio::detail
