// stats_recorder.h (internal) — thread-safe accumulation of Stats.
#pragma once

#include <cstdint>

#include "rangeio/stats.h"
#include "util/mutex.h"

namespace rangeio::detail {

// Fixed-size aggregates behind one mutex. Thread-safe.
class StatsRecorder {
 public:
  void RecordReads(const uint64_t* latency_ns, size_t n, uint64_t bytes,
                   uint64_t errors) EXCLUDES(mu_) {
    MutexLock lk(mu_);
    AddReads(&s_, latency_ns, n, bytes, errors);
  }
  void RecordDelivered(uint64_t ranges, uint64_t bytes, uint64_t cancelled)
      EXCLUDES(mu_) {
    MutexLock lk(mu_);
    AddDelivered(&s_, ranges, bytes, cancelled);
  }
  void RecordHedges(uint64_t issued, uint64_t won, uint64_t bytes)
      EXCLUDES(mu_) {
    MutexLock lk(mu_);
    AddHedges(&s_, issued, won, bytes);
  }
  void RecordRetried(uint64_t ranges) EXCLUDES(mu_) {
    MutexLock lk(mu_);
    s_.ranges_retried += ranges;
  }
  Stats Snapshot() const EXCLUDES(mu_) {
    MutexLock lk(mu_);
    return s_;
  }

  // The one place reads and deliveries are added to a Stats (the limiter
  // calls these under its own lock).
  static void AddReads(Stats* s, const uint64_t* latency_ns, size_t n,
                       uint64_t bytes, uint64_t errors) {
    s->physical_reads += n;
    s->physical_bytes += bytes;
    s->read_errors += errors;
    for (size_t i = 0; i < n; ++i) s->read_latency.Record(latency_ns[i]);
  }
  static void AddDelivered(Stats* s, uint64_t ranges, uint64_t bytes,
                           uint64_t cancelled) {
    s->ranges_delivered += ranges;
    s->logical_bytes += bytes;
    s->reads_cancelled += cancelled;
  }
  static void AddHedges(Stats* s, uint64_t issued, uint64_t won,
                        uint64_t bytes) {
    s->hedges_issued += issued;
    s->hedges_won += won;
    s->hedged_bytes += bytes;
  }

 private:
  mutable Mutex mu_;
  Stats s_ GUARDED_BY(mu_);
};

}  // namespace rangeio::detail
