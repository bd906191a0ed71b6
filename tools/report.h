// report.h — the tables a benchmark prints and the JSON it writes: rows of
// strategies measured in one run, verdicts under them. Shared by `rangeio
// bench url` (tools/) and the acceptance scenarios of rangeio-bench (bench/).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

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

// One row of an I/O scenario (local): rates, latency and CPU of one
// strategy at one block size.
struct IoRow {
  std::string strategy;
  uint64_t block_size = 0;
  uint64_t reads = 0;
  double seconds = 0;
  double p50_us = 0;
  double p99_us = 0;
  double cpu_seconds = 0;   // user + system, all threads (or fio's report)
  uint64_t span_bytes = 0;  // bench local: the bytes of the file it read from
  std::string note;         // e.g. the engine's Info().description

  double iops() const {
    return seconds > 0 ? static_cast<double>(reads) / seconds : 0;
  }
  double mib_per_s() const {
    return iops() * static_cast<double>(block_size) / (1 << 20);
  }
  double cpu_s_per_100k() const {
    return reads > 0 ? cpu_seconds / static_cast<double>(reads) * 100'000 : 0;
  }
};

struct Report {
  std::string scenario;
  nlohmann::json config;
  std::vector<Row> rows;
  std::vector<IoRow> io_rows;  // I/O scenarios print these instead of rows
  std::optional<double> lower_bound_ms;  // straggler only
  std::string baseline;            // strategy that the "vs" column divides by
  std::vector<std::string> lines;  // verdict lines printed under the table
  // Figures beyond the table, written to the JSON only (bench local: its
  // uring-direct / fio pairs).
  nlohmann::json details;
  // Column order of the rows' `extra` table; empty: as the rows give them.
  std::vector<std::string> extra_order;

  const Row* Find(const std::string& strategy) const;
  // Adds "PASS what" or "MISS what" under the table.
  void AddVerdict(bool ok, const std::string& what) {
    lines.push_back(std::string(ok ? "  PASS  " : "  MISS  ") + what);
  }
  // Adds "SKIP what: why" under the table (a target that was not measured).
  void AddSkipped(const std::string& what, const std::string& why) {
    lines.push_back("  SKIP  " + what + ": " + why);
  }
  const IoRow* FindIo(const std::string& strategy, uint64_t block_size) const;
  void Print() const;
  // The rows' `extra` figures as a second table (nothing when none has any).
  void PrintExtra() const;
  nlohmann::json ToJson() const;
};

// Each round runs `run(strategy index)` for every strategy, in an order that
// rotates by one per round.
template <typename Run>
void Rounds(int rounds, size_t strategies, Run run) {
  for (int r = 0; r < rounds; ++r) {
    for (size_t k = 0; k < strategies; ++k) run((k + r) % strategies);
  }
}

// The median of `v` (the mean of the middle two for an even count); 0 when
// empty.
double Median(std::vector<double> v);

}  // namespace rangeio::bench
