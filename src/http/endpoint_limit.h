// endpoint_limit.h (internal) — adaptive concurrency for one endpoint:
// how many requests the HTTP engine lets out at once to one object store
// (scheme, host and port, and the bucket for S3), shared by every HTTP and
// S3 source of that endpoint in the process.
//
// The limit moves between 1 and a ceiling (the largest max_connections of
// the endpoint's sources, sized like the Limiter's io_concurrency, whose C
// still bounds every reader's reads): it starts at the ceiling, so a store
// that never throttles costs nothing; an attempt answered 429, 503 or S3
// SlowDown cuts it (by half the first time, then by 10%), at most once per
// window of attempts (only attempts sent after the last cut may cut again);
// while the smoothed time to first byte stays near its floor and the window
// is in use, it grows by kGrowthPerWindow per window of answers (AIMD); a
// latency above that holds it. Why AIMD and where each number comes from:
// docs/http-s3.md, "Adaptive concurrency".
//
// Shrinking the limit below the attempts in flight never cancels them: new
// attempts wait (in the engine) until enough of them end.
//
// Thread-safety: every method is thread-safe (one mutex). The engine calls
// TryAcquire and Release on its loop thread; Snapshot is for any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "util/mutex.h"

namespace rangeio::detail {

class EndpointLimit {
 public:
  // What one attempt's answer says about the endpoint.
  enum class Outcome {
    kAnswered,   // an answer with data: its time to first byte counts
    kThrottled,  // 429, 503, S3 SlowDown
    kOther,      // any other failure or a cancel: no signal
  };

  struct Snapshot {
    uint32_t ceiling = 0;
    uint32_t limit = 0;      // the limit now, rounded down (at least 1)
    uint32_t min_limit = 0;  // the lowest it has been
    uint32_t in_flight = 0;  // attempts holding a slot now
    uint64_t throttles = 0;  // attempts answered as throttled
    // Time with the limit held below the ceiling by throttling: from a
    // throttle's cut until the limit is back at the ceiling.
    uint64_t throttled_ns = 0;
  };

  // Growth per window of answers while the latency is near its floor. A
  // quarter, not TCP's +1: against a token bucket (800/s, 24 ms) a model of
  // the relay gave 4.8% of attempts throttled at +1, 2.5% at +0.5 and 1.3%
  // at +0.25, all at the full rate (docs/http-s3.md, bench throttle).
  static constexpr double kGrowthPerWindow = 0.25;

  // The process-wide limit of `endpoint` (an opaque key), made on first use
  // with `ceiling`; a later caller with a larger ceiling raises it. Entries
  // live while some source holds them.
  static std::shared_ptr<EndpointLimit> Shared(const std::string& endpoint,
                                               uint32_t ceiling);

  explicit EndpointLimit(uint32_t ceiling);
  EndpointLimit(const EndpointLimit&) = delete;
  EndpointLimit& operator=(const EndpointLimit&) = delete;

  // Takes a slot for an attempt if fewer than the limit are in flight.
  bool TryAcquire() EXCLUDES(mu_);
  // The attempt that took a slot at `sent_ns` ended at `now_ns` with
  // `outcome`; `ttfb_ns` is its time to first byte (kAnswered only).
  void Release(Outcome outcome, uint64_t sent_ns, uint64_t ttfb_ns,
               uint64_t now_ns) EXCLUDES(mu_);
  void RaiseCeiling(uint32_t ceiling) EXCLUDES(mu_);

  Snapshot Get(uint64_t now_ns) const EXCLUDES(mu_);

 private:
  void Cut(double factor, uint64_t now_ns) REQUIRES(mu_);
  void Grow(uint64_t now_ns) REQUIRES(mu_);
  void ObserveLatency(uint64_t ttfb_ns) REQUIRES(mu_);

  mutable Mutex mu_;
  double ceiling_ GUARDED_BY(mu_);
  double limit_ GUARDED_BY(mu_);
  double min_limit_ GUARDED_BY(mu_);
  uint32_t in_flight_ GUARDED_BY(mu_) = 0;
  bool cut_before_ GUARDED_BY(mu_) = false;  // the first cut halves
  uint64_t last_cut_ns_ GUARDED_BY(mu_) = 0;
  double latency_ns_ GUARDED_BY(mu_) = 0;  // smoothed time to first byte
  uint64_t samples_ GUARDED_BY(mu_) = 0;   // answers seen
  double floor_ns_ GUARDED_BY(mu_) = 0;    // its slowly rising floor
  uint64_t throttles_ GUARDED_BY(mu_) = 0;
  uint64_t throttled_since_ns_ GUARDED_BY(mu_) = 0;  // 0: not throttled
  uint64_t throttled_ns_ GUARDED_BY(mu_) = 0;        // closed intervals
};

}  // namespace rangeio::detail
