// throttle — adaptive concurrency against a store that says SlowDown
// (issue 18): 100 KiB ranged reads at random offsets of bench.bin, 64 in
// flight (one Limiter, C = 64), for a fixed time per row, through the
// latency relay (lognormal, median 24 ms) rate limited at 800 requests/s
// with 503 SlowDown above it ($RANGEIO_BENCH_HTTP_THROTTLED_URL), and
// through the same relay with no rate limit ($RANGEIO_BENCH_HTTP_URL).
// Rows fixed-64 (adaptive off, today) and adaptive on each (unthrottled:
// in rotating rounds, see AddUnthrottledRows), then both
// endpoints read at once by two readers with adaptive on: the limit is per
// endpoint. Goodput is reads delivered per second; "503 %" the share of
// GETs answered as throttled. Reads make up to 50 attempts in every row.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench_scenarios.h"
#include "rangeio/rangeio.h"

namespace rangeio::bench {
namespace {

constexpr uint64_t kBlock = 100 << 10;
constexpr uint32_t kConcurrency = 64;
// The relay's bench.bin (tests/servers/seed.js): 256 MiB.
constexpr uint64_t kObjectBytes = 256ull << 20;
// The relay's rate limit (tests/servers/run_servers.sh).
constexpr double kRateLimit = 800;
constexpr uint32_t kMaxAttempts = 50;
constexpr int kRounds = 4;  // of the unthrottled rows, see AddUnthrottledRows

struct Outcome {
  uint64_t reads = 0;
  double seconds = 0;
  HttpStats http;
  std::vector<double> rates;  // reads/s of each round (one unless merged)
};

// Another round's figures added to `into` (the endpoint's: the last one's).
void Merge(const Outcome& o, Outcome* into) {
  into->reads += o.reads;
  into->seconds += o.seconds;
  into->rates.insert(into->rates.end(), o.rates.begin(), o.rates.end());
  HttpStats& h = into->http;
  h.gets += o.http.gets;
  h.throttled += o.http.throttled;
  h.reads_failed += o.http.reads_failed;
  h.latency.Merge(o.http.latency);
  h.endpoint_limit = o.http.endpoint_limit;
  h.endpoint_min_limit = o.http.endpoint_min_limit;
  h.endpoint_throttled_ns += o.http.endpoint_throttled_ns;
}

// Reads random 100 KiB blocks of `url` for `seconds` with 64 in flight;
// the stream is dropped at the end (its reads in flight are cancelled).
Result<Outcome> ReadFor(const std::string& url, bool adaptive, double seconds,
                        uint32_t seed) {
  HttpOptions ho;
  ho.size_hint = kObjectBytes;
  ho.max_connections = kConcurrency;
  ho.adaptive = adaptive;
  // Both rows: with the default 5 attempts fixed-64 fails reads within
  // seconds (a read meets 5 503s in a row), which ends its stream.
  ho.max_attempts = kMaxAttempts;
  RANGEIO_ASSIGN_OR_RETURN(std::shared_ptr<Source> source,
                           OpenHttpSource(url, ho));
  Options o;
  o.limiter.io_concurrency = kConcurrency;
  o.reader.planner = PlannerOptions::None();  // each block its own GET
  RANGEIO_ASSIGN_OR_RETURN(Reader reader, Reader::Open(source, o));
  // More blocks than 64 in flight can read in the time at 24 ms each.
  const auto n = static_cast<uint64_t>(seconds * kConcurrency / 0.015) + 64;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<uint64_t> slot(0, kObjectBytes / kBlock - 1);
  std::vector<ByteRange> ranges;
  ranges.reserve(n);
  for (uint64_t i = 0; i < n; ++i)
    ranges.push_back({slot(rng) * kBlock, kBlock});
  Outcome out;
  const auto t0 = std::chrono::steady_clock::now();
  const auto end = t0 + std::chrono::duration<double>(seconds);
  {
    RANGEIO_ASSIGN_OR_RETURN(RangeStream stream,
                             reader.ReadRanges(ranges, Delivery::kAsCompleted));
    while (std::chrono::steady_clock::now() < end) {
      RANGEIO_ASSIGN_OR_RETURN(std::optional<RangeResult> r, stream.Next());
      if (!r) break;
      ++out.reads;
    }
  }
  out.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  RANGEIO_ASSIGN_OR_RETURN(out.http, GetHttpStats(*source));
  out.rates.push_back(static_cast<double>(out.reads) / out.seconds);
  return out;
}

Row MakeRow(const std::string& name, const Outcome& out) {
  Row row{name, {out.seconds * 1000}, out.reads, {}, {}, {}, {}};
  const HttpStats& h = out.http;
  row.extra = {
      {"reads_per_s", Median(out.rates)},
      {"pct_503", h.gets > 0 ? 100.0 * static_cast<double>(h.throttled) /
                                   static_cast<double>(h.gets)
                             : 0.0},
      {"p50_ms", static_cast<double>(h.latency.Percentile(0.5)) / 1e6},
      {"p99_ms", static_cast<double>(h.latency.Percentile(0.99)) / 1e6},
      {"gets", h.gets},
      {"throttled", h.throttled},
      {"failed", h.reads_failed},
      {"limit", h.endpoint_limit},
      {"min_limit", h.endpoint_min_limit},
      {"throttled_s", static_cast<double>(h.endpoint_throttled_ns) / 1e9}};
  return row;
}

double Extra(const Report& rep, const std::string& row, const char* key) {
  const Row* r = rep.Find(row);
  return r != nullptr ? r->extra[key].get<double>() : 0;
}

// Lets the relay's bucket refill between rows (40 tokens at 800/s: 50 ms).
void Pause() { std::this_thread::sleep_for(std::chrono::milliseconds(500)); }

nlohmann::json ThrottleConfig(double seconds) {
  return {{"block_bytes", kBlock},
          {"io_concurrency", kConcurrency},
          {"seconds_per_row", seconds},
          {"rate_limit", kRateLimit},
          {"max_attempts", kMaxAttempts},
          {"unthrottled_rounds", kRounds},
          {"latency", "lognormal median 24 ms sigma 0.3"}};
}

struct Mode {
  const char* name;
  bool adaptive;
};
constexpr Mode kModes[] = {{"fixed-64", false}, {"adaptive", true}};

// The throttled rows: each mode for `seconds` on the rate-limited relay,
// a pause after each for its bucket to refill.
Status AddThrottledRows(const std::string& throttled, double seconds,
                        Report* rep) {
  for (const Mode& mode : kModes) {
    RANGEIO_ASSIGN_OR_RETURN(Outcome o,
                             ReadFor(throttled, mode.adaptive, seconds, 1));
    rep->rows.push_back(MakeRow(std::string("throttled ") + mode.name, o));
    Pause();
  }
  return Status::OK();
}

// The unthrottled rows. Unthrottled, the two modes differ by little, and
// other work on a shared machine drifts over a run: kRounds rounds of
// seconds / kRounds each, in rotating order, and the median of the rounds'
// rates.
Status AddUnthrottledRows(const std::string& free, double seconds,
                          Report* rep) {
  Outcome free_rows[2];
  for (int r = 0; r < kRounds; ++r) {
    for (int k = 0; k < 2; ++k) {
      const int m = (k + r) % 2;
      RANGEIO_ASSIGN_OR_RETURN(Outcome o, ReadFor(free, kModes[m].adaptive,
                                                  seconds / kRounds, 2 + r));
      Merge(o, &free_rows[m]);
    }
  }
  for (int m = 0; m < 2; ++m) {
    rep->rows.push_back(
        MakeRow(std::string("unthrottled ") + kModes[m].name, free_rows[m]));
  }
  return Status::OK();
}

// Both endpoints at once, a reader each, adaptive on: the limit is per
// endpoint.
Status AddBothRows(const std::string& throttled, const std::string& free,
                   double seconds, Report* rep) {
  Result<Outcome> both[2] = {Status::Internal("not run"),
                             Status::Internal("not run")};
  {
    std::thread t([&] { both[0] = ReadFor(throttled, true, seconds, 10); });
    both[1] = ReadFor(free, true, seconds, 11);
    t.join();
  }
  RANGEIO_RETURN_NOT_OK(both[0].status());
  RANGEIO_RETURN_NOT_OK(both[1].status());
  rep->rows.push_back(MakeRow("both: throttled", *both[0]));
  rep->rows.push_back(MakeRow("both: unthrottled", *both[1]));
  return Status::OK();
}

// The targets: adaptive's goodput and 503s under the limit, its rate
// without one against fixed-64's, and the unthrottled endpoint's rate
// beside the throttled one.
void AddVerdicts(Report* rep) {
  char buf[240];
  const double goodput = Extra(*rep, "throttled adaptive", "reads_per_s");
  const double pct = Extra(*rep, "throttled adaptive", "pct_503");
  std::snprintf(buf, sizeof buf,
                "throttled: adaptive goodput %.0f/s = %.3fx the limit (target "
                ">= 0.95x) with %.2f%% of GETs answered 503 (target <= 2%%); "
                "fixed-64: %.0f/s, %.1f%% 503, p99 %.0f ms vs %.0f ms",
                goodput, goodput / kRateLimit, pct,
                Extra(*rep, "throttled fixed-64", "reads_per_s"),
                Extra(*rep, "throttled fixed-64", "pct_503"),
                Extra(*rep, "throttled fixed-64", "p99_ms"),
                Extra(*rep, "throttled adaptive", "p99_ms"));
  rep->AddVerdict(goodput >= 0.95 * kRateLimit && pct <= 2, buf);
  const double ratio = Extra(*rep, "unthrottled adaptive", "reads_per_s") /
                       Extra(*rep, "unthrottled fixed-64", "reads_per_s");
  std::snprintf(buf, sizeof buf,
                "unthrottled: adaptive %.3fx fixed-64 reads/s (target >= "
                "0.97x)",
                ratio);
  rep->AddVerdict(ratio >= 0.97, buf);
  const double kept = Extra(*rep, "both: unthrottled", "reads_per_s") /
                      Extra(*rep, "unthrottled adaptive", "reads_per_s");
  std::snprintf(buf, sizeof buf,
                "per endpoint: the unthrottled endpoint read beside the "
                "throttled one keeps %.3fx its rate alone (target >= 0.95x), "
                "its limit %.0f, min %.0f",
                kept, Extra(*rep, "both: unthrottled", "limit"),
                Extra(*rep, "both: unthrottled", "min_limit"));
  rep->AddVerdict(kept >= 0.95, buf);
}

}  // namespace

Result<Report> RunThrottle(const BenchOptions& options) {
  const std::string throttled =
      EnvOr(options.url, "RANGEIO_BENCH_HTTP_THROTTLED_URL");
  const std::string free =
      EnvOr(options.capacity_url, "RANGEIO_BENCH_HTTP_URL");
  if (throttled.empty() || free.empty()) {
    return Status::InvalidArgument(
        "bench throttle needs the rate-limited relay and the plain 24 ms "
        "relay: start tests/servers/run_servers.sh (it exports "
        "RANGEIO_BENCH_HTTP_THROTTLED_URL and RANGEIO_BENCH_HTTP_URL) or give "
        "--url and --free-url");
  }
  const double s = options.throttle_seconds;
  Report rep;
  rep.scenario = "throttle";
  rep.config = ThrottleConfig(s);
  RANGEIO_RETURN_NOT_OK(AddThrottledRows(throttled, s, &rep));
  RANGEIO_RETURN_NOT_OK(AddUnthrottledRows(free, s, &rep));
  RANGEIO_RETURN_NOT_OK(AddBothRows(throttled, free, s, &rep));
  rep.baseline = "unthrottled fixed-64";
  rep.extra_order = {"reads_per_s", "pct_503",    "p50_ms", "p99_ms",
                     "gets",        "throttled",  "failed", "limit",
                     "min_limit",   "throttled_s"};
  AddVerdicts(&rep);
  return rep;
}

}  // namespace rangeio::bench
