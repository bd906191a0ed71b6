// bench_soak.cc — `rangeio-bench soak`: nothing lost, nothing leaked,
// nothing hangs, for as long as it runs (issue 16).
//
// 64 threads on clones of readers that share one limiter read random ranges
// of three objects: a local file, and, when the test servers run
// (tests/servers/run_servers.sh), nginx's and s3rver's pattern.bin through
// fault-proxy listeners that inject 503 SlowDown, resets, truncations and
// stalls at a few percent. Each stream is drained, cancelled midway or
// dropped while its caller holds slices. Every delivered byte is checked
// against the objects' known content (SimulatedByteAt). Beside them, with
// FAISS, one thread runs reconstruct_n over every vector and a search on an
// IVF index read through integrations/faiss (bench_soak_faiss.h).
//
// Verdicts: zero wrong bytes; no stream failed with anything but a fault
// that outlasted its retries; FAISS's answers equal FAISS's in memory; at
// the end the limiter has 0 in flight and 0 retained, the process has the
// file descriptors it had at the start, and peak RSS stayed within the
// bound below. RSS and the allocator's in-use bytes (mallinfo2) are both
// reported: RSS creeping while in-use bytes stay flat is the allocator
// keeping freed pages, not a leak.
#include <curl/curl.h>
#include <dirent.h>
#include <malloc.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench_scenarios.h"
#include "bench_soak_faiss.h"
#include "rangeio/rangeio.h"

namespace rangeio::bench {
namespace {

constexpr int kThreads = 64;
constexpr uint64_t kLocalBytes = 8 << 20;
// tests/servers/seed.js's pattern.bin: 1 MiB + 13 bytes of SimulatedByteAt.
constexpr uint64_t kPatternBytes = (1 << 20) + 13;
constexpr uint64_t kMaxRangeBytes = 64 << 10;
constexpr int kMaxRanges = 32;
// The peak RSS allowed above the RSS at the start: the response budget
// (every admitted read's buffer), the buffer pool's idle cap (64 MiB,
// buffer_pool.h), every thread's cache and check buffer (~0.5 MiB each), and
// as much again for the allocator's arenas and libcurl's connections.
constexpr uint64_t kRssSlackBytes = 64 << 20;

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

// /proc/self/status's VmRSS or VmHWM (peak) in bytes.
uint64_t StatusBytes(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field, 0) == 0) {
      return std::strtoull(line.c_str() + std::strlen(field) + 1, nullptr, 10) *
             1024;
    }
  }
  return 0;
}

// The open file descriptors and what each is (readlink), but the
// directory's own.
std::map<int, std::string> OpenFdMap() {
  std::map<int, std::string> fds;
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return fds;
  const int own = ::dirfd(d);
  while (const dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const int fd = std::atoi(e->d_name);
    if (fd == own) continue;
    char target[256] = {};
    const std::string link = std::string("/proc/self/fd/") + e->d_name;
    const ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
    fds[fd] = n > 0 ? std::string(target, static_cast<size_t>(n)) : "?";
  }
  ::closedir(d);
  return fds;
}

int OpenFds() { return static_cast<int>(OpenFdMap().size()); }

// "fd 7 (socket:[123])" for each descriptor of `now` not in `before`.
std::string NewFds(const std::map<int, std::string>& before,
                   const std::map<int, std::string>& now) {
  std::string out;
  for (const auto& [fd, what] : now) {
    auto it = before.find(fd);
    if (it != before.end() && it->second == what) continue;
    out += (out.empty() ? "" : ", ") + ("fd " + std::to_string(fd)) + " (" +
           what + ")";
  }
  return out;
}

uint64_t HeapInUse() { return mallinfo2().uordblks; }

size_t Discard(char*, size_t size, size_t n, void*) { return size * n; }

// A fault-proxy listener (tests/servers/faultproxy.js) in front of
// `upstream`; its port, or 0.
int MakeFaultyListener(const std::string& control, const std::string& upstream,
                       uint64_t seed) {
  const std::string body =
      R"({"upstream": ")" + upstream + R"(", "seed": )" + std::to_string(seed) +
      R"(, "faults": [{"rate": 0.02, "kind": "slowdown"},)"
      R"( {"rate": 0.01, "kind": "reset", "after_bytes": 100},)"
      R"( {"rate": 0.01, "kind": "truncate", "after_bytes": 100},)"
      R"( {"rate": 0.005, "kind": "stall", "after_bytes": 50, "stall_ms": 1500},)"
      R"( {"rate": 0.01, "kind": "status", "status": 500, "code": "InternalError"}]})";
  std::string answer;
  CURL* e = curl_easy_init();
  if (e == nullptr) return 0;
  curl_slist* h = curl_slist_append(nullptr, "Content-Type: application/json");
  curl_easy_setopt(e, CURLOPT_URL, (control + "/listeners").c_str());
  curl_easy_setopt(e, CURLOPT_POSTFIELDS, body.c_str());
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
  curl_easy_setopt(
      e, CURLOPT_WRITEFUNCTION, +[](char* p, size_t s, size_t n, void* u) {
        static_cast<std::string*>(u)->append(p, s * n);
        return s * n;
      });
  curl_easy_setopt(e, CURLOPT_WRITEDATA, &answer);
  const CURLcode rc = curl_easy_perform(e);
  curl_slist_free_all(h);
  curl_easy_cleanup(e);
  if (rc != CURLE_OK) return 0;
  const auto json = nlohmann::json::parse(answer, nullptr, false);
  return json.is_object() && json.contains("port") ? json["port"].get<int>()
                                                   : 0;
}

void CloseListener(const std::string& control, int port) {
  CURL* e = curl_easy_init();
  if (e == nullptr) return;
  curl_easy_setopt(e, CURLOPT_URL,
                   (control + "/listeners/" + std::to_string(port)).c_str());
  curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "DELETE");
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &Discard);
  curl_easy_perform(e);
  curl_easy_cleanup(e);
}

struct Totals {
  std::atomic<uint64_t> streams{0};
  std::atomic<uint64_t> drained{0};
  std::atomic<uint64_t> cancelled{0};
  std::atomic<uint64_t> dropped{0};
  std::atomic<uint64_t> failed{0};  // a fault outlasted the retries
  std::atomic<uint64_t> results{0};
  std::atomic<uint64_t> bytes{0};
  std::atomic<uint64_t> wrong{0};  // results whose bytes were not the object's
  std::atomic<uint64_t> unexpected{0};  // errors no fault explains
};

// One thread: streams over its clones until `until`.
void Worker(int id, const std::vector<Reader>& readers,
            const std::vector<uint64_t>& sizes,
            std::chrono::steady_clock::time_point until, Totals* t,
            std::string* first_unexpected, std::atomic<bool>* noted) {
  std::mt19937_64 rng(0x50a6 + static_cast<uint64_t>(id));
  std::vector<std::byte> want(kMaxRangeBytes);
  std::vector<Reader> mine;
  mine.reserve(readers.size());
  for (const Reader& r : readers) mine.push_back(r.Clone());
  while (std::chrono::steady_clock::now() < until) {
    const size_t k = rng() % mine.size();
    const uint64_t size = sizes[k];
    std::vector<ByteRange> ranges(1 + rng() % kMaxRanges);
    for (ByteRange& r : ranges) {
      r.length = 1 + rng() % kMaxRangeBytes;
      r.offset = rng() % (size - r.length + 1);
    }
    const Delivery delivery =
        rng() % 2 == 0 ? Delivery::kOrdered : Delivery::kAsCompleted;
    const uint64_t action = rng() % 10;  // 0: cancel, 1: drop, else drain
    const size_t stop_after = rng() % ranges.size();
    auto stream = mine[k].ReadRanges(ranges, delivery);
    ++t->streams;
    if (!stream.ok()) {
      ++t->unexpected;
      continue;
    }
    std::vector<Slice> held;
    size_t got = 0;
    bool ended = false;
    while (!ended) {
      if (action < 2 && got == stop_after) break;
      auto next = stream->Next();
      if (!next.ok()) {
        const Status& st = next.status();
        // An injected fault that every attempt met; anything else (a
        // stall error, a wrong-range error) is the library's fault.
        const bool fault = st.code() == StatusCode::kIoError &&
                           st.message().find("attempt") != std::string::npos;
        ++(fault ? t->failed : t->unexpected);
        if (!fault && !noted->exchange(true)) *first_unexpected = st.ToString();
        ended = true;
        break;
      }
      if (!*next) {
        ended = true;
        break;
      }
      const ByteRange r = ranges[(*next)->index];
      FillSimulatedBytes(r.offset, {want.data(), r.length});
      if ((*next)->bytes.size() != r.length ||
          std::memcmp((*next)->bytes.data(), want.data(), r.length) != 0) {
        ++t->wrong;
      }
      ++t->results;
      t->bytes += r.length;
      ++got;
      if (action == 1 && held.size() < 4) held.push_back((*next)->bytes);
    }
    if (ended) {
      ++t->drained;
    } else if (action == 0) {
      stream->Cancel();
      ++t->cancelled;
    } else {
      ++t->dropped;  // the stream goes with the slices still held
    }
  }
}

// The process's resources when the run starts.
struct Start {
  std::map<int, std::string> fd_map;
  int fds = 0;
  uint64_t rss = 0;
  uint64_t heap = 0;
};

Start TakeStart() {
  Start st;
  st.fd_map = OpenFdMap();
  st.fds = static_cast<int>(st.fd_map.size());
  st.rss = StatusBytes("VmRSS:");
  st.heap = HeapInUse();
  return st;
}

// The local object: kLocalBytes of the store's content at `path`.
Status WriteLocalFile(const std::string& path) {
  std::vector<std::byte> bytes(kLocalBytes);
  FillSimulatedBytes(0, bytes);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  if (!out) return Status::IoError("bench soak: cannot write '" + path + "'");
  return Status::OK();
}

// The objects the workers read, each a Reader on the shared limiter, with
// its size and name, and the fault listeners made for them.
struct Objects {
  std::vector<Reader> readers;
  std::vector<uint64_t> sizes;
  std::vector<std::string> names;
  std::vector<int> listeners;
};

// The HTTP sources' options: pattern.bin's size, and stall timeouts short
// enough that stalls are retried within a soak, far above loopback latency.
HttpOptions SoakHttpOptions() {
  HttpOptions ho;
  ho.stall_timeout = std::chrono::milliseconds(500);
  ho.first_byte_timeout = std::chrono::milliseconds(2000);
  ho.retry_base_backoff = std::chrono::milliseconds(5);
  ho.retry_max_backoff = std::chrono::milliseconds(100);
  ho.max_attempts = 6;
  ho.size_hint = kPatternBytes;
  return ho;
}

// A fault listener in front of `upstream` (a URL), made through the fault
// proxy's `control` with `seed`, added to `objects`; its base URL.
Result<std::string> AddListener(const std::string& control,
                                const std::string& upstream, uint64_t seed,
                                Objects* objects) {
  const int port = MakeFaultyListener(
      control, upstream.substr(upstream.find("://") + 3), seed);
  if (port == 0) return Status::IoError("bench soak: no fault listener");
  objects->listeners.push_back(port);
  return "http://127.0.0.1:" + std::to_string(port);
}

// The objects: the local file, then, when the test servers run, nginx's
// and s3rver's pattern.bin through fault listeners.
Status OpenObjects(const std::string& path, const Options& o,
                   const std::shared_ptr<Limiter>& limiter,
                   const std::string& control, Objects* objects) {
  RANGEIO_ASSIGN_OR_RETURN(Reader local, Reader::OpenUrl(path, o, {}, limiter));
  objects->readers.push_back(std::move(local));
  objects->sizes.push_back(kLocalBytes);
  objects->names.push_back("local");
  const std::string nginx = Env("RANGEIO_TEST_NGINX");
  const std::string s3 = Env("RANGEIO_TEST_S3_ENDPOINT");
  if (!control.empty() && !nginx.empty()) {
    RANGEIO_ASSIGN_OR_RETURN(const std::string base,
                             AddListener(control, nginx, 1, objects));
    RANGEIO_ASSIGN_OR_RETURN(
        auto src, OpenHttpSource(base + "/pattern.bin", SoakHttpOptions()));
    RANGEIO_ASSIGN_OR_RETURN(Reader r, Reader::Open(src, o, limiter));
    objects->readers.push_back(std::move(r));
    objects->sizes.push_back(kPatternBytes);
    objects->names.push_back("nginx");
  }
  if (!control.empty() && !s3.empty()) {
    S3Options so;
    RANGEIO_ASSIGN_OR_RETURN(so.endpoint, AddListener(control, s3, 2, objects));
    so.addressing = S3Addressing::kPath;
    so.region = "us-east-1";
    so.access_key_id = "S3RVER";  // s3rver's fixed test credentials
    so.secret_access_key = "S3RVER";
    const std::string bucket = Env("RANGEIO_TEST_S3_BUCKET");
    RANGEIO_ASSIGN_OR_RETURN(
        auto src,
        OpenS3Source("s3://" + bucket + "/pattern.bin", so, SoakHttpOptions()));
    RANGEIO_ASSIGN_OR_RETURN(Reader r, Reader::Open(src, o, limiter));
    objects->readers.push_back(std::move(r));
    objects->sizes.push_back(kPatternBytes);
    objects->names.push_back("s3rver");
  }
  return Status::OK();
}

// kThreads workers on the objects and the FAISS loop (bench_soak_faiss.h)
// for `seconds`; returns the time they took, in ms, to all return.
double RunWorkers(int seconds, const Objects& objects, Totals* t,
                  std::string* first_unexpected, FaissSoakTotals* faiss,
                  const std::string& dir) {
  std::atomic<bool> noted{false};
  const auto t0 = std::chrono::steady_clock::now();
  const auto until = t0 + std::chrono::seconds(seconds);
  std::vector<std::thread> threads;
  threads.reserve(kThreads + 1);
  threads.emplace_back(RunFaissSoak, dir, until, faiss);
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back(Worker, i, std::cref(objects.readers),
                         std::cref(objects.sizes), until, t, first_unexpected,
                         &noted);
  }
  for (std::thread& th : threads) th.join();
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now() - t0)
      .count();
}

// The limiter's stats once what is still in flight (cancelled transfers,
// dropped streams' reads) has come back, or after 10 s.
Stats AwaitIdle(const Limiter& limiter) {
  Stats s = limiter.GetStats();
  for (int i = 0; i < 100 && (s.in_flight != 0 || s.retained_count != 0); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    s = limiter.GetStats();
  }
  return s;
}

// The open file descriptors once at most `fds_start` are left, or after
// 5 s: the HTTP engine's thread stops (closing its connections) once the
// last source is gone.
int AwaitFds(int fds_start) {
  int fds_end = OpenFds();
  for (int i = 0; i < 50 && fds_end > fds_start; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    fds_end = OpenFds();
  }
  return fds_end;
}

// The process's resources at the end, with every source gone.
struct End {
  Stats limiter;  // once idle (AwaitIdle)
  int fds = 0;
  uint64_t rss_peak = 0;
  uint64_t rss = 0;
  uint64_t heap = 0;
  uint64_t rss_bound = 0;  // the most rss_peak may be
};

nlohmann::json SoakConfig(int seconds,
                          const std::vector<std::string>& objects) {
  std::string names;
  for (const std::string& n : objects) names += (names.empty() ? "" : ",") + n;
  return {{"seconds", seconds},       {"threads", kThreads},
          {"objects", names},         {"io_concurrency", 64},
          {"budget_count", 128},      {"budget_bytes", 64 << 20},
          {"max_ranges", kMaxRanges}, {"max_range_bytes", kMaxRangeBytes}};
}

// The one row: what the streams did, and the resources at start and end.
Row SoakRow(double elapsed_ms, const Totals& t, const FaissSoakTotals& f,
            const Start& start, const End& end) {
  const Stats& s = end.limiter;
  Row row{"soak",
          {elapsed_ms},
          t.results.load(),
          s.peak_in_flight,
          s.peak_retained_count,
          "",
          {}};
  auto mib = [](uint64_t bytes) {
    return static_cast<double>(bytes) / (1 << 20);
  };
  row.extra = {{"streams", t.streams.load()},
               {"drained", t.drained.load()},
               {"cancelled", t.cancelled.load()},
               {"dropped", t.dropped.load()},
               {"failed_after_retries", t.failed.load()},
               {"unexpected_errors", t.unexpected.load()},
               {"wrong_results", t.wrong.load()},
               {"mib", mib(t.bytes.load())},
               {"end_in_flight", s.in_flight},
               {"end_retained", s.retained_count},
               {"fds_start", start.fds},
               {"fds_end", end.fds},
               {"rss_start_mib", mib(start.rss)},
               {"rss_end_mib", mib(end.rss)},
               {"rss_peak_mib", mib(end.rss_peak)},
               {"rss_bound_mib", mib(end.rss_bound)},
               {"heap_start_mib", mib(start.heap)},
               {"heap_end_mib", mib(end.heap)},
               {"faiss_rounds", f.rounds.load()},
               {"faiss_mismatches", f.mismatches.load()},
               {"faiss_errors", f.errors.load()}};
  return row;
}

// The verdicts: nothing lost, nothing leaked (the fds listed are those open
// now that were not at the start), nothing left in flight.
void AddVerdicts(const Totals& t, const std::string& first_unexpected,
                 const FaissSoakTotals& f, const Start& start, const End& end,
                 size_t objects, Report* rep) {
  const Stats& s = end.limiter;
  rep->AddVerdict(t.wrong == 0, "zero wrong bytes");
  rep->AddVerdict(
      t.unexpected == 0,
      "no error but a fault that outlasted its retries" +
          (first_unexpected.empty() ? ""
                                    : " (first: " + first_unexpected + ")"));
  rep->AddVerdict(s.in_flight == 0 && s.retained_count == 0,
                  "the limiter ends with 0 in flight and 0 retained");
  const std::string new_fds = NewFds(start.fd_map, OpenFdMap());
  rep->AddVerdict(end.fds <= start.fds,
                  "file descriptors back to their count at the start (" +
                      std::to_string(start.fds) + ")" +
                      (new_fds.empty() ? "" : "; new: " + new_fds));
  rep->AddVerdict(end.rss_peak <= end.rss_bound,
                  "peak RSS within start + 3 x budget + 64 MiB");
  if (FaissSoakAvailable()) {
    rep->AddVerdict(
        f.rounds > 0 && f.mismatches == 0 && f.errors == 0,
        "FAISS reconstruct_n and search through rangeio equal FAISS in "
        "memory, and its limiter ends empty" +
            (f.first_error.empty() ? "" : " (first: " + f.first_error + ")"));
  } else {
    rep->AddSkipped("FAISS reconstruct_n", "built without libfaiss-dev");
  }
  if (objects == 1) {
    rep->AddSkipped("nginx and s3rver",
                    "no test servers (tests/servers/run_servers.sh start)");
  }
}

}  // namespace

Result<Report> RunSoak(const BenchOptions& options) {
  const int seconds = options.soak_seconds;
  const Start start = TakeStart();
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = tmp != nullptr ? tmp : "/tmp";
  const std::string path = dir + "/rangeio-soak.bin";
  RANGEIO_RETURN_NOT_OK(WriteLocalFile(path));

  Options o;  // the defaults: C = 64, 128 responses, 64 MiB
  RANGEIO_ASSIGN_OR_RETURN(std::shared_ptr<Limiter> limiter, Limiter::Make(o));
  const std::string control = Env("RANGEIO_TEST_PROXY_CONTROL");
  Objects objects;  // none may outlive the check below
  RANGEIO_RETURN_NOT_OK(OpenObjects(path, o, limiter, control, &objects));

  Totals t;
  FaissSoakTotals faiss;
  std::string first_unexpected;
  const double elapsed_ms =
      RunWorkers(seconds, objects, &t, &first_unexpected, &faiss, dir);
  // Every stream is gone: what is still in flight must come back.
  End end;
  end.limiter = AwaitIdle(*limiter);
  objects.readers.clear();
  limiter.reset();
  for (int port : objects.listeners) CloseListener(control, port);
  std::remove(path.c_str());
  end.fds = AwaitFds(start.fds);
  end.rss_peak = StatusBytes("VmHWM:");
  end.rss = StatusBytes("VmRSS:");
  end.heap = HeapInUse();
  end.rss_bound = start.rss + 3 * LimiterOptions::kDefaultResponseBudgetBytes +
                  kRssSlackBytes;

  Report rep;
  rep.scenario = "soak";
  rep.config = SoakConfig(seconds, objects.names);
  rep.rows.push_back(SoakRow(elapsed_ms, t, faiss, start, end));
  AddVerdicts(t, first_unexpected, faiss, start, end, objects.names.size(),
              &rep);
  return rep;
}

}  // namespace rangeio::bench
