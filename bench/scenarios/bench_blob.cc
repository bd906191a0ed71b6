// blob — concurrent callers on shared batching handles (issue 6): 64
// closed-loop caller threads, each reading 100 KiB blobs,
// through the latency proxy (lognormal, median 24 ms) in front of nginx.
// "Same source" means every caller's reads go through ONE batching handle
// (one BatchedReader), "multiple sources" means 8 handles, each shared by 8
// callers (caller t uses handle t % 8), as in the Lance benchmark this
// reproduces. Layouts:
//   dedicated-same   64 blob objects, one BatchedReader over all 64 sources,
//                    shared by every caller (each read picks a blob at
//                    random);
//   dedicated-multi  the 64 blob objects split over 8 BatchedReaders of 8
//                    sources each; caller t reads a random blob of handle
//                    t % 8's eight;
//   packed-same      the blobs packed in one object, one BatchedReader
//                    shared by every caller;
//   packed-multi     the same object opened as 8 BatchedReaders (8
//                    sources), caller t using handle t % 8.
// Modes in one run: serialized (a drained batch waits for the previous
// batch's I/O on all its sources: the old Lance behaviour), dispatched (each
// drained batch goes out at once) and direct (one plain libcurl GET per read on
// the caller's thread, no library). Every source of a layout shares one Limiter
// of C = 64; the planner is off (each blob is one GET, as the targets
// require). Latency is what each caller observes: a blocking read from its
// start to its return, timed on the caller's thread, all of them kept, and
// p50/p99 are exact (nearest rank) over every read of every round.
// The blobs sit next to the URL bench http reads (blob-bench/ beside it):
// written into nginx's root, or, for an s3:// URL (bench_object.h), the
// objects tests/servers/seed.js uploads to the bucket (--bench-mib).
#include <curl/curl.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench_object.h"
#include "bench_scenarios.h"
#include "progress.h"
#include "rangeio/rangeio.h"
#include "serialized_batches.h"

namespace rangeio::bench {
namespace {

constexpr uint64_t kBlobBytes = 100 * 1024;
constexpr int kCallers = 64;
constexpr int kReadsPerCaller = 24;  // 1,536 reads per layout and mode
constexpr int kBlobs = 64;
constexpr int kHandles = 8;  // the "multi" layouts' batching handles
constexpr int kBlobsPerHandle = kBlobs / kHandles;
constexpr uint32_t kConcurrency = 64;
constexpr double kInjectedMedianMs = 24;

using Clock = std::chrono::steady_clock;

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
  std::vector<uint64_t> latency_ns;  // every read, as its caller saw it
};

// The p-th quantile of `sorted` (nearest rank); 0 when empty.
double PercentileMs(const std::vector<uint64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  const size_t rank =
      static_cast<size_t>(std::ceil(p * static_cast<double>(sorted.size())));
  return static_cast<double>(sorted[std::max<size_t>(rank, 1) - 1]) / 1e6;
}

uint64_t NanosSince(Clock::time_point start) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start)
          .count());
}

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

// What caller t reads in its i-th read.
struct Pick {
  int handle;       // which BatchedReader
  int source;       // which of its sources
  uint64_t offset;  // within that object
  int blob;         // which blob: the object (dedicated), for the bytes
};
Pick PickFor(Layout l, int t, std::mt19937_64& rng) {
  const int group = t % kHandles;
  switch (l) {
    case Layout::kDedicatedSame: {
      const int blob = static_cast<int>(rng() % kBlobs);
      return {0, blob, 0, blob};
    }
    case Layout::kDedicatedMulti: {
      const int source = static_cast<int>(rng() % kBlobsPerHandle);
      return {group, source, 0, group * kBlobsPerHandle + source};
    }
    case Layout::kPackedSame: {
      const int blob = static_cast<int>(rng() % kBlobs);
      return {0, 0, blob * kBlobBytes, blob};
    }
    case Layout::kPackedMulti: {
      const int blob = static_cast<int>(rng() % kBlobs);
      return {group, 0, blob * kBlobBytes, blob};
    }
  }
  return {};
}

bool Check(const std::byte* p, size_t n, int blob) {
  const uint64_t at = static_cast<uint64_t>(blob) * kBlobBytes;
  return n == kBlobBytes && p[0] == SimulatedByteAt(at) &&
         p[n - 1] == SimulatedByteAt(at + n - 1);
}

// The blob objects and the packed one, resolved once.
struct BlobObjects {
  std::vector<BenchObject> blobs;
  std::optional<BenchObject> packed;
  const BenchObject& Of(Layout layout, int blob) const {
    return Dedicated(layout) ? blobs[blob] : *packed;
  }
};

Result<BlobObjects> ResolveBlobs(const BenchObject& anchor) {
  BlobObjects o;
  for (int b = 0; b < kBlobs; ++b) {
    RANGEIO_ASSIGN_OR_RETURN(
        BenchObject blob,
        anchor.Sibling("blob-bench/blob-" + std::to_string(b) + ".bin"));
    o.blobs.push_back(std::move(blob));
  }
  RANGEIO_ASSIGN_OR_RETURN(o.packed, anchor.Sibling("blob-bench/packed.bin"));
  return o;
}

// The batching under test: the library's BatchedReader, or the baseline
// that serializes batches (baselines/serialized_batches.h).
struct Handle {
  std::shared_ptr<BatchedReader> batched;
  std::unique_ptr<SerializedBatches> serialized;

  Result<Slice> Read(size_t source, ByteRange range) const {
    return batched ? batched->Read(source, range)
                   : serialized->Read(source, range);
  }
  size_t source_count() const {
    return batched ? batched->source_count() : serialized->source_count();
  }
  const Reader& reader(size_t i) const {
    return batched ? batched->reader(i) : serialized->reader(i);
  }
};

Result<Outcome> RunLibrary(Layout layout, bool serialized,
                           const BlobObjects& objects) {
  Options o;
  o.limiter.io_concurrency = kConcurrency;
  o.reader.planner = PlannerOptions::None();
  RANGEIO_ASSIGN_OR_RETURN(std::shared_ptr<Limiter> limiter, Limiter::Make(o));
  BatchOptions bo;
  const bool multi =
      layout == Layout::kDedicatedMulti || layout == Layout::kPackedMulti;
  const int n_handles = multi ? kHandles : 1;
  const int sources_per_handle = layout == Layout::kDedicatedSame ? kBlobs
                                 : Dedicated(layout) ? kBlobsPerHandle
                                                     : 1;
  std::vector<std::shared_ptr<Source>> sources;
  std::vector<Handle> handles;
  for (int h = 0; h < n_handles; ++h) {
    std::vector<Reader> readers;
    for (int i = 0; i < sources_per_handle; ++i) {
      HttpOptions ho;
      const int blob = h * sources_per_handle + i;
      ho.size_hint = Dedicated(layout) ? kBlobBytes : kBlobBytes * kBlobs;
      RANGEIO_ASSIGN_OR_RETURN(std::shared_ptr<Source> s,
                               objects.Of(layout, blob).Open(ho));
      RANGEIO_ASSIGN_OR_RETURN(Reader r, Reader::Open(s, o.reader, limiter));
      sources.push_back(s);
      readers.push_back(std::move(r));
    }
    Handle handle;
    if (serialized) {
      handle.serialized =
          std::make_unique<SerializedBatches>(std::move(readers));
    } else {
      RANGEIO_ASSIGN_OR_RETURN(handle.batched,
                               BatchedReader::Open(std::move(readers), bo));
    }
    handles.push_back(std::move(handle));
  }
  Outcome out;
  std::mutex mu;
  std::vector<std::thread> callers;
  callers.reserve(kCallers);
  const auto t0 = Clock::now();
  for (int t = 0; t < kCallers; ++t) {
    callers.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      std::vector<uint64_t> lat;
      lat.reserve(kReadsPerCaller);
      uint64_t wrong = 0;
      for (int i = 0; i < kReadsPerCaller; ++i) {
        const Pick p = PickFor(layout, t, rng);
        const auto s = Clock::now();
        Result<Slice> r =
            handles[p.handle].Read(p.source, {p.offset, kBlobBytes});
        lat.push_back(NanosSince(s));
        if (!r.ok() || !Check(r->data(), r->size(), p.blob)) ++wrong;
      }
      std::lock_guard lk(mu);
      out.latency_ns.insert(out.latency_ns.end(), lat.begin(), lat.end());
      out.wrong += wrong;
    });
  }
  for (std::thread& c : callers) c.join();
  out.elapsed_ms =
      std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  out.reads = static_cast<uint64_t>(kCallers) * kReadsPerCaller;
  for (const Handle& h : handles) {
    for (size_t i = 0; i < h.source_count(); ++i) {
      const Stats st = h.reader(i).GetStats();
      out.physical_bytes += st.physical_bytes;
      out.logical_bytes += st.logical_bytes;
    }
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
Result<Outcome> RunDirect(Layout layout, const BlobObjects& objects) {
  Outcome out;
  std::mutex mu;
  std::vector<std::thread> callers;
  callers.reserve(kCallers);
  const auto t0 = Clock::now();
  for (int t = 0; t < kCallers; ++t) {
    callers.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      CURL* easy = curl_easy_init();
      std::vector<std::byte> body;
      std::vector<uint64_t> lat;
      lat.reserve(kReadsPerCaller);
      uint64_t wrong = 0, gets = 0, bytes = 0;
      for (int i = 0; i < kReadsPerCaller; ++i) {
        const Pick p = PickFor(layout, t, rng);
        const BenchObject& object = objects.Of(layout, p.blob);
        const std::string range = std::to_string(p.offset) + "-" +
                                  std::to_string(p.offset + kBlobBytes - 1);
        body.clear();
        curl_easy_setopt(easy, CURLOPT_URL, object.get_url().c_str());
        object.Sign(easy);
        curl_easy_setopt(easy, CURLOPT_RANGE, range.c_str());
        curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, Append);
        curl_easy_setopt(easy, CURLOPT_WRITEDATA, &body);
        const auto s = Clock::now();
        const CURLcode rc = curl_easy_perform(easy);
        lat.push_back(NanosSince(s));
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
      out.latency_ns.insert(out.latency_ns.end(), lat.begin(), lat.end());
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

constexpr Layout kLayouts[] = {Layout::kDedicatedSame, Layout::kDedicatedMulti,
                               Layout::kPackedSame, Layout::kPackedMulti};
// The modes of each layout, in row order: a cell's `mode` indexes them.
constexpr const char* kModes[] = {"serialized", "dispatched", "direct"};
constexpr int kDirectMode = 2;

nlohmann::json BlobConfig(const std::string& base_url, int rounds) {
  return {{"base_url", base_url},
          {"callers", kCallers},
          {"reads_per_caller", kReadsPerCaller},
          {"blob_bytes", kBlobBytes},
          {"blobs", kBlobs},
          {"handles_multi", kHandles},
          {"latency", "caller-observed, exact (nearest rank)"},
          {"io_concurrency", kConcurrency},
          {"injected_latency", "lognormal, median 24 ms (proxy)"},
          {"planner", "none"},
          {"rounds", rounds}};
}

// One row: a layout in one mode, with what its rounds added up to.
struct Cell {
  Layout layout;
  int mode;
  Outcome total;  // latency_ns: every read of every round
};

// The cells, every layout in every mode, and a row for each in `rep`.
std::vector<Cell> AddCells(Report* rep) {
  std::vector<Cell> cells;
  for (Layout l : kLayouts) {
    for (int m = 0; m < 3; ++m) {
      cells.push_back({l, m, {}});
      Row row;
      row.strategy = std::string(LayoutName(l)) + "/" + kModes[m];
      row.ranges = static_cast<uint64_t>(kCallers) * kReadsPerCaller;
      rep->rows.push_back(row);
    }
  }
  return cells;
}

// The rounds: every cell once per round, in rotating order; each run's
// time into its row, its reads, requests and bytes into its cell's total.
// An error for a run that failed or read wrong bytes.
Status RunRounds(int rounds, const BlobObjects& objects,
                 std::vector<Cell>* cells, Report* rep) {
  Status failure;
  Rounds(rounds, cells->size(), [&](size_t k) {
    if (!failure.ok()) return;
    Cell& c = (*cells)[k];
    Result<Outcome> o =
        c.mode == kDirectMode
            ? RunDirect(c.layout, objects)
            : RunLibrary(c.layout, /*serialized=*/c.mode == 0, objects);
    if (!o.ok()) {
      failure = o.status();
      return;
    }
    if (o->wrong != 0) {
      failure = Status::Internal("bench blob " + rep->rows[k].strategy + ": " +
                                 std::to_string(o->wrong) +
                                 " reads failed or had wrong bytes");
      return;
    }
    rep->rows[k].elapsed_ms_runs.push_back(o->elapsed_ms);
    c.total.latency_ns.insert(c.total.latency_ns.end(), o->latency_ns.begin(),
                              o->latency_ns.end());
    c.total.reads += o->reads;
    Progress::Get().AddReads(o->reads);
    c.total.gets += o->gets;
    c.total.heads += o->heads;
    c.total.physical_bytes += o->physical_bytes;
    c.total.logical_bytes += o->logical_bytes;
  });
  return failure;
}

// Each row's figures over its rounds (the cells' latencies sorted for the
// percentiles); returns each row's p50 in ms.
std::vector<double> AddFigures(std::vector<Cell>* cells, Report* rep) {
  std::vector<double> p50(cells->size());
  for (size_t k = 0; k < cells->size(); ++k) {
    Cell& c = (*cells)[k];
    Row& r = rep->rows[k];
    std::sort(c.total.latency_ns.begin(), c.total.latency_ns.end());
    p50[k] = PercentileMs(c.total.latency_ns, 0.5);
    r.extra = {{"layout", LayoutName(c.layout)},
               {"strategy", kModes[c.mode]},
               {"reads_per_s", r.ranges_per_s()},
               {"p50_ms", p50[k]},
               {"p99_ms", PercentileMs(c.total.latency_ns, 0.99)},
               {"gets", c.total.gets},
               {"heads", c.total.heads},
               {"physical_bytes", c.total.physical_bytes},
               {"logical_bytes", c.total.logical_bytes}};
  }
  return p50;
}

// The targets: per layout, dispatched against serialized and direct, and
// its p50 against the injected median; for every row, one GET per read and
// no more bytes read than asked for.
void AddVerdicts(const std::vector<Cell>& cells, const std::vector<double>& p50,
                 Report* rep) {
  char buf[220];
  for (size_t l = 0; l < std::size(kLayouts); ++l) {
    const Row& ser = rep->rows[3 * l];
    const Row& dis = rep->rows[3 * l + 1];
    const Row& dir = rep->rows[3 * l + 2];
    const double vs_ser = dis.ranges_per_s() / ser.ranges_per_s();
    const double vs_dir = dis.ranges_per_s() / dir.ranges_per_s();
    const double dis_p50 = p50[3 * l + 1];
    const double dir_p50 = p50[3 * l + 2];
    std::snprintf(buf, sizeof buf,
                  "%s: dispatched / serialized = %.2f (target >= 1.8)",
                  LayoutName(kLayouts[l]), vs_ser);
    rep->AddVerdict(vs_ser >= 1.8, buf);
    std::snprintf(buf, sizeof buf,
                  "%s: dispatched / direct = %.2f (target >= 0.95)",
                  LayoutName(kLayouts[l]), vs_dir);
    rep->AddVerdict(vs_dir >= 0.95, buf);
    std::snprintf(buf, sizeof buf,
                  "%s: dispatched p50 %.2f ms = %.3fx the injected %.0f ms "
                  "(target <= 1.10; direct's p50 %.2f ms = %.3fx)",
                  LayoutName(kLayouts[l]), dis_p50, dis_p50 / kInjectedMedianMs,
                  kInjectedMedianMs, dir_p50, dir_p50 / kInjectedMedianMs);
    rep->AddVerdict(dis_p50 / kInjectedMedianMs <= 1.10, buf);
  }
  bool one_get = true, bytes_equal = true;
  for (const Cell& c : cells) {
    one_get = one_get && c.total.gets == c.total.reads && c.total.heads == 0;
    bytes_equal =
        bytes_equal && c.total.physical_bytes == c.total.logical_bytes;
  }
  rep->AddVerdict(one_get, "every read one GET, zero HEADs (every row)");
  rep->AddVerdict(bytes_equal, "physical bytes == logical bytes (every row)");
}

}  // namespace

Result<Report> RunBlob(const BenchOptions& options) {
  std::string url = EnvOr(options.url, "RANGEIO_BENCH_HTTP_URL");
  const std::string root = EnvOr("", "RANGEIO_TEST_NGINX_ROOT");
  const bool s3 = url.rfind("s3://", 0) == 0;
  if (url.empty() || (root.empty() && !s3)) {
    return Status::InvalidArgument(
        "bench blob needs the test servers: eval \"$(tests/servers/"
        "run_servers.sh start DIR)\" exports RANGEIO_BENCH_HTTP_URL (a file "
        "through the 24 ms latency proxy) and RANGEIO_TEST_NGINX_ROOT (the "
        "directory nginx serves, where the blobs are written)");
  }
  const std::string base = url.substr(0, url.rfind('/'));
  RANGEIO_ASSIGN_OR_RETURN(const BenchObject anchor, BenchObject::Resolve(url));
  // An s3:// bucket holds the blobs already (seed.js); bench http's URL on
  // nginx gets them written next to it.
  if (!s3) RANGEIO_RETURN_NOT_OK(PrepareObjects(root));
  RANGEIO_ASSIGN_OR_RETURN(const BlobObjects objects, ResolveBlobs(anchor));
  curl_global_init(CURL_GLOBAL_DEFAULT);

  Report rep;
  rep.scenario = "blob";
  rep.config = BlobConfig(base, options.rounds);
  std::vector<Cell> cells = AddCells(&rep);
  RANGEIO_RETURN_NOT_OK(RunRounds(options.rounds, objects, &cells, &rep));
  const std::vector<double> p50 = AddFigures(&cells, &rep);
  AddVerdicts(cells, p50, &rep);
  return rep;
}

}  // namespace rangeio::bench
