// url_bench.cc — see url_bench.h.
#include "url_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <utility>
#include <vector>

#include "progress.h"

namespace rangeio::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Ranges per ReadRanges call: large enough that the drain at the end of
// each (one read's latency) is lost in the run, small enough to bound the
// memory of a long run at a high rate.
constexpr uint64_t kSegment = 65'536;
constexpr double kDefaultSeconds = 10;
constexpr uint32_t kSeed = 0x5eed;

Clock::time_point Deadline(const UrlBenchOptions& o, Clock::time_point t0) {
  if (o.reads != 0) return Clock::time_point::max();
  const double s = o.seconds > 0 ? o.seconds : kDefaultSeconds;
  return t0 + std::chrono::duration_cast<Clock::duration>(
                  std::chrono::duration<double>(s));
}

// Reads the round's ranges, kSegment per stream, until the sequence or the
// time runs out; counts into `f`.
Status DriveReader(Reader& reader, const UrlRound& round, UrlFigures* f) {
  RangeGen gen(round.size, *round.options, round.seed);
  std::vector<ByteRange> ranges;
  for (;;) {
    ranges.clear();
    while (ranges.size() < kSegment) {
      const std::optional<ByteRange> r = gen.Next();
      if (!r) break;
      ranges.push_back(*r);
    }
    if (ranges.empty() || Clock::now() >= round.deadline) return Status::OK();
    RANGEIO_ASSIGN_OR_RETURN(
        RangeStream stream, reader.ReadRanges(ranges, round.options->delivery));
    for (;;) {
      RANGEIO_ASSIGN_OR_RETURN(std::optional<RangeResult> r, stream.Next());
      if (!r) break;
      ++f->reads;
      f->logical_bytes += r->bytes.size();
      Progress::Get().AddReads(1);
      // Checking the clock every 64 reads keeps it off the hot path; leaving
      // drops the stream, which cancels what is in flight.
      if ((f->reads & 63) == 0 && Clock::now() >= round.deadline) {
        return Status::OK();
      }
    }
  }
}

double Ms(uint64_t nanos) { return static_cast<double>(nanos) / 1e6; }

void AddHttp(const HttpStats& from, HttpStats* h) {
  h->gets += from.gets;
  h->heads += from.heads;
  h->retries_5xx += from.retries_5xx;
  h->retries_throttled += from.retries_throttled;
  h->retries_connection += from.retries_connection;
  h->retries_timeout += from.retries_timeout;
  h->throttled += from.throttled;
  // The adaptive limit: where the last round left it, the lowest of all.
  h->endpoint_limit = from.endpoint_limit;
  h->endpoint_min_limit =
      h->endpoint_min_limit == 0
          ? from.endpoint_min_limit
          : std::min(h->endpoint_min_limit, from.endpoint_min_limit);
  h->endpoint_throttled_ns += from.endpoint_throttled_ns;
}

std::optional<uint64_t> Max(std::optional<uint64_t> a,
                            std::optional<uint64_t> b) {
  if (!a) return b;
  if (!b) return a;
  return std::max(*a, *b);
}

// Adds a round's figures to a row's totals (peaks: the largest).
void Accumulate(const UrlFigures& f, UrlFigures* t) {
  t->elapsed_ms += f.elapsed_ms;
  t->reads += f.reads;
  t->logical_bytes += f.logical_bytes;
  t->physical_bytes += f.physical_bytes;
  if (f.http) AddHttp(*f.http, t->http ? &*t->http : &t->http.emplace());
  t->latency.Merge(f.latency);
  t->peak_inflight = Max(t->peak_inflight, f.peak_inflight);
  t->peak_retained = Max(t->peak_retained, f.peak_retained);
  t->note = f.note;
}

void AddHttpColumns(const HttpStats& h, nlohmann::json* extra) {
  nlohmann::json& e = *extra;
  e["gets"] = h.gets;
  e["heads"] = h.heads;
  e["retry_5xx"] = h.retries_5xx;
  e["retry_throttle"] = h.retries_throttled;
  e["retry_conn"] = h.retries_connection;
  e["retry_timeout"] = h.retries_timeout;
  e["throttled"] = h.throttled;
  if (h.endpoint_limit > 0) {  // adaptive on (docs/http-s3.md)
    e["limit"] = h.endpoint_limit;
    e["min_limit"] = h.endpoint_min_limit;
    e["throttled_s"] = Ms(h.endpoint_throttled_ns) / 1000;
  }
}

// A row from its totals over the rounds: `runs` and `rates` are each
// round's elapsed ms and reads/s. Rates are the rounds' median (one round
// slowed by a busy machine does not move it); counts and latency
// percentiles are over every round's reads.
Row MakeRow(const std::string& name, const UrlFigures& f, uint64_t block,
            const std::vector<double>& runs, const std::vector<double>& rates) {
  Row row;
  row.strategy = name;
  row.elapsed_ms_runs = runs;
  row.ranges = f.reads / std::max<size_t>(1, runs.size());
  row.peak_inflight = f.peak_inflight;
  row.peak_retained = f.peak_retained;
  row.note = f.note;
  const double rate = Median(rates);
  row.extra = {{"reads_per_s", rate},
               {"mib_per_s", rate * static_cast<double>(block) / (1 << 20)},
               {"reads", f.reads},
               {"p50_ms", Ms(f.latency.Percentile(0.5))},
               {"p99_ms", Ms(f.latency.Percentile(0.99))},
               {"p999_ms", Ms(f.latency.Percentile(0.999))},
               {"physical_bytes", f.physical_bytes},
               {"logical_bytes", f.logical_bytes}};
  if (f.http) AddHttpColumns(*f.http, &row.extra);
  return row;
}

// The object's size, probed once (one bytes=0-0 GET for an object store
// without size-hint); the rows' sources get it as a hint, so that their
// GETs are their reads. Fills the report's config.
Result<UrlRound> Probe(const UrlBenchOptions& o, SourceOptions so,
                       Report* rep) {
  RANGEIO_ASSIGN_OR_RETURN(std::shared_ptr<Source> probe,
                           OpenSource(o.url, so));
  RANGEIO_ASSIGN_OR_RETURN(const uint64_t size, probe->Size());
  if (size < o.block) {
    return Status::InvalidArgument(
        "bench url: '" + probe->name() + "' has " + std::to_string(size) +
        " bytes, fewer than one block of " + std::to_string(o.block));
  }
  UrlRound round{&o, std::move(so), size, 0, GetHttpStats(*probe).ok(), {}};
  round.source.http.size_hint = size;
  const auto& planner = o.reader.reader.planner;
  rep->config = {
      {"url", probe->name()},
      {"object_bytes", size},
      {"block", o.block},
      {"concurrency", o.concurrency},
      {"pattern", o.sequential ? "sequential" : "random"},
      {"delivery",
       o.delivery == Delivery::kOrdered ? "ordered" : "as-completed"},
      {"source", probe->Info().description},
      {"rounds", o.rounds},
      {"planner", planner ? planner->ToString() : "none"}};
  if (o.reads != 0) {
    rep->config["reads"] = o.reads;
  } else {
    rep->config["seconds"] = o.seconds > 0 ? o.seconds : kDefaultSeconds;
  }
  return round;
}

// Rounds rotate the rows' order, and every (row, round) reads its own
// random sequence: a cache under the object (the page cache, a VM host's,
// a CDN) then favours no row for coming after another.
Status RunRows(const UrlRound& base, std::span<const UrlRow> rows,
               Report* rep) {
  const size_t n = rows.size();
  std::vector<UrlFigures> totals(n);
  std::vector<std::vector<double>> elapsed(n);
  std::vector<std::vector<double>> rates(n);
  std::vector<uint64_t> rounds_done(n, 0);
  Status failure;
  Rounds(base.options->rounds, n, [&](size_t k) {
    if (!failure.ok()) return;
    UrlRound round = base;
    round.seed = kSeed + 1000 * rounds_done[k]++ + k;
    Progress::Get().Phase("url: " + rows[k].name);
    round.deadline = Deadline(*base.options, Clock::now());
    UrlFigures f;
    failure = rows[k].run(round, &f);
    Accumulate(f, &totals[k]);
    elapsed[k].push_back(f.elapsed_ms);
    rates[k].push_back(
        f.elapsed_ms > 0 ? 1000.0 * static_cast<double>(f.reads) / f.elapsed_ms
                         : 0.0);
  });
  RANGEIO_RETURN_NOT_OK(failure);
  for (size_t k = 0; k < n; ++k) {
    rep->rows.push_back(MakeRow(rows[k].name, totals[k], base.options->block,
                                elapsed[k], rates[k]));
  }
  return Status::OK();
}

uint64_t Get(const Row& row, const char* key) {
  return row.extra[key].get<uint64_t>();
}

void AddVerdicts(const UrlBenchOptions& o, bool object_store, Report* rep) {
  const Row& lib = rep->rows[0];
  char buf[240];
  if (const Row* direct = rep->Find("direct")) {
    rep->baseline = "direct";
    const double ratio = lib.extra["reads_per_s"].get<double>() /
                         direct->extra["reads_per_s"].get<double>();
    std::snprintf(buf, sizeof buf,
                  "rangeio / direct reads/s = %.3f (target >= 0.95)", ratio);
    rep->AddVerdict(ratio >= 0.95, buf);
  }
  if (object_store) {
    std::snprintf(buf, sizeof buf,
                  "rangeio: %llu GETs for %llu reads, %llu HEADs (target: "
                  "no HEAD)",
                  static_cast<unsigned long long>(Get(lib, "gets")),
                  static_cast<unsigned long long>(Get(lib, "reads")),
                  static_cast<unsigned long long>(Get(lib, "heads")));
    rep->AddVerdict(Get(lib, "heads") == 0, buf);
  }
  const auto physical =
      static_cast<unsigned long long>(Get(lib, "physical_bytes"));
  const auto logical =
      static_cast<unsigned long long>(Get(lib, "logical_bytes"));
  if (o.reads != 0) {
    std::snprintf(buf, sizeof buf,
                  "rangeio: physical bytes %llu == logical bytes %llu",
                  physical, logical);
    rep->AddVerdict(physical == logical, buf);
    return;
  }
  // A timed run drops the reads in flight at its end: read, not delivered.
  std::snprintf(buf, sizeof buf,
                "rangeio: physical bytes %llu, logical bytes %llu (a timed "
                "run drops the reads in flight at its end; --reads N ends "
                "on a whole count)",
                physical, logical);
  rep->lines.push_back("  INFO  " + std::string(buf));
}

}  // namespace

RangeGen::RangeGen(uint64_t size, const UrlBenchOptions& o, uint64_t seed)
    : block_(o.block),
      slots_(size / o.block),
      sequential_(o.sequential),
      limit_(o.reads),
      state_(seed) {}

std::optional<ByteRange> RangeGen::Next() {
  if (limit_ != 0 && issued_ == limit_) return std::nullopt;
  const uint64_t slot = sequential_ ? issued_ % slots_ : Draw() % slots_;
  ++issued_;
  return ByteRange{slot * block_, block_};
}

uint64_t RangeGen::Draw() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

Status RunReaderRow(
    const UrlRound& round,
    const std::function<std::shared_ptr<Source>(std::shared_ptr<Source>)>&
        decorate,
    UrlFigures* f) {
  const UrlBenchOptions& o = *round.options;
  RANGEIO_ASSIGN_OR_RETURN(std::shared_ptr<Source> src,
                           OpenSource(o.url, round.source));
  if (decorate) src = decorate(std::move(src));
  Options ro = o.reader;
  ro.limiter.io_concurrency = o.concurrency;
  // Each read is one backend read, as fio and the direct rows do, unless
  // the user asks for a planner (-o planner=...).
  if (!ro.reader.planner) ro.reader.planner = PlannerOptions::None();
  RANGEIO_ASSIGN_OR_RETURN(Reader reader, Reader::Open(src, ro));
  const Clock::time_point t0 = Clock::now();
  RANGEIO_RETURN_NOT_OK(DriveReader(reader, round, f));
  f->elapsed_ms =
      std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  const Stats rs = reader.GetStats();
  const Stats ls = reader.limiter()->GetStats();
  f->physical_bytes = rs.physical_bytes;
  f->latency = rs.read_latency;
  f->peak_inflight = ls.peak_in_flight;
  f->peak_retained = ls.peak_retained_count;
  if (auto hs = GetHttpStats(*src); hs.ok()) f->http = *hs;
  f->note = src->Info().description;
  return Status::OK();
}

Result<Report> RunUrl(const UrlBenchOptions& o,
                      std::span<const UrlRow> others) {
  if (o.url.empty()) return Status::InvalidArgument("bench url: no URL given");
  if (o.block == 0) {
    return Status::InvalidArgument("bench url: --block must be at least 1");
  }
  Options ro = o.reader;
  ro.limiter.io_concurrency = o.concurrency;
  if (Status st = ro.Validate(); !st.ok()) {
    return st.WithContext("bench url: --concurrency or -o");
  }
  SourceOptions so = o.source;
  if (!so.local.threads) so.local.threads = o.concurrency;
  so.http.max_connections = std::max(so.http.max_connections, o.concurrency);
  Report rep;
  rep.scenario = "url";
  rep.extra_order = {"reads",          "reads_per_s",    "mib_per_s",
                     "p50_ms",         "p99_ms",         "p999_ms",
                     "gets",           "heads",          "retry_5xx",
                     "retry_throttle", "retry_conn",     "retry_timeout",
                     "throttled",      "limit",          "min_limit",
                     "throttled_s",    "physical_bytes", "logical_bytes"};
  RANGEIO_ASSIGN_OR_RETURN(const UrlRound base, Probe(o, std::move(so), &rep));
  std::vector<UrlRow> rows = {{"rangeio", [](const UrlRound& r, UrlFigures* f) {
                                 return RunReaderRow(r, nullptr, f);
                               }}};
  rows.insert(rows.end(), others.begin(), others.end());
  RANGEIO_RETURN_NOT_OK(RunRows(base, rows, &rep));
  AddVerdicts(o, base.object_store, &rep);
  return rep;
}

}  // namespace rangeio::bench
