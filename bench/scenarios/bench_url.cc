// url — a load generator for ranged reads of any object rangeio opens
// (s3://, http(s)://, file://, a path): what fio is for disks and MinIO's
// warp for S3. Reads of `block` bytes at `concurrency` in flight, random
// (block-aligned, uniform over the object) or sequential, for a time or a
// number of reads. Rows:
//   rangeio   a Reader (rolling window) on OpenSource(url);
// with --compare, in the same run:
//   direct    no library: plain libcurl multi, one GET per read, the same
//             concurrency and signing (HTTP, S3), or `concurrency` threads
//             each in a blocking pread loop (local files);
//   chunked   the same Reader with the chunk barrier (the seed's "before").
// Every row reads the same sequence of ranges (a fixed seed).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#include "bench_object.h"
#include "bench_scenarios.h"
#include "chunk_barrier.h"
#include "direct_curl.h"
#include "progress.h"
#include "rangeio/rangeio.h"
#include "util/mutex.h"
#include "util/parse_text.h"

namespace rangeio::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Ranges per ReadRanges call: large enough that the drain at the end of
// each (one read's latency) is lost in the run, small enough to bound the
// memory of a long run at a high rate.
constexpr uint64_t kSegment = 65'536;
constexpr double kDefaultSeconds = 10;
constexpr uint32_t kSeed = 0x5eed;

// The reads of a run: the same sequence for every row.
class RangeGen {
 public:
  RangeGen(uint64_t size, const UrlBenchOptions& o, uint64_t seed)
      : block_(o.block),
        slots_(size / o.block),
        sequential_(o.sequential),
        limit_(o.reads),
        state_(seed) {}
  std::optional<ByteRange> Next() {
    if (limit_ != 0 && issued_ == limit_) return std::nullopt;
    const uint64_t slot = sequential_ ? issued_ % slots_ : Draw() % slots_;
    ++issued_;
    return ByteRange{slot * block_, block_};
  }

 private:
  uint64_t Draw() {  // splitmix64
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint64_t block_;
  uint64_t slots_;
  bool sequential_;
  uint64_t limit_;  // 0: no limit (a timed run)
  uint64_t issued_ = 0;
  uint64_t state_;
};

struct Figures {
  double elapsed_ms = 0;
  uint64_t reads = 0;
  uint64_t logical_bytes = 0;
  uint64_t physical_bytes = 0;
  std::optional<HttpStats> http;  // HTTP and S3 sources
  LatencyHistogram latency;
  uint64_t peak_inflight = 0;
  uint64_t peak_retained = 0;
  std::string note;
};

Clock::time_point Deadline(const UrlBenchOptions& o, Clock::time_point t0) {
  if (o.reads != 0) return Clock::time_point::max();
  const double s = o.seconds > 0 ? o.seconds : kDefaultSeconds;
  return t0 + std::chrono::duration_cast<Clock::duration>(
                  std::chrono::duration<double>(s));
}

// The Reader rows: segments of kSegment ranges, one stream at a time.
Status RunLibrary(const UrlBenchOptions& o, const SourceOptions& so,
                  uint64_t size, uint64_t seed, bool chunked, Figures* f) {
  RANGEIO_ASSIGN_OR_RETURN(std::shared_ptr<Source> src, OpenSource(o.url, so));
  if (chunked) src = WithChunkBarrier(std::move(src), o.concurrency);
  Options ro = o.reader;
  ro.limiter.io_concurrency = o.concurrency;
  // Each read is one backend read, as fio and the direct rows do, unless
  // the user asks for a planner (-o planner=...).
  if (!ro.reader.planner) ro.reader.planner = PlannerOptions::None();
  RANGEIO_ASSIGN_OR_RETURN(Reader reader, Reader::Open(src, ro));
  RangeGen gen(size, o, seed);
  std::vector<ByteRange> ranges;
  const Clock::time_point t0 = Clock::now();
  const Clock::time_point deadline = Deadline(o, t0);
  bool more = true;
  while (more && Clock::now() < deadline) {
    ranges.clear();
    while (ranges.size() < kSegment) {
      const std::optional<ByteRange> r = gen.Next();
      if (!r) break;
      ranges.push_back(*r);
    }
    if (ranges.empty()) break;
    RANGEIO_ASSIGN_OR_RETURN(RangeStream stream,
                             reader.ReadRanges(ranges, o.delivery));
    for (;;) {
      RANGEIO_ASSIGN_OR_RETURN(std::optional<RangeResult> r, stream.Next());
      if (!r) break;
      ++f->reads;
      f->logical_bytes += r->bytes.size();
      Progress::Get().AddReads(1);
      // Checking the clock every 64 reads keeps it off the hot path.
      if ((f->reads & 63) == 0 && Clock::now() >= deadline) {
        more = false;
        break;  // dropping the stream cancels what is in flight
      }
    }
  }
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

// The direct row over HTTP or S3: what a hand-written libcurl loop gets.
Status RunDirectHttp(const UrlBenchOptions& o, const SourceOptions& so,
                     uint64_t size, uint64_t seed, Figures* f) {
  DirectTarget target;
  target.verify_tls = so.http.verify_tls;
  target.ca_file = so.http.ca_file;
  // The URL, region and credentials that OpenSource resolves, signed as the
  // library signs.
  RANGEIO_ASSIGN_OR_RETURN(const BenchObject object,
                           BenchObject::Resolve(o.url, so.s3));
  target.url = object.get_url();
  target.configure = [&object](CURL* easy) { object.Sign(easy); };
  DirectCurl direct(o.concurrency);
  RangeGen gen(size, o, seed);
  DirectFigures d;
  RANGEIO_RETURN_NOT_OK(direct.Run(
      target, [&] { return gen.Next(); }, Deadline(o, Clock::now()), &d));
  f->elapsed_ms = d.elapsed_ms;
  f->reads = d.reads;
  f->logical_bytes = d.bytes;
  f->physical_bytes = d.bytes;
  f->latency = d.latency;
  HttpStats hs;
  hs.gets = d.gets;
  f->http = hs;
  f->note = "libcurl multi, one GET per read";
  return Status::OK();
}

// The direct row for a local file: `concurrency` threads, each a blocking
// pread loop over the shared sequence.
Status RunDirectPread(const UrlBenchOptions& o, const SourceOptions& so,
                      const std::string& path, uint64_t size, uint64_t seed,
                      Figures* f) {
  const int fd = ::open(
      path.c_str(), O_RDONLY | O_CLOEXEC | (so.local.direct ? O_DIRECT : 0));
  if (fd < 0) return Status::FromErrno(errno, "opening '" + path + "'");
  RangeGen gen(size, o, seed);
  detail::Mutex mu;
  const Clock::time_point t0 = Clock::now();
  const Clock::time_point deadline = Deadline(o, t0);
  std::atomic<uint64_t> reads{0};
  std::atomic<bool> failed{false};
  std::vector<LatencyHistogram> latency(o.concurrency);
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < o.concurrency; ++t) {
    threads.emplace_back([&, t] {
      // O_DIRECT wants an aligned buffer; 4 KiB covers every device here.
      void* buf = std::aligned_alloc(4096, (o.block + 4095) / 4096 * 4096);
      for (;;) {
        std::optional<ByteRange> r;
        {
          detail::MutexLock lk(mu);
          r = gen.Next();
        }
        if (!r || Clock::now() >= deadline || failed.load()) break;
        const Clock::time_point s = Clock::now();
        const ssize_t n =
            ::pread(fd, buf, r->length, static_cast<off_t>(r->offset));
        if (n != static_cast<ssize_t>(r->length)) {
          failed.store(true);
          break;
        }
        latency[t].Record(static_cast<uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() -
                                                                 s)
                .count()));
        reads.fetch_add(1, std::memory_order_relaxed);
        Progress::Get().AddReads(1);
      }
      std::free(buf);
    });
  }
  for (std::thread& t : threads) t.join();
  ::close(fd);
  if (failed.load()) {
    return Status::IoError("direct pread of '" + path + "' returned short");
  }
  f->elapsed_ms =
      std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  f->reads = reads.load();
  f->logical_bytes = f->physical_bytes = f->reads * o.block;
  for (const LatencyHistogram& h : latency) f->latency.Merge(h);
  f->note = std::to_string(o.concurrency) + " threads, blocking pread" +
            (so.local.direct ? ", O_DIRECT" : ", buffered");
  return Status::OK();
}

double Ms(uint64_t nanos) { return static_cast<double>(nanos) / 1e6; }

// Adds a round's figures to a row's totals (peaks: the largest).
void Accumulate(const Figures& f, Figures* t) {
  t->elapsed_ms += f.elapsed_ms;
  t->reads += f.reads;
  t->logical_bytes += f.logical_bytes;
  t->physical_bytes += f.physical_bytes;
  if (f.http) {
    HttpStats& h = t->http ? *t->http : t->http.emplace();
    h.gets += f.http->gets;
    h.heads += f.http->heads;
    h.retries_5xx += f.http->retries_5xx;
    h.retries_throttled += f.http->retries_throttled;
    h.retries_connection += f.http->retries_connection;
    h.retries_timeout += f.http->retries_timeout;
    h.throttled += f.http->throttled;
    // The adaptive limit: where the last round left it, the lowest of all.
    h.endpoint_limit = f.http->endpoint_limit;
    h.endpoint_min_limit =
        h.endpoint_min_limit == 0
            ? f.http->endpoint_min_limit
            : std::min(h.endpoint_min_limit, f.http->endpoint_min_limit);
    h.endpoint_throttled_ns += f.http->endpoint_throttled_ns;
  }
  t->latency.Merge(f.latency);
  t->peak_inflight = std::max(t->peak_inflight, f.peak_inflight);
  t->peak_retained = std::max(t->peak_retained, f.peak_retained);
  t->note = f.note;
}

// A row from its totals over the rounds: `runs` and `rates` are each
// round's elapsed ms and reads/s. Rates are the rounds' median (one round
// slowed by a busy machine does not move it); counts and latency
// percentiles are over every round's reads.
Row MakeRow(const std::string& name, const Figures& f, uint64_t block,
            const std::vector<double>& runs, const std::vector<double>& rates) {
  Row row{name,   runs, f.reads / std::max<size_t>(1, runs.size()), {}, {},
          f.note, {}};
  if (name != "direct") {
    row.peak_inflight = f.peak_inflight;
    row.peak_retained = f.peak_retained;
  }
  const double rate = Median(rates);
  row.extra = {{"reads_per_s", rate},
               {"mib_per_s", rate * static_cast<double>(block) / (1 << 20)},
               {"reads", f.reads},
               {"p50_ms", Ms(f.latency.Percentile(0.5))},
               {"p99_ms", Ms(f.latency.Percentile(0.99))},
               {"p999_ms", Ms(f.latency.Percentile(0.999))},
               {"physical_bytes", f.physical_bytes},
               {"logical_bytes", f.logical_bytes}};
  if (f.http) {
    row.extra["gets"] = f.http->gets;
    row.extra["heads"] = f.http->heads;
    row.extra["retry_5xx"] = f.http->retries_5xx;
    row.extra["retry_throttle"] = f.http->retries_throttled;
    row.extra["retry_conn"] = f.http->retries_connection;
    row.extra["retry_timeout"] = f.http->retries_timeout;
    row.extra["throttled"] = f.http->throttled;
    if (f.http->endpoint_limit > 0) {  // adaptive on (docs/http-s3.md)
      row.extra["limit"] = f.http->endpoint_limit;
      row.extra["min_limit"] = f.http->endpoint_min_limit;
      row.extra["throttled_s"] = Ms(f.http->endpoint_throttled_ns) / 1000;
    }
  }
  return row;
}

}  // namespace

Result<Report> RunUrl(const UrlBenchOptions& o) {
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
  if (!o.local_threads_set) so.local.threads = o.concurrency;
  so.http.max_connections = std::max(so.http.max_connections, o.concurrency);
  // The size once, up front (one bytes=0-0 GET for an object store without
  // size-hint); the rows' sources get it as a hint, so that their GETs are
  // their reads.
  RANGEIO_ASSIGN_OR_RETURN(std::shared_ptr<Source> probe,
                           OpenSource(o.url, so));
  RANGEIO_ASSIGN_OR_RETURN(const uint64_t size, probe->Size());
  if (size < o.block) {
    return Status::InvalidArgument(
        "bench url: '" + probe->name() + "' has " + std::to_string(size) +
        " bytes, fewer than one block of " + std::to_string(o.block));
  }
  const bool object_store = GetHttpStats(*probe).ok();
  so.http.size_hint = size;

  Report rep;
  rep.scenario = "url";
  rep.extra_order = {"reads",          "reads_per_s",    "mib_per_s",
                     "p50_ms",         "p99_ms",         "p999_ms",
                     "gets",           "heads",          "retry_5xx",
                     "retry_throttle", "retry_conn",     "retry_timeout",
                     "throttled",      "limit",          "min_limit",
                     "throttled_s",    "physical_bytes", "logical_bytes"};
  rep.config = {
      {"url", probe->name()},
      {"object_bytes", size},
      {"block", o.block},
      {"concurrency", o.concurrency},
      {"pattern", o.sequential ? "sequential" : "random"},
      {"delivery",
       o.delivery == Delivery::kOrdered ? "ordered" : "as-completed"},
      {"source", probe->Info().description},
      {"rounds", o.rounds},
      {"planner",
       o.reader.reader.planner ? o.reader.reader.planner->ToString() : "none"}};
  if (o.reads != 0) {
    rep.config["reads"] = o.reads;
  } else {
    rep.config["seconds"] = o.seconds > 0 ? o.seconds : kDefaultSeconds;
  }
  probe.reset();

  std::vector<std::string> names = {"rangeio"};
  if (o.compare) names = {"rangeio", "direct", "chunked"};
  // Rounds rotate the rows' order, and every (row, round) reads its own
  // random sequence: a cache under the object (the page cache, a VM host's,
  // a CDN) then favours no row for coming after another.
  std::vector<Figures> totals(names.size());
  std::vector<std::vector<double>> elapsed(names.size());
  std::vector<std::vector<double>> rates(names.size());
  Status failure;
  std::vector<int> rounds_done(names.size(), 0);
  Rounds(o.rounds, names.size(), [&](size_t k) {
    if (!failure.ok()) return;
    const std::string& name = names[k];
    const uint64_t seed =
        kSeed + 1000 * static_cast<uint64_t>(rounds_done[k]++) + k;
    Progress::Get().Phase("url: " + name);
    Figures f;
    if (name == "rangeio") {
      failure = RunLibrary(o, so, size, seed, /*chunked=*/false, &f);
    } else if (name == "chunked") {
      failure = RunLibrary(o, so, size, seed, /*chunked=*/true, &f);
    } else if (object_store) {
      failure = RunDirectHttp(o, so, size, seed, &f);
    } else {
      // A local file: the path OpenSource read (file:// decoded).
      auto local = OpenSource(o.url, so);
      failure = local.ok()
                    ? RunDirectPread(o, so, (*local)->name(), size, seed, &f)
                    : local.status();
    }
    Accumulate(f, &totals[k]);
    elapsed[k].push_back(f.elapsed_ms);
    rates[k].push_back(
        f.elapsed_ms > 0 ? 1000.0 * static_cast<double>(f.reads) / f.elapsed_ms
                         : 0.0);
  });
  RANGEIO_RETURN_NOT_OK(failure);
  for (size_t k = 0; k < names.size(); ++k) {
    rep.rows.push_back(
        MakeRow(names[k], totals[k], o.block, elapsed[k], rates[k]));
  }
  if (o.compare) {
    rep.baseline = "direct";
    const Row& lib = rep.rows[0];
    const Row& direct = rep.rows[1];
    char buf[200];
    const double ratio = lib.extra["reads_per_s"].get<double>() /
                         direct.extra["reads_per_s"].get<double>();
    std::snprintf(buf, sizeof buf,
                  "rangeio / direct reads/s = %.3f (target >= 0.95)", ratio);
    rep.AddVerdict(ratio >= 0.95, buf);
  }
  const Row& lib = rep.rows[0];
  if (object_store) {
    const uint64_t heads = lib.extra["heads"].get<uint64_t>();
    const uint64_t gets = lib.extra["gets"].get<uint64_t>();
    char buf[200];
    std::snprintf(
        buf, sizeof buf,
        "rangeio: %llu GETs for %llu reads, %llu HEADs (target: "
        "no HEAD)",
        static_cast<unsigned long long>(gets),
        static_cast<unsigned long long>(lib.extra["reads"].get<uint64_t>()),
        static_cast<unsigned long long>(heads));
    rep.AddVerdict(heads == 0, buf);
  }
  const uint64_t physical = lib.extra["physical_bytes"].get<uint64_t>();
  const uint64_t logical = lib.extra["logical_bytes"].get<uint64_t>();
  char buf[200];
  if (o.reads != 0) {
    std::snprintf(buf, sizeof buf,
                  "rangeio: physical bytes %llu == logical bytes %llu",
                  static_cast<unsigned long long>(physical),
                  static_cast<unsigned long long>(logical));
    rep.AddVerdict(physical == logical, buf);
  } else {
    // A timed run drops the reads in flight at its end: read, not delivered.
    std::snprintf(buf, sizeof buf,
                  "rangeio: physical bytes %llu, logical bytes %llu (a timed "
                  "run drops the reads in flight at its end; --reads N ends "
                  "on a whole count)",
                  static_cast<unsigned long long>(physical),
                  static_cast<unsigned long long>(logical));
    rep.lines.push_back("  INFO  " + std::string(buf));
  }
  return rep;
}

Result<uint64_t> ParseByteSize(const std::string& what,
                               const std::string& text) {
  uint64_t n = 0;
  if (!detail::ParseBytes(text, &n)) {
    return Status::InvalidArgument(what + " '" + text +
                                   "' is not a size: want e.g. 4096, 64KiB, "
                                   "1MiB (suffix K, KiB, M, MiB, G, GiB)");
  }
  return n;
}

}  // namespace rangeio::bench
