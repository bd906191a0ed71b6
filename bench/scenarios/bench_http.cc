// http — object-store reads through a latency proxy (docs/benchmarks.md, the
// Lance blob numbers): 100 KiB ranges at C = 64 from nginx behind
// rangeio-latency-relay (tests/servers/latency_relay.cc, started by
// tests/servers/run_servers.sh) adding lognormal latency (median 24 ms).
// Strategies in one run:
//   rangeio  a Reader (limiter C = 64, as-completed) on an HTTP source; each
//            range is its own read (no coalescing: the ranges are 1 MiB apart);
//   direct   plain libcurl multi, one GET per range, C in flight, no
//            scheduler: the rate the server and proxy allow.
// With a no-latency listener in front of the same nginx, also
//   proxy-capacity  `direct` through it: what the proxy sustains, to show it
//            is not the bottleneck (target >= 3x rangeio's rate).
// The object may also be an s3:// URL (bench_object.h), e.g. Ceph RGW
// behind the same relay: rangeio reads it with an S3 source, direct sends
// GETs signed by libcurl.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "bench_object.h"
#include "bench_scenarios.h"
#include "direct_curl.h"
#include "progress.h"
#include "rangeio/rangeio.h"

namespace rangeio::bench {
namespace {

constexpr uint64_t kRangeBytes = uint64_t{100} * 1024;
constexpr uint32_t kConcurrency = 64;
// 2,560 reads: about one second per round at the ~2,500 reads/s that 64
// reads of 24 ms in flight allow, and 40 full windows of C.
constexpr uint64_t kReads = 2560;
// Ranges start 1 MiB apart (wrapping in the object), so that no two touch.
constexpr uint64_t kStride = 1 << 20;

struct Figures {
  double elapsed_ms = 0;
  uint64_t reads = 0;
  uint64_t gets = 0;
  uint64_t heads = 0;
  uint64_t physical_bytes = 0;
  uint64_t logical_bytes = 0;
  uint64_t peak_inflight = 0;
  uint64_t peak_retained = 0;
};

std::vector<ByteRange> BenchRanges(uint64_t object_bytes) {
  std::vector<ByteRange> ranges;
  const uint64_t slots = object_bytes / kStride;
  for (uint64_t i = 0; i < kReads; ++i) {
    // A fixed permutation of the slots (7919 is prime, so i * 7919 visits
    // each slot once per `slots` reads when slots is not a multiple of it),
    // plus an odd offset: unaligned reads spread over the object.
    const uint64_t slot = (i * 7919) % slots;
    ranges.push_back(
        {slot * kStride + (i * 4099) % (kStride - kRangeBytes), kRangeBytes});
  }
  return ranges;
}

Status RunRangeio(const BenchObject& object, uint64_t size,
                  const std::vector<ByteRange>& ranges, Figures* f,
                  LatencyHistogram* latency) {
  HttpOptions ho;
  ho.size_hint = size;  // what a table format knows: no size probe
  ho.max_connections = kConcurrency;
  RANGEIO_ASSIGN_OR_RETURN(std::shared_ptr<Source> src, object.Open(ho));
  Options o;
  o.limiter.io_concurrency = kConcurrency;
  RANGEIO_ASSIGN_OR_RETURN(Reader reader, Reader::Open(src, o));
  const auto t0 = std::chrono::steady_clock::now();
  RANGEIO_ASSIGN_OR_RETURN(RangeStream stream,
                           reader.ReadRanges(ranges, Delivery::kAsCompleted));
  uint64_t n = 0;
  uint64_t logical = 0;
  for (;;) {
    RANGEIO_ASSIGN_OR_RETURN(std::optional<RangeResult> r, stream.Next());
    if (!r) break;
    logical += r->bytes.size();
    ++n;
    Progress::Get().AddReads(1);
  }
  const auto t1 = std::chrono::steady_clock::now();
  f->elapsed_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  RANGEIO_ASSIGN_OR_RETURN(HttpStats hs, GetHttpStats(*src));
  const Stats ls = reader.limiter()->GetStats();
  f->reads = n;
  f->gets = hs.gets;
  f->heads = hs.heads;
  f->physical_bytes = hs.bytes;
  f->logical_bytes = logical;
  f->peak_inflight = ls.peak_in_flight;
  f->peak_retained = ls.peak_retained_count;
  latency->Merge(hs.latency);
  return Status::OK();
}

// The direct baseline over `ranges` (all of them, no deadline).
Status RunDirect(DirectCurl& direct, const BenchObject& object,
                 const std::vector<ByteRange>& ranges, Figures* f,
                 LatencyHistogram* latency) {
  size_t next = 0;
  DirectFigures d;
  DirectTarget target;
  target.url = object.get_url();
  target.configure = [&object](CURL* easy) { object.Sign(easy); };
  RANGEIO_RETURN_NOT_OK(direct.Run(
      target,
      [&]() -> std::optional<ByteRange> {
        if (next == ranges.size()) return std::nullopt;
        return ranges[next++];
      },
      std::chrono::steady_clock::time_point::max(), &d));
  f->elapsed_ms = d.elapsed_ms;
  f->reads = d.reads;
  f->gets = d.gets;
  f->physical_bytes = d.bytes;
  f->logical_bytes = d.bytes;
  latency->Merge(d.latency);
  return Status::OK();
}

double Ms(uint64_t nanos) { return static_cast<double>(nanos) / 1e6; }

// CPU seconds (user + system) used so far by the processes in `pids`
// (space-separated); 0 for a pid that cannot be read.
double CpuSeconds(const std::string& pids) {
  double ticks = 0;
  std::istringstream in(pids);
  for (std::string pid; in >> pid;) {
    std::ifstream stat("/proc/" + pid + "/stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    // Fields after the ")" that ends the command name: state is field 3,
    // utime field 14 and stime field 15.
    std::istringstream f(line.substr(line.rfind(')') + 2));
    std::string field;
    for (int i = 3; i <= 15 && f >> field; ++i) {
      if (i >= 14) ticks += std::stod(field);
    }
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// What a run reads: the object through the latency proxy and, when given,
// the same through a no-latency listener.
struct Targets {
  std::optional<BenchObject> object;
  std::optional<BenchObject> capacity;
  // The object's source, opened to learn its size and kept for the whole
  // run (the HTTP engine, its thread and connections, lives while a source
  // does); its name is the URL without user:password or signing values.
  std::shared_ptr<Source> probe;
  std::string capacity_name;  // redacted, as every source's name()
  uint64_t size = 0;
};

// Resolves and sizes the object (at least 2 MiB) and the capacity URL's.
Result<Targets> ResolveTargets(const std::string& url,
                               const std::string& capacity_url) {
  Targets t;
  RANGEIO_ASSIGN_OR_RETURN(t.object, BenchObject::Resolve(url));
  if (!capacity_url.empty()) {
    RANGEIO_ASSIGN_OR_RETURN(t.capacity, BenchObject::Resolve(capacity_url));
  }
  RANGEIO_ASSIGN_OR_RETURN(t.probe, t.object->Open({}));
  if (t.capacity) {
    RANGEIO_ASSIGN_OR_RETURN(std::shared_ptr<Source> c, t.capacity->Open({}));
    t.capacity_name = c->name();
  }
  RANGEIO_ASSIGN_OR_RETURN(t.size, t.probe->Size());
  if (t.size < 2 * kStride) {
    return Status::InvalidArgument("bench http: '" + t.probe->name() +
                                   "' has " + std::to_string(t.size) +
                                   " bytes; it needs at least 2 MiB");
  }
  return t;
}

nlohmann::json HttpConfig(const Targets& t, int rounds) {
  nlohmann::json config = {{"url", t.probe->name()},
                           {"object_bytes", t.size},
                           {"reads", kReads},
                           {"range_bytes", kRangeBytes},
                           {"io_concurrency", kConcurrency},
                           {"delivery", "as-completed"},
                           {"size_hint", true},
                           {"rounds", rounds}};
  if (t.capacity) config["capacity_url"] = t.capacity_name;
  return config;
}

struct Strategy {
  const char* name;
  const BenchObject* object;
  bool library;
};

// rangeio and direct on the object, and proxy-capacity (direct through the
// no-latency listener) when there is one.
std::vector<Strategy> MakeStrategies(const Targets& t) {
  std::vector<Strategy> strategies = {{"rangeio", &*t.object, true},
                                      {"direct", &*t.object, false}};
  if (t.capacity) strategies.push_back({"proxy-capacity", &*t.capacity, false});
  return strategies;
}

// What each strategy's rounds added up to.
struct Totals {
  std::vector<Figures> figures;
  std::vector<LatencyHistogram> latency;
};

// The rounds: every strategy once per round, in rotating order (direct on
// its own kept DirectCurl, `directs[k]`); each run's time into its row,
// its counts and latencies into `totals`.
Status RunRounds(int rounds, const std::vector<Strategy>& strategies,
                 uint64_t size, const std::vector<ByteRange>& ranges,
                 const std::vector<std::unique_ptr<DirectCurl>>& directs,
                 Report* rep, Totals* totals) {
  Status failure;
  Rounds(rounds, strategies.size(), [&](size_t k) {
    if (!failure.ok()) return;
    Figures f;
    const Strategy& s = strategies[k];
    LatencyHistogram* latency = &totals->latency[k];
    failure = s.library
                  ? RunRangeio(*s.object, size, ranges, &f, latency)
                  : RunDirect(*directs[k], *s.object, ranges, &f, latency);
    rep->rows[k].elapsed_ms_runs.push_back(f.elapsed_ms);
    if (s.library) {
      rep->rows[k].peak_inflight = f.peak_inflight;
      rep->rows[k].peak_retained = f.peak_retained;
    }
    Figures& t = totals->figures[k];
    t.reads += f.reads;
    t.gets += f.gets;
    t.heads += f.heads;
    t.physical_bytes += f.physical_bytes;
    t.logical_bytes += f.logical_bytes;
  });
  return failure;
}

// Each row's figures over its rounds: rate, latency, requests and bytes.
void AddFigures(const Totals& totals, Report* rep) {
  for (size_t k = 0; k < totals.figures.size(); ++k) {
    const Figures& t = totals.figures[k];
    const LatencyHistogram& latency = totals.latency[k];
    rep->rows[k].extra = {
        {"reads_per_s", rep->rows[k].ranges_per_s()},
        {"p50_ms", Ms(latency.Percentile(0.5))},
        {"p99_ms", Ms(latency.Percentile(0.99))},
        {"mean_ms",
         Ms(latency.sum_nanos() / std::max<uint64_t>(1, latency.count()))},
        {"reads", t.reads},
        {"gets", t.gets},
        {"heads", t.heads},
        {"physical_bytes", t.physical_bytes},
        {"logical_bytes", t.logical_bytes}};
  }
}

// The targets: rangeio against direct in rate and p50, one GET per read
// and no HEAD, and no more bytes read than asked for.
void AddVerdicts(const Totals& totals, Report* rep) {
  const Row& lib = rep->rows[0];
  const Row& direct = rep->rows[1];
  char buf[200];
  const double ratio = lib.ranges_per_s() / direct.ranges_per_s();
  std::snprintf(buf, sizeof buf,
                "rangeio / direct reads/s = %.3f (target >= 0.95)", ratio);
  rep->AddVerdict(ratio >= 0.95, buf);
  const double p50 =
      lib.extra["p50_ms"].get<double>() / direct.extra["p50_ms"].get<double>();
  std::snprintf(buf, sizeof buf,
                "rangeio / direct p50 = %.3f (target 0.90..1.10)", p50);
  rep->AddVerdict(p50 >= 0.90 && p50 <= 1.10, buf);
  const Figures& t = totals.figures[0];
  std::snprintf(buf, sizeof buf,
                "rangeio: %llu reads, %llu GETs, %llu HEADs (target: one GET "
                "per read, no HEAD)",
                static_cast<unsigned long long>(t.reads),
                static_cast<unsigned long long>(t.gets),
                static_cast<unsigned long long>(t.heads));
  rep->AddVerdict(t.gets == t.reads && t.heads == 0, buf);
  std::snprintf(buf, sizeof buf,
                "rangeio: physical bytes %llu == logical bytes %llu",
                static_cast<unsigned long long>(t.physical_bytes),
                static_cast<unsigned long long>(t.logical_bytes));
  rep->AddVerdict(t.physical_bytes == t.logical_bytes, buf);
}

// What the latency proxy costs (`proxy_cpu`: its CPU seconds over the
// rounds, 0 when unknown) against rangeio's rate, and what proxy-capacity
// (when it ran) read against rangeio.
void AddProxyLines(const Totals& totals, double proxy_cpu, Report* rep) {
  const Row& lib = rep->rows[0];
  char buf[200];
  if (proxy_cpu > 0) {
    // Requests one core of proxy CPU serves per second, against the rate
    // the benchmark asked of the proxy.
    const double per_core =
        static_cast<double>(totals.figures[0].gets + totals.figures[1].gets) /
        proxy_cpu;
    const double cap = per_core / lib.ranges_per_s();
    rep->config["proxy_cpu_us_per_request"] =
        1e6 * proxy_cpu /
        static_cast<double>(totals.figures[0].gets + totals.figures[1].gets);
    std::snprintf(buf, sizeof buf,
                  "proxy capacity: %.0f requests/s per core of its CPU = %.2fx "
                  "rangeio's rate (target >= 3)",
                  per_core, cap);
    rep->AddVerdict(cap >= 3, buf);
    // The relay is one single-threaded process: one core is its ceiling,
    // so requests/s per core of its CPU is also the most it can serve.
    std::snprintf(buf, sizeof buf,
                  "proxy: %.1f us of CPU per request; at rangeio's rate it "
                  "used %.0f%% of one core (one single-threaded process: "
                  "%.0f requests/s at most)",
                  1e6 / per_core, 100 / cap, per_core);
    rep->lines.push_back("  INFO  " + std::string(buf));
  }
  if (rep->rows.size() == 3) {
    const double cap = rep->rows[2].ranges_per_s() / lib.ranges_per_s();
    std::snprintf(buf, sizeof buf,
                  "proxy-capacity (no latency, client, proxy and nginx on the "
                  "same cores) / rangeio = %.2fx",
                  cap);
    rep->lines.push_back("  INFO  " + std::string(buf));
  }
}

}  // namespace

Result<Report> RunHttp(const BenchOptions& options) {
  const std::string url = EnvOr(options.url, "RANGEIO_BENCH_HTTP_URL");
  const bool s3 = url.rfind("s3://", 0) == 0;
  // The test servers' no-latency relay fronts nginx: not for an s3:// URL.
  const std::string capacity_url =
      s3 ? options.capacity_url
         : EnvOr(options.capacity_url, "RANGEIO_BENCH_HTTP_CAPACITY_URL");
  if (url.empty()) {
    return Status::InvalidArgument(
        "bench http needs a URL of a large file served through the latency "
        "proxy: --url URL (http(s):// or s3://), or start the test servers "
        "(eval \"$(tests/servers/run_servers.sh start DIR)\") which export "
        "RANGEIO_BENCH_HTTP_URL");
  }
  RANGEIO_ASSIGN_OR_RETURN(const Targets targets,
                           ResolveTargets(url, capacity_url));
  const std::vector<ByteRange> ranges = BenchRanges(targets.size);

  Report rep;
  rep.scenario = "http";
  rep.config = HttpConfig(targets, options.rounds);
  const std::vector<Strategy> strategies = MakeStrategies(targets);
  Totals totals;
  totals.figures.resize(strategies.size());
  std::vector<std::unique_ptr<DirectCurl>> directs;
  for (size_t k = 0; k < strategies.size(); ++k) {
    directs.push_back(std::make_unique<DirectCurl>(kConcurrency));
  }
  totals.latency.resize(strategies.size());
  for (const Strategy& s : strategies) {
    rep.rows.push_back({s.name, {}, kReads, {}, {}, {}, {}});
  }
  // What the latency proxy costs: its CPU time over the requests that went
  // through it (rangeio's and direct's), as requests per second of one core.
  // (run_servers.sh exports the relay in front of nginx and the one in front
  // of its S3 store separately.)
  const char* proxy_pids = std::getenv(s3 ? "RANGEIO_BENCH_S3_PROXY_PIDS"
                                          : "RANGEIO_BENCH_PROXY_PIDS");
  const double cpu0 = proxy_pids ? CpuSeconds(proxy_pids) : 0;
  RANGEIO_RETURN_NOT_OK(RunRounds(options.rounds, strategies, targets.size,
                                  ranges, directs, &rep, &totals));
  const double proxy_cpu = proxy_pids ? CpuSeconds(proxy_pids) - cpu0 : 0;
  rep.baseline = "direct";
  AddFigures(totals, &rep);
  AddVerdicts(totals, &rep);
  AddProxyLines(totals, proxy_cpu, &rep);
  return rep;
}

}  // namespace rangeio::bench
