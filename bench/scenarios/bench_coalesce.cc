// coalesce — what the planner presets do to an object-store workload
// (issue 3): 10,000 reads of 512 B clustered in the posting lists of a
// vector index, plus three 64 MiB reads (say, a column chunk and two graph
// shards), against the simulated object store at C = 64, once per preset.
//
// The store charges each request a lognormal latency (median 5 ms) plus its
// bytes at 100 MiB/s, about one S3 connection's throughput: so a request
// costs time, over-read bytes cost time, and one huge request is slower
// than its parts read in parallel. Bandwidth is per request; the simulated
// store has no shared link that parallel parts would saturate.
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "bench_scenarios.h"
#include "progress.h"
#include "rangeio/rangeio.h"

namespace rangeio::bench {
namespace {

constexpr uint64_t kLists = 200;           // posting lists read by the query
constexpr uint64_t kVectorsPerList = 100;  // entries in each list
constexpr uint64_t kReadsPerList = 50;     // entries the query reads in each
constexpr uint64_t kEntryBytes = 512;      // 128 float32 dimensions
constexpr uint64_t kBigReads = 3;
constexpr uint64_t kBigBytes = 64ull << 20;
constexpr uint64_t kFileBytes = 8ull << 30;
constexpr uint32_t kConcurrency = 64;
// Room for the big reads to run side by side whole: the comparison is about
// requests and bytes, not about the default 64 MiB budget.
constexpr uint64_t kBudgetBytes = 256ull << 20;

std::vector<ByteRange> Workload() {
  std::mt19937_64 rng(11);
  std::vector<ByteRange> ranges;
  // Posting lists sit at random 1 MiB-aligned places in the first half.
  std::uniform_int_distribution<uint64_t> list_at(0,
                                                  (kFileBytes / 2 >> 20) - 1);
  for (uint64_t l = 0; l < kLists; ++l) {
    const uint64_t base = list_at(rng) << 20;
    std::vector<uint64_t> entries(kVectorsPerList);
    for (uint64_t e = 0; e < kVectorsPerList; ++e) entries[e] = e;
    std::shuffle(entries.begin(), entries.end(), rng);
    entries.resize(kReadsPerList);
    std::sort(entries.begin(), entries.end());  // the index reads in order
    for (uint64_t e : entries)
      ranges.push_back({base + e * kEntryBytes, kEntryBytes});
  }
  for (uint64_t b = 0; b < kBigReads; ++b) {
    ranges.push_back({kFileBytes / 2 + b * 2 * kBigBytes, kBigBytes});
  }
  return ranges;
}

struct Outcome {
  double elapsed_ms = 0;
  Stats reader;
  Stats limiter;
};

Result<Outcome> RunOnce(const PlannerOptions& planner,
                        const std::vector<ByteRange>& ranges) {
  LatencyModel model =
      LatencyModel::Lognormal(std::chrono::milliseconds(5), 0.5);
  model.bytes_per_second = 100ull << 20;
  RANGEIO_ASSIGN_OR_RETURN(
      std::shared_ptr<Source> store,
      MakeSimulatedSource("sim://coalesce", kFileBytes, model));
  Options o;
  o.limiter.io_concurrency = kConcurrency;
  o.limiter.response_budget_bytes = kBudgetBytes;
  o.reader.planner = planner;
  RANGEIO_ASSIGN_OR_RETURN(Reader reader, Reader::Open(store, o));
  const auto t0 = std::chrono::steady_clock::now();
  RANGEIO_ASSIGN_OR_RETURN(RangeStream stream,
                           reader.ReadRanges(ranges, Delivery::kAsCompleted));
  uint64_t n = 0;
  uint64_t wrong = 0;
  for (;;) {
    RANGEIO_ASSIGN_OR_RETURN(std::optional<RangeResult> r, stream.Next());
    if (!r) break;
    const ByteRange& want = ranges[r->index];
    if (r->bytes.size() != want.length ||
        r->bytes.data()[0] != SimulatedByteAt(want.offset) ||
        r->bytes.data()[want.length - 1] != SimulatedByteAt(want.end() - 1)) {
      ++wrong;
    }
    ++n;
    Progress::Get().AddReads(1);
  }
  Outcome out;
  out.elapsed_ms = std::chrono::duration<double, std::milli>(
                       std::chrono::steady_clock::now() - t0)
                       .count();
  if (n != ranges.size() || wrong != 0) {
    return Status::Internal("coalesce: " + std::to_string(n) + " of " +
                            std::to_string(ranges.size()) + " ranges, " +
                            std::to_string(wrong) + " with wrong bytes");
  }
  out.reader = reader.GetStats();
  out.limiter = reader.limiter()->GetStats();
  return out;
}

}  // namespace

Result<Report> RunCoalesce(const BenchOptions& options) {
  const std::vector<ByteRange> ranges = Workload();
  struct Preset {
    const char* name;
    PlannerOptions options;
  };
  const Preset presets[] = {{"none", PlannerOptions::None()},
                            {"local", PlannerOptions::Local()},
                            {"object-store", PlannerOptions::ObjectStore()}};
  Report rep;
  rep.scenario = "coalesce";
  rep.config = {{"ranges", ranges.size()},
                {"posting_lists", kLists},
                {"reads_per_list", kReadsPerList},
                {"entries_per_list", kVectorsPerList},
                {"entry_bytes", kEntryBytes},
                {"big_reads", kBigReads},
                {"big_read_bytes", kBigBytes},
                {"io_concurrency", kConcurrency},
                {"response_budget_bytes", kBudgetBytes},
                {"latency", "lognormal median 5 ms sigma 0.5 + 100 MiB/s"},
                {"delivery", "as-completed"},
                {"rounds", options.rounds}};
  for (const Preset& p : presets) {
    Row row{p.name, {}, ranges.size(), {}, {}, {}, {}};
    row.note = p.options.ToString();
    rep.rows.push_back(row);
  }
  Status failure;
  Rounds(options.rounds, std::size(presets), [&](size_t k) {
    if (!failure.ok()) return;
    Result<Outcome> o = RunOnce(presets[k].options, ranges);
    if (!o.ok()) {
      failure = o.status();
      return;
    }
    Row& row = rep.rows[k];
    row.elapsed_ms_runs.push_back(o->elapsed_ms);
    row.peak_inflight = o->limiter.peak_in_flight;
    row.peak_retained = o->limiter.peak_retained_count;
    row.extra = {{"physical_requests", o->reader.physical_reads},
                 {"physical_bytes", o->reader.physical_bytes},
                 {"logical_bytes", o->reader.logical_bytes}};
  });
  RANGEIO_RETURN_NOT_OK(failure);
  rep.baseline = "none";

  const Row& none = *rep.Find("none");
  for (const Row& r : rep.rows) {
    if (r.strategy == "none") continue;
    const double req = r.extra["physical_requests"].get<double>() /
                       none.extra["physical_requests"].get<double>();
    const double bytes = r.extra["physical_bytes"].get<double>() /
                         r.extra["logical_bytes"].get<double>();
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "%s: %.3fx the requests of none, reads %.3fx the logical "
                  "bytes, %.2fx faster",
                  r.strategy.c_str(), req, bytes,
                  none.elapsed_ms() / r.elapsed_ms());
    rep.lines.push_back(std::string("  INFO  ") + buf);
  }
  return rep;
}

}  // namespace rangeio::bench
