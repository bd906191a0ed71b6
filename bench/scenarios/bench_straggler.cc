// straggler — the chunk barrier: 2,560 non-coalescing 4 KiB
// ranges at C = 64 against a simulated store where a read takes 1 ms and
// every 64th takes 10 ms.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_scenarios.h"
#include "chunk_barrier.h"
#include "progress.h"
#include "rangeio/rangeio.h"

namespace rangeio::bench {
namespace {

constexpr uint64_t kRanges = 2560;
constexpr uint64_t kRangeBytes = 4096;
constexpr uint64_t kStride = 2 * kRangeBytes;  // 4 KiB holes: no coalescing
constexpr uint32_t kConcurrency = 64;
constexpr auto kFast = std::chrono::milliseconds(1);
constexpr auto kSlow = std::chrono::milliseconds(10);
constexpr uint64_t kEvery = 64;

struct Strategy {
  const char* name;
  bool chunked;  // behind the chunk barrier (baselines/chunk_barrier.h)
  Delivery delivery;
};
constexpr Strategy kStrategies[] = {
    {"chunked", true, Delivery::kOrdered},
    {"ordered", false, Delivery::kOrdered},
    {"as-completed", false, Delivery::kAsCompleted},
};

// One run on a fresh store (its read counter decides which reads are slow)
// and a fresh limiter (its peaks are this run's).
Status RunOnce(const Strategy& s, const std::vector<ByteRange>& ranges,
               double* elapsed_ms, Stats* limiter_stats) {
  RANGEIO_ASSIGN_OR_RETURN(
      std::shared_ptr<Source> store,
      MakeSimulatedSource("sim://straggler", kRanges * kStride,
                          LatencyModel::EveryKth(kFast, kSlow, kEvery)));
  Options o;
  o.limiter.io_concurrency = kConcurrency;
  // The scenario measures scheduling: each range is its own read.
  o.reader.planner = PlannerOptions::None();
  if (s.chunked) store = WithChunkBarrier(std::move(store), kConcurrency);
  RANGEIO_ASSIGN_OR_RETURN(Reader reader, Reader::Open(store, o));
  const auto t0 = std::chrono::steady_clock::now();
  RANGEIO_ASSIGN_OR_RETURN(RangeStream stream,
                           reader.ReadRanges(ranges, s.delivery));
  uint64_t n = 0;
  uint64_t checksum = 0;
  for (;;) {
    RANGEIO_ASSIGN_OR_RETURN(std::optional<RangeResult> r, stream.Next());
    if (!r) break;
    checksum += static_cast<uint64_t>(r->bytes.data()[0]);
    ++n;
    Progress::Get().AddReads(1);
  }
  const auto t1 = std::chrono::steady_clock::now();
  if (n != kRanges) {
    return Status::Internal("straggler: delivered " + std::to_string(n) +
                            " of " + std::to_string(kRanges) + " ranges");
  }
  (void)checksum;
  *elapsed_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  *limiter_stats = reader.limiter()->GetStats();
  return Status::OK();
}

}  // namespace

Result<Report> RunStraggler(const BenchOptions& options) {
  std::vector<ByteRange> ranges;
  ranges.reserve(kRanges);
  for (uint64_t i = 0; i < kRanges; ++i)
    ranges.push_back({i * kStride, kRangeBytes});

  Report rep;
  rep.scenario = "straggler";
  rep.config = {{"ranges", kRanges},
                {"range_bytes", kRangeBytes},
                {"io_concurrency", kConcurrency},
                {"response_budget_count", 2 * kConcurrency},
                {"fast_ms", 1},
                {"slow_ms", 10},
                {"slow_every", kEvery},
                {"rounds", options.rounds}};
  for (const Strategy& s : kStrategies)
    rep.rows.push_back({s.name, {}, kRanges, {}, {}, {}, {}});
  Status failure;
  Rounds(options.rounds, std::size(kStrategies), [&](size_t k) {
    if (!failure.ok()) return;
    double ms = 0;
    Stats st;
    failure = RunOnce(kStrategies[k], ranges, &ms, &st);
    rep.rows[k].elapsed_ms_runs.push_back(ms);
    rep.rows[k].peak_inflight = st.peak_in_flight;
    rep.rows[k].peak_retained = st.peak_retained_count;
  });
  RANGEIO_RETURN_NOT_OK(failure);

  // Sum of all latencies / C: no schedule can beat it.
  const uint64_t slow = kRanges / kEvery;
  const double total_ms = static_cast<double>((kRanges - slow) * 1 + slow * 10);
  rep.lower_bound_ms = total_ms / kConcurrency;
  rep.baseline = "chunked";

  const double asc = rep.Find("as-completed")->elapsed_ms();
  const double ord = rep.Find("ordered")->elapsed_ms();
  const double chk = rep.Find("chunked")->elapsed_ms();
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "as-completed / lower bound = %.3f (target <= 1.25)",
                asc / *rep.lower_bound_ms);
  rep.AddVerdict(asc / *rep.lower_bound_ms <= 1.25, buf);
  std::snprintf(buf, sizeof buf,
                "ordered / reference 202 ms = %.3f (target 0.90..1.10)",
                ord / 202);
  rep.AddVerdict(std::abs(ord / 202 - 1) <= 0.10, buf);
  std::snprintf(buf, sizeof buf,
                "chunked / reference 400 ms = %.3f (target 0.90..1.10)",
                chk / 400);
  rep.AddVerdict(std::abs(chk / 400 - 1) <= 0.10, buf);
  bool inflight_ok = true;
  bool retained_ok = true;
  for (const Row& r : rep.rows) {
    inflight_ok = inflight_ok && r.peak_inflight == kConcurrency;
    retained_ok = retained_ok && r.peak_retained <= 2 * kConcurrency;
  }
  rep.AddVerdict(inflight_ok, "peak in-flight == 64 in every strategy");
  rep.AddVerdict(retained_ok, "peak retained <= 128 in every strategy");
  return rep;
}

}  // namespace rangeio::bench
