// bench_scenarios.h — the scenarios of `rangeio bench` (BENCHMARKS.md).
//
// Each scenario runs its competing strategies in the same process, round by
// round with the strategies in rotating order, and reports the median of the
// rounds: the machines are shared and noisy, so ratios within one run are
// what to compare.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "rangeio/status.h"

namespace rangeio::bench {

struct Row {
  std::string strategy;
  std::vector<double> elapsed_ms_runs;  // one per round
  uint64_t ranges = 0;
  // Limiter peaks of the last round; absent for bare baselines.
  std::optional<uint64_t> peak_inflight;
  std::optional<uint64_t> peak_retained;
  std::string note;
  // Scenario-specific figures (bench http: reads_per_s, p50_ms, ...):
  // printed as a second table and merged into the row's JSON.
  nlohmann::json extra;

  double elapsed_ms() const;  // median of the rounds
  double ranges_per_s() const { return ranges / (elapsed_ms() / 1000.0); }
};

struct Report {
  std::string scenario;
  nlohmann::json config;
  std::vector<Row> rows;
  std::optional<double> lower_bound_ms;  // straggler only
  std::string baseline;            // strategy that the "vs" column divides by
  std::vector<std::string> lines;  // verdict lines printed under the table

  const Row* Find(const std::string& strategy) const;
  // Adds "PASS what" or "MISS what" under the table.
  void AddVerdict(bool ok, const std::string& what) {
    lines.push_back(std::string(ok ? "  PASS  " : "  MISS  ") + what);
  }
  void Print() const;
  // The rows' `extra` figures as a second table (nothing when none has any).
  void PrintExtra() const;
  nlohmann::json ToJson() const;
};

struct BenchOptions {
  int rounds = 5;
  std::string file;  // hot-cache: the test file (created if missing)
  // http: the object through the latency proxy, and through a no-latency
  // listener (optional); default $RANGEIO_BENCH_HTTP_URL and
  // $RANGEIO_BENCH_HTTP_CAPACITY_URL.
  std::string url;
  std::string capacity_url;
};

// Each round runs `run(strategy index)` for every strategy, in an order that
// rotates by one per round.
template <typename Run>
void Rounds(int rounds, size_t strategies, Run run) {
  for (int r = 0; r < rounds; ++r) {
    for (size_t k = 0; k < strategies; ++k) run((k + r) % strategies);
  }
}

Result<Report> RunStraggler(const BenchOptions& options);
Result<Report> RunHotCache(const BenchOptions& options);
Result<Report> RunHttp(const BenchOptions& options);

}  // namespace rangeio::bench
