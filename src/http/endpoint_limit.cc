// endpoint_limit.cc — the AIMD rule of EndpointLimit and the process-wide
// registry of endpoints. Thread-safety: see endpoint_limit.h.
#include "http/endpoint_limit.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

namespace rangeio::detail {
namespace {

// The first throttle halves the limit, as TCP Reno halves its window: the
// limit starts at the ceiling, usually far above what a throttling store
// takes, and halving gets near its rate in a few windows.
constexpr double kFirstCut = 0.5;
// Later throttles cut 10%: the default backoff ratio of Netflix's
// concurrency-limits AIMDLimit. Near the store's rate a gentle cut keeps
// the window (and so the goodput) within ~10% of that rate.
constexpr double kCut = 0.9;
// Smoothing of the time to first byte: 1/8 per answer, TCP's gain for its
// smoothed RTT (RFC 6298).
constexpr double kLatencyGain = 1.0 / 8;
// The floor falls at once to a lower smoothed latency and rises towards a
// higher one by 1/600 per answer: the long window (600 samples) of
// concurrency-limits' Gradient2Limit, so a lasting change of the path is
// learned and a burst of queueing is not.
constexpr double kFloorRise = 1.0 / 600;
// Growth only while the smoothed latency is within 1.5x its floor (the
// rttTolerance of Gradient2Limit). Latency never cuts: on a shared machine
// it swings 2x with no limit reached, and bench throttle's unthrottled row
// lost 40% of its rate when it did. A sample counts at most 3x the floor,
// so one straggler (a 10x tail) holds growth back for a few answers only.
constexpr double kGrowTolerance = 1.5;
constexpr double kSampleCap = 3.0;
// The first answers set the floor as their plain mean: one lucky first
// answer must not set a floor every later answer is far above. 8 =
// 1 / kLatencyGain, the EWMA's own memory.
constexpr uint64_t kWarmUp = 8;

}  // namespace

std::shared_ptr<EndpointLimit> EndpointLimit::Shared(
    const std::string& endpoint, uint32_t ceiling) {
  // Leaked on purpose: sources may outlive static destruction.
  static auto* mu = new Mutex;
  static auto* entries =
      new std::unordered_map<std::string, std::weak_ptr<EndpointLimit>>;
  MutexLock lk(*mu);
  if (auto it = entries->find(endpoint); it != entries->end()) {
    if (auto e = it->second.lock()) {
      e->RaiseCeiling(ceiling);
      return e;
    }
  }
  // Drop the entries of endpoints no source reads any more: the map stays
  // as small as the set of live endpoints.
  std::erase_if(*entries, [](const auto& kv) { return kv.second.expired(); });
  auto e = std::make_shared<EndpointLimit>(ceiling);
  (*entries)[endpoint] = e;
  return e;
}

EndpointLimit::EndpointLimit(uint32_t ceiling)
    : ceiling_(std::max<uint32_t>(ceiling, 1)),
      limit_(ceiling_),
      min_limit_(ceiling_) {}

bool EndpointLimit::TryAcquire() {
  MutexLock lk(mu_);
  if (in_flight_ >= static_cast<uint32_t>(limit_)) return false;
  ++in_flight_;
  return true;
}

void EndpointLimit::Release(Outcome outcome, uint64_t sent_ns, uint64_t ttfb_ns,
                            uint64_t now_ns) {
  MutexLock lk(mu_);
  // Counted before the release: how full the window was for this answer.
  const uint32_t window_used = in_flight_;
  if (in_flight_ > 0) --in_flight_;
  // Only an attempt sent after the last cut reflects the limit in force.
  const bool fresh = sent_ns > last_cut_ns_;
  if (outcome == Outcome::kThrottled) {
    ++throttles_;
    if (throttled_since_ns_ == 0) throttled_since_ns_ = now_ns;
    if (fresh) Cut(cut_before_ ? kCut : kFirstCut, now_ns);
    cut_before_ = true;
    return;
  }
  if (outcome != Outcome::kAnswered) return;
  ObserveLatency(ttfb_ns);
  // Grow only a window in use (half full, as AIMDLimit asks): an idle or
  // lightly used endpoint says nothing about a larger one.
  if (latency_ns_ <= kGrowTolerance * floor_ns_ &&
      2.0 * window_used >= limit_) {
    Grow(now_ns);
  }
}

void EndpointLimit::ObserveLatency(uint64_t ttfb_ns) {
  auto sample = static_cast<double>(ttfb_ns);
  if (++samples_ <= kWarmUp) {
    latency_ns_ += (sample - latency_ns_) / static_cast<double>(samples_);
    floor_ns_ = latency_ns_;
    return;
  }
  sample = std::min(sample, kSampleCap * floor_ns_);
  latency_ns_ += kLatencyGain * (sample - latency_ns_);
  floor_ns_ = latency_ns_ < floor_ns_
                  ? latency_ns_
                  : floor_ns_ + kFloorRise * (latency_ns_ - floor_ns_);
}

void EndpointLimit::Cut(double factor, uint64_t now_ns) {
  limit_ = std::max(1.0, std::floor(limit_ * factor));
  min_limit_ = std::min(min_limit_, limit_);
  last_cut_ns_ = now_ns;
}

// +kGrowthPerWindow per window: each of the `limit_` answers of a window
// adds its share.
void EndpointLimit::Grow(uint64_t now_ns) {
  limit_ = std::min(ceiling_, limit_ + kGrowthPerWindow / limit_);
  if (limit_ >= ceiling_ && throttled_since_ns_ != 0) {
    throttled_ns_ += now_ns - throttled_since_ns_;
    throttled_since_ns_ = 0;
  }
}

void EndpointLimit::RaiseCeiling(uint32_t ceiling) {
  MutexLock lk(mu_);
  ceiling_ = std::max<double>(ceiling_, ceiling);
}

EndpointLimit::Snapshot EndpointLimit::Get(uint64_t now_ns) const {
  MutexLock lk(mu_);
  Snapshot s;
  s.ceiling = static_cast<uint32_t>(ceiling_);
  s.limit = static_cast<uint32_t>(limit_);
  s.min_limit = static_cast<uint32_t>(min_limit_);
  s.in_flight = in_flight_;
  s.throttles = throttles_;
  s.throttled_ns = throttled_ns_;
  if (throttled_since_ns_ != 0 && now_ns > throttled_since_ns_) {
    s.throttled_ns += now_ns - throttled_since_ns_;
  }
  return s;
}

}  // namespace rangeio::detail
