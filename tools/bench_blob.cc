// blob — concurrent callers on one object (BENCHMARKS.md, issue 6): 64
// closed-loop caller threads, each reading 100 KiB blobs, through the
// latency proxy (lognormal, median 24 ms) in front of nginx. Layouts:
//   dedicated-same   64 blob objects, one BatchedReader each, shared by
//                    every caller (each read picks a blob at random);
//   dedicated-multi  64 blob objects, caller t alone reads object t through
//                    its own BatchedReader (one source per caller);
//   packed-same      the blobs packed in one object, one BatchedReader
//                    shared by every caller;
//   packed-multi     the same object opened as 8 BatchedReaders (8
//                    sources), caller t using source t % 8.
// Modes in one run: serialized (a batch waits for the previous batch's
// I/O: the old Lance behaviour), dispatched (each drained batch goes out at
// once) and direct (one plain libcurl GET per read on the caller's thread,
// no library). Every source of a layout shares one Limiter of C = 64; the
// planner is off (each blob is one GET, as the targets require).
#include <curl/curl.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench_scenarios.h"
#include "rangeio/rangeio.h"

namespace rangeio::bench {
namespace {

constexpr uint64_t kBlobBytes = 100 * 1024;
constexpr int kCallers = 64;
constexpr int kReadsPerCaller = 24;  // 1,536 reads per layout and mode
constexpr int kBlobs = 64;
constexpr int kPackedSources = 8;
constexpr uint32_t kConcurrency = 64;
constexpr double kInjectedMedianMs = 24;

using Clock = std::chrono::steady_clock;

std::string EnvOr(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// Writes the blob objects (dedicated) and the packed object into the
// served directory unless they are there with the right sizes.
Status PrepareObjects(const std::string& root) {
  const std::string dir = root + "/blob-bench";
  ::mkdir(dir.c_str(), 0755);
  std::vector<std::byte> buf(kBlobBytes * kBlobs);
  FillSimulatedBytes(0, buf);
  auto write = [](const std::string& path, const std::byte* p, size_t n) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 &&
        static_cast<size_t>(st.st_size) == n) {
      return Status::OK();
    }
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return Status::FromErrno(errno, "creating '" + path + "'");
    const ssize_t w = ::write(fd, p, n);
    ::close(fd);
    if (w != static_cast<ssize_t>(n)) {
      return Status::IoError("short write to '" + path + "'");
    }
    return Status::OK();
  };
  for (int b = 0; b < kBlobs; ++b) {
    RANGEIO_RETURN_NOT_OK(write(dir + "/blob-" + std::to_string(b) + ".bin",
                                buf.data() + b * kBlobBytes, kBlobBytes));
  }
  return write(dir + "/packed.bin", buf.data(), buf.size());
}

struct Outcome {
  double elapsed_ms = 0;
  uint64_t reads = 0;
  uint64_t gets = 0;
  uint64_t heads = 0;
  uint64_t physical_bytes = 0;
  uint64_t logical_bytes = 0;
  uint64_t wrong = 0;
  LatencyHistogram latency;
};

enum class Layout {
  kDedicatedSame,
  kDedicatedMulti,
  kPackedSame,
  kPackedMulti
};
const char* LayoutName(Layout l) {
  switch (l) {
    case Layout::kDedicatedSame:
      return "dedicated-same";
    case Layout::kDedicatedMulti:
      return "dedicated-multi";
    case Layout::kPackedSame:
      return "packed-same";
    case Layout::kPackedMulti:
      return "packed-multi";
  }
  return "?";
}
bool Dedicated(Layout l) {
  return l == Layout::kDedicatedSame || l == Layout::kDedicatedMulti;
}

// What caller t reads in its i-th read: (object, offset in it).
struct Pick {
  int object;       // dedicated: blob object; packed: source index
  uint64_t offset;  // within the object
  int blob;         // for checking the bytes
};
Pick PickFor(Layout l, int t, std::mt19937_64& rng) {
  const int blob = static_cast<int>(rng() % kBlobs);
  switch (l) {
    case Layout::kDedicatedSame:
      return {blob, 0, blob};
    case Layout::kDedicatedMulti:
      return {t, 0, t};
    case Layout::kPackedSame:
      return {0, blob * kBlobBytes, blob};
    case Layout::kPackedMulti:
      return {t % kPackedSources, blob * kBlobBytes, blob};
  }
  return {};
}

bool Check(const std::byte* p, size_t n, int blob) {
  const uint64_t at = static_cast<uint64_t>(blob) * kBlobBytes;
  return n == kBlobBytes && p[0] == SimulatedByteAt(at) &&
         p[n - 1] == SimulatedByteAt(at + n - 1);
}

Result<Outcome> RunLibrary(Layout layout, BatchMode mode,
                           const std::string& base) {
  Options o;
  o.io_concurrency = kConcurrency;
  o.planner = PlannerOptions::None();
  RANGEIO_ASSIGN_OR_RETURN(std::shared_ptr<Limiter> limiter, Limiter::Make(o));
  BatchOptions bo;
  bo.mode = mode;
  std::vector<std::shared_ptr<Source>> sources;
  std::vector<std::shared_ptr<BatchedReader>> handles;
  const int n = Dedicated(layout)                ? kBlobs
                : layout == Layout::kPackedMulti ? kPackedSources
                                                 : 1;
  for (int i = 0; i < n; ++i) {
    HttpOptions ho;
    std::string url = base + "/blob-bench/packed.bin";
    ho.size_hint = kBlobBytes * kBlobs;
    if (Dedicated(layout)) {
      url = base + "/blob-bench/blob-" + std::to_string(i) + ".bin";
      ho.size_hint = kBlobBytes;
    }
    RANGEIO_ASSIGN_OR_RETURN(std::shared_ptr<Source> s,
                             OpenHttpSource(url, ho));
    RANGEIO_ASSIGN_OR_RETURN(Reader r, Reader::Open(s, o, limiter));
    RANGEIO_ASSIGN_OR_RETURN(std::shared_ptr<BatchedReader> b,
                             BatchedReader::Open(r, bo));
    sources.push_back(s);
    handles.push_back(b);
  }
  Outcome out;
  std::mutex mu;
  std::vector<std::thread> callers;
  const auto t0 = Clock::now();
  for (int t = 0; t < kCallers; ++t) {
    callers.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      LatencyHistogram lat;
      uint64_t wrong = 0;
      for (int i = 0; i < kReadsPerCaller; ++i) {
        const Pick p = PickFor(layout, t, rng);
        const auto s = Clock::now();
        Result<Slice> r = handles[p.object]->Read({p.offset, kBlobBytes});
        lat.Record(static_cast<uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() -
                                                                 s)
                .count()));
        if (!r.ok() || !Check(r->data(), r->size(), p.blob)) ++wrong;
      }
      std::lock_guard lk(mu);
      out.latency.Merge(lat);
      out.wrong += wrong;
    });
  }
  for (std::thread& c : callers) c.join();
  out.elapsed_ms =
      std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  out.reads = static_cast<uint64_t>(kCallers) * kReadsPerCaller;
  for (const std::shared_ptr<BatchedReader>& h : handles) {
    const Stats st = h->reader().GetStats();
    out.physical_bytes += st.physical_bytes;
    out.logical_bytes += st.logical_bytes;
  }
  for (const std::shared_ptr<Source>& s : sources) {
    RANGEIO_ASSIGN_OR_RETURN(HttpStats hs, GetHttpStats(*s));
    out.gets += hs.gets;
    out.heads += hs.heads;
  }
  return out;
}

size_t Append(char* data, size_t size, size_t n, void* sink) {
  auto* v = static_cast<std::vector<std::byte>*>(sink);
  const auto* p = reinterpret_cast<const std::byte*>(data);
  v->insert(v->end(), p, p + size * n);
  return size * n;
}

// One plain ranged GET per read, on the caller's thread, each caller with
// its own kept-alive connection: the rate without any library.
Result<Outcome> RunDirect(Layout layout, const std::string& base) {
  Outcome out;
  std::mutex mu;
  std::vector<std::thread> callers;
  std::atomic<uint64_t> failed{0};
  const auto t0 = Clock::now();
  for (int t = 0; t < kCallers; ++t) {
    callers.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      CURL* easy = curl_easy_init();
      std::vector<std::byte> body;
      LatencyHistogram lat;
      uint64_t wrong = 0, gets = 0, bytes = 0;
      for (int i = 0; i < kReadsPerCaller; ++i) {
        const Pick p = PickFor(layout, t, rng);
        const std::string url =
            Dedicated(layout)
                ? base + "/blob-bench/blob-" + std::to_string(p.object) + ".bin"
                : base + "/blob-bench/packed.bin";
        const std::string range = std::to_string(p.offset) + "-" +
                                  std::to_string(p.offset + kBlobBytes - 1);
        body.clear();
        curl_easy_setopt(easy, CURLOPT_URL, url.c_str());
        curl_easy_setopt(easy, CURLOPT_RANGE, range.c_str());
        curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, Append);
        curl_easy_setopt(easy, CURLOPT_WRITEDATA, &body);
        const auto s = Clock::now();
        const CURLcode rc = curl_easy_perform(easy);
        lat.Record(static_cast<uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() -
                                                                 s)
                .count()));
        ++gets;
        long status = 0;
        curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
        if (rc != CURLE_OK || status != 206 ||
            !Check(body.data(), body.size(), p.blob)) {
          ++wrong;
        }
        bytes += body.size();
      }
      curl_easy_cleanup(easy);
      std::lock_guard lk(mu);
      out.latency.Merge(lat);
      out.wrong += wrong;
      out.gets += gets;
      out.physical_bytes += bytes;
      out.logical_bytes += bytes;
    });
  }
  for (std::thread& c : callers) c.join();
  out.elapsed_ms =
      std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  out.reads = static_cast<uint64_t>(kCallers) * kReadsPerCaller;
  return out;
}

}  // namespace

Result<Report> RunBlob(const BenchOptions& options) {
  std::string url =
      options.url.empty() ? EnvOr("RANGEIO_BENCH_HTTP_URL") : options.url;
  const std::string root = EnvOr("RANGEIO_TEST_NGINX_ROOT");
  if (url.empty() || root.empty()) {
    return Status::InvalidArgument(
        "bench blob needs the test servers: eval \"$(tests/servers/"
        "run_servers.sh start DIR)\" exports RANGEIO_BENCH_HTTP_URL (a file "
        "through the 24 ms latency proxy) and RANGEIO_TEST_NGINX_ROOT (the "
        "directory nginx serves, where the blobs are written)");
  }
  const std::string base = url.substr(0, url.rfind('/'));
  RANGEIO_RETURN_NOT_OK(PrepareObjects(root));
  curl_global_init(CURL_GLOBAL_DEFAULT);

  const Layout layouts[] = {Layout::kDedicatedSame, Layout::kDedicatedMulti,
                            Layout::kPackedSame, Layout::kPackedMulti};
  const char* modes[] = {"serialized", "dispatched", "direct"};
  Report rep;
  rep.scenario = "blob";
  rep.config = {{"base_url", base},
                {"callers", kCallers},
                {"reads_per_caller", kReadsPerCaller},
                {"blob_bytes", kBlobBytes},
                {"blobs", kBlobs},
                {"packed_sources", kPackedSources},
                {"io_concurrency", kConcurrency},
                {"injected_latency", "lognormal, median 24 ms (proxy)"},
                {"planner", "none"},
                {"rounds", options.rounds}};
  struct Cell {
    Layout layout;
    int mode;
    LatencyHistogram latency;
    Outcome total;
  };
  std::vector<Cell> cells;
  for (Layout l : layouts) {
    for (int m = 0; m < 3; ++m) {
      cells.push_back({l, m, {}, {}});
      Row row{std::string(LayoutName(l)) + "/" + modes[m],
              {},
              static_cast<uint64_t>(kCallers) * kReadsPerCaller,
              {},
              {},
              {}};
      rep.rows.push_back(row);
    }
  }
  Status failure;
  Rounds(options.rounds, cells.size(), [&](size_t k) {
    if (!failure.ok()) return;
    Cell& c = cells[k];
    Result<Outcome> o = c.mode == 2
                            ? RunDirect(c.layout, base)
                            : RunLibrary(c.layout,
                                         c.mode == 0 ? BatchMode::kSerialized
                                                     : BatchMode::kDispatched,
                                         base);
    if (!o.ok()) {
      failure = o.status();
      return;
    }
    if (o->wrong != 0) {
      failure = Status::Internal("bench blob " + rep.rows[k].strategy + ": " +
                                 std::to_string(o->wrong) +
                                 " reads failed or had wrong bytes");
      return;
    }
    rep.rows[k].elapsed_ms_runs.push_back(o->elapsed_ms);
    c.latency.Merge(o->latency);
    c.total.reads += o->reads;
    c.total.gets += o->gets;
    c.total.heads += o->heads;
    c.total.physical_bytes += o->physical_bytes;
    c.total.logical_bytes += o->logical_bytes;
  });
  RANGEIO_RETURN_NOT_OK(failure);

  bool one_get = true, bytes_equal = true;
  for (size_t k = 0; k < cells.size(); ++k) {
    const Cell& c = cells[k];
    Row& r = rep.rows[k];
    r.extra = {{"layout", LayoutName(c.layout)},
               {"strategy", modes[c.mode]},
               {"reads_per_s", r.ranges_per_s()},
               {"p50_ms", c.latency.Percentile(0.5) / 1e6},
               {"p99_ms", c.latency.Percentile(0.99) / 1e6},
               {"gets", c.total.gets},
               {"heads", c.total.heads},
               {"physical_bytes", c.total.physical_bytes},
               {"logical_bytes", c.total.logical_bytes}};
    one_get = one_get && c.total.gets == c.total.reads && c.total.heads == 0;
    bytes_equal =
        bytes_equal && c.total.physical_bytes == c.total.logical_bytes;
  }
  char buf[220];
  for (size_t l = 0; l < std::size(layouts); ++l) {
    const Row& ser = rep.rows[3 * l];
    const Row& dis = rep.rows[3 * l + 1];
    const Row& dir = rep.rows[3 * l + 2];
    const double vs_ser = dis.ranges_per_s() / ser.ranges_per_s();
    const double vs_dir = dis.ranges_per_s() / dir.ranges_per_s();
    const double p50 = cells[3 * l + 1].latency.Percentile(0.5) / 1e6;
    std::snprintf(buf, sizeof buf,
                  "%s: dispatched / serialized = %.2f (target >= 1.8)",
                  LayoutName(layouts[l]), vs_ser);
    rep.AddVerdict(vs_ser >= 1.8, buf);
    std::snprintf(buf, sizeof buf,
                  "%s: dispatched / direct = %.2f (target >= 0.95)",
                  LayoutName(layouts[l]), vs_dir);
    rep.AddVerdict(vs_dir >= 0.95, buf);
    std::snprintf(buf, sizeof buf,
                  "%s: dispatched p50 %.1f ms = %.2fx the injected %.0f ms "
                  "(target <= 1.10; histogram bucket bound)",
                  LayoutName(layouts[l]), p50, p50 / kInjectedMedianMs,
                  kInjectedMedianMs);
    rep.AddVerdict(p50 / kInjectedMedianMs <= 1.10, buf);
  }
  rep.AddVerdict(one_get, "every read one GET, zero HEADs (every row)");
  rep.AddVerdict(bytes_equal, "physical bytes == logical bytes (every row)");
  return rep;
}

}  // namespace rangeio::bench
