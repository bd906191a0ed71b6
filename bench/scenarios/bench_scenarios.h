// bench_scenarios.h — the scenarios of `rangeio bench` (docs/benchmarks.md).
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

#include "rangeio/open_source.h"
#include "rangeio/options.h"
#include "rangeio/reader.h"
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

// bench url: ranged reads of any object OpenSource opens.
struct UrlBenchOptions {
  std::string url;
  uint64_t block = 100 << 10;  // 100 KiB: S3's sweet spot per request
  uint32_t concurrency = 64;   // reads in flight (Options' default)
  double seconds = 0;          // run time; 0 = 10 s unless `reads` is set
  uint64_t reads = 0;          // run this many reads instead of a time
  bool sequential = false;     // false: uniform random block-aligned offsets
  Delivery delivery = Delivery::kAsCompleted;
  bool compare = false;  // add the direct and chunked rows
  int rounds = 1;        // each row this many times, in rotating order
  Options reader;        // -o reader keys (io_concurrency = concurrency)
  SourceOptions source;  // -o source keys
  bool local_threads_set = false;  // else local.threads = concurrency
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
Result<Report> RunCoalesce(const BenchOptions& options);
Result<Report> RunLocal(const BenchOptions& options);
Result<Report> RunHttp(const BenchOptions& options);
Result<Report> RunBlob(const BenchOptions& options);
Result<Report> RunHedge(const BenchOptions& options);
Result<Report> RunSoak(const BenchOptions& options);
Result<Report> RunThrottle(const BenchOptions& options);
// Built with integrations/faiss only; otherwise an error saying so.
Result<Report> RunVindex(const BenchOptions& options);
Result<Report> RunUrl(const UrlBenchOptions& options);

// "100KiB", "1M", "4096" (binary suffixes K, KiB, M, MiB, G, GiB) for the
// CLI's size flags; InvalidArgument naming `what` and the text otherwise.
Result<uint64_t> ParseByteSize(const std::string& what,
                               const std::string& text);

// The median of `v` (the mean of the middle two for an even count); 0 when
// empty.
double Median(std::vector<double> v);

// `given` when set, else the environment variable `name` (empty if unset):
// a bench's --url flags fall back to the test servers' variables.
std::string EnvOr(const std::string& given, const char* name);

}  // namespace rangeio::bench
