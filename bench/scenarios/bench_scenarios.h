// bench_scenarios.h — the acceptance scenarios of rangeio-bench
// (docs/benchmarks.md).
//
// Each scenario runs its competing strategies in the same process, round by
// round with the strategies in rotating order, and reports the median of the
// rounds: the machines are shared and noisy, so ratios within one run are
// what to compare.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>

#include "rangeio/status.h"
#include "report.h"

namespace rangeio::bench {

struct BenchOptions {
  int rounds = 5;
  std::string file;        // hot-cache: the test file (created if missing)
  std::string local_file;  // local: the test file (created if missing)
  // http: the object through the latency proxy, and through a no-latency
  // listener (optional); default $RANGEIO_BENCH_HTTP_URL and
  // $RANGEIO_BENCH_HTTP_CAPACITY_URL.
  std::string url;
  std::string capacity_url;
  int soak_seconds = 600;  // soak: how long it runs
  // throttle: seconds per row (url: the rate-limited relay, capacity_url:
  // the plain one; default $RANGEIO_BENCH_HTTP_THROTTLED_URL and
  // $RANGEIO_BENCH_HTTP_URL).
  double throttle_seconds = 20;
  // vindex: dataset size (vectors of 128 floats) and queries per batch.
  int vindex_vectors = 200'000;
  int vindex_queries = 1'000;
};

Result<Report> RunStraggler(const BenchOptions& options);
Result<Report> RunHotCache(const BenchOptions& options);
Result<Report> RunCoalesce(const BenchOptions& options);
Result<Report> RunLocal(const BenchOptions& options);
Result<Report> RunHttp(const BenchOptions& options);
Result<Report> RunBlob(const BenchOptions& options);
Result<Report> RunHedge(const BenchOptions& options);
Result<Report> RunSoak(const BenchOptions& options);
Result<Report> RunThrottle(const BenchOptions& options);
// Built with integrations/faiss only; otherwise an error saying so.
Result<Report> RunVindex(const BenchOptions& options);

// `given` when set, else the environment variable `name` (empty if unset):
// a bench's --url flags fall back to the test servers' variables.
inline std::string EnvOr(const std::string& given, const char* name) {
  if (!given.empty()) return given;
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

}  // namespace rangeio::bench
