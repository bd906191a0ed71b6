// hot-cache — scheduling overhead (docs/benchmarks.md): 51,200 non-coalescing
// 4 KiB ranges at C = 64 from memory and from a file in the page cache
// (through the pread pool and through io_uring), against bare memcpy and
// bare pread loops over the same ranges.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench_scenarios.h"
#include "progress.h"
#include "rangeio/rangeio.h"

namespace rangeio::bench {
namespace {

constexpr uint64_t kRanges = 51'200;
constexpr uint64_t kRangeBytes = 4096;
constexpr uint64_t kStride = 2 * kRangeBytes;  // 4 KiB holes: no coalescing
constexpr uint64_t kDataBytes = kRanges * kStride;  // 400 MiB
constexpr uint32_t kConcurrency = 64;
constexpr size_t kPageBytes = 4096;

using Clock = std::chrono::steady_clock;
double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// What every strategy's consumer does with a result: takes it and lets it go
// without reading its bytes, except the first byte of every 1,024th range,
// which it checks against the store's content (so the rate is the rate of
// handing ranges out, and a wrong byte still fails the run).
struct Verifier {
  uint64_t checked = 0;
  uint64_t wrong = 0;
  void Check(size_t i, const ByteRange& r, const std::byte* p) {
    if (i % 1024 != 0) return;
    ++checked;
    if (p[0] != SimulatedByteAt(r.offset)) ++wrong;
  }
  Status Summary(const std::string& strategy, uint64_t ranges) const {
    if (wrong == 0 && checked == (ranges + 1023) / 1024) return Status::OK();
    return Status::Internal("hot-cache " + strategy + ": " +
                            std::to_string(wrong) + " wrong bytes in " +
                            std::to_string(checked) + " checked ranges");
  }
};

// Copies each range into one of `buffers` reused destination buffers. With
// 2C buffers it does the work of the library's copying path (a distinct
// buffer per retained response, up to the response budget); with one buffer
// the destination stays in L1 and only the copy itself is left.
double BareMemcpy(const std::byte* data, const std::vector<ByteRange>& ranges,
                  size_t buffers, Verifier* v) {
  std::vector<std::byte> dst(buffers * kRangeBytes);
  const auto t0 = Clock::now();
  for (size_t i = 0; i < ranges.size(); ++i) {
    std::byte* out = dst.data() + (i % buffers) * kRangeBytes;
    std::memcpy(out, data + ranges[i].offset, ranges[i].length);
    asm volatile("" : : "r"(out) : "memory");  // keep every copy
    v->Check(i, ranges[i], out);
  }
  return MsSince(t0);
}

// `threads` pread loops, each over an equal share of the ranges.
Result<double> BarePread(const std::string& path,
                         const std::vector<ByteRange>& ranges, unsigned threads,
                         Verifier* v) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, "opening '" + path + "'");
  std::vector<Verifier> per_thread(threads);
  std::atomic<bool> failed{false};
  const auto t0 = Clock::now();
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::vector<std::byte> dst(kRangeBytes);
      for (size_t i = t; i < ranges.size(); i += threads) {
        if (::pread(fd, dst.data(), ranges[i].length,
                    static_cast<off_t>(ranges[i].offset)) !=
            static_cast<ssize_t>(ranges[i].length)) {
          failed = true;
          return;
        }
        per_thread[t].Check(i, ranges[i], dst.data());
      }
    });
  }
  for (std::thread& t : pool) t.join();
  const double ms = MsSince(t0);
  ::close(fd);
  if (failed)
    return Status::IoError("bare pread of '" + path + "' failed or was short");
  for (const Verifier& p : per_thread) {
    v->checked += p.checked;
    v->wrong += p.wrong;
  }
  return ms;
}

Result<double> ThroughRangeio(std::shared_ptr<Source> source,
                              const std::vector<ByteRange>& ranges, Verifier* v,
                              Stats* limiter_stats) {
  Options o;
  o.limiter.io_concurrency = kConcurrency;
  // The scenario measures scheduling: each range is its own read.
  o.reader.planner = PlannerOptions::None();
  RANGEIO_ASSIGN_OR_RETURN(Reader reader, Reader::Open(std::move(source), o));
  uint64_t n = 0;
  const auto t0 = Clock::now();
  RANGEIO_ASSIGN_OR_RETURN(RangeStream stream,
                           reader.ReadRanges(ranges, Delivery::kAsCompleted));
  for (;;) {
    RANGEIO_ASSIGN_OR_RETURN(std::optional<RangeResult> r, stream.Next());
    if (!r) break;
    if (r->bytes.size() != ranges[r->index].length) {
      return Status::Internal(
          "hot-cache: a range came back with the wrong size");
    }
    v->Check(r->index, ranges[r->index], r->bytes.data());
    ++n;
    Progress::Get().AddReads(1);
  }
  const double ms = MsSince(t0);
  if (n != ranges.size()) return Status::Internal("hot-cache: short stream");
  *limiter_stats = reader.limiter()->GetStats();
  return ms;
}

// Writes the test file unless it already holds exactly the expected bytes'
// size, then reads it once so that it sits in the page cache.
Status PrepareFile(const std::string& path, const std::byte* data) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 ||
      static_cast<uint64_t>(st.st_size) != kDataBytes) {
    const std::string tmp = path + ".tmp";
    const int fd =
        ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return Status::FromErrno(errno, "creating '" + tmp + "'");
    for (uint64_t off = 0; off < kDataBytes;) {
      const ssize_t n = ::pwrite(fd, data + off,
                                 std::min<uint64_t>(kDataBytes - off, 8 << 20),
                                 static_cast<off_t>(off));
      if (n <= 0) {
        const int err = errno;
        ::close(fd);
        return Status::FromErrno(err, "writing '" + tmp + "'");
      }
      off += static_cast<uint64_t>(n);
    }
    ::close(fd);
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
      return Status::FromErrno(errno, "renaming '" + tmp + "'");
    }
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, "opening '" + path + "'");
  std::vector<std::byte> buf(8 << 20);
  for (uint64_t off = 0; off < kDataBytes;) {
    const ssize_t n =
        ::pread(fd, buf.data(), buf.size(), static_cast<off_t>(off));
    if (n <= 0) break;
    off += static_cast<uint64_t>(n);
  }
  ::close(fd);
  return Status::OK();
}

std::string DefaultFile() {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir && *dir ? dir : "/tmp") + "/rangeio-hot-cache.bin";
}

// kRanges ranges of kRangeBytes, kStride apart, in random order.
std::vector<ByteRange> ShuffledRanges() {
  std::vector<ByteRange> ranges;
  ranges.reserve(kRanges);
  for (uint64_t i = 0; i < kRanges; ++i)
    ranges.push_back({i * kStride, kRangeBytes});
  std::shuffle(ranges.begin(), ranges.end(),
               std::mt19937_64(7));  // random access
  return ranges;
}

// The store's kDataBytes in memory, page-aligned like a file mapping or a
// buffer pool's pages: with the 16-byte offset of a plain shared
// allocation every 4 KiB range would straddle two pages (two TLB misses per
// range for every strategy).
Result<Slice> AlignedData() {
  auto* data =
      static_cast<std::byte*>(std::aligned_alloc(kPageBytes, kDataBytes));
  if (data == nullptr)
    return Status::ResourceExhausted("hot-cache: cannot allocate 400 MiB");
  Slice buffer(
      std::shared_ptr<const void>(
          data, [](const void* p) { std::free(const_cast<void*>(p)); }),
      data, kDataBytes);
  FillSimulatedBytes(0, {data, kDataBytes});
  return buffer;
}

unsigned PreadThreads() {
  return std::max(1u, std::thread::hardware_concurrency());
}

nlohmann::json HotCacheConfig(const std::string& path, int rounds) {
  return {{"ranges", kRanges},
          {"range_bytes", kRangeBytes},
          {"io_concurrency", kConcurrency},
          {"data_bytes", kDataBytes},
          {"file", path},
          {"pread_threads", PreadThreads()},
          {"rounds", rounds},
          {"memcpy_buffers", 2 * kConcurrency},
          {"consumer",
           "releases each range unread; checks the first byte of every "
           "1024th"}};
}

// The bare baselines first, then the rows through a Reader (from
// kFirstReaderRow). pread-one-thread: the bare loop on one thread, as the
// page-cache row's one consumer reads, shown so that each run says how far
// the baseline's threads scaled.
constexpr const char* kNames[] = {
    "memcpy",      "memcpy-one-buffer", "pread",      "pread-one-thread",
    "memory-copy", "memory-zero-copy",  "page-cache", "page-cache-uring"};
constexpr size_t kFirstReaderRow = 4;

// What every strategy reads: the same ranges of the same bytes, in memory
// and in the file.
struct Inputs {
  std::vector<ByteRange> ranges;
  Slice buffer;
  std::string path;
};

// One run of strategy `k` (kNames[k]): its time in ms; the limiter's stats
// into `st` for the rows through a Reader.
Result<double> RunStrategy(size_t k, const Inputs& in, Verifier* v, Stats* st) {
  switch (k) {
    case 0:
      return BareMemcpy(in.buffer.data(), in.ranges, 2 * kConcurrency, v);
    case 1:
      return BareMemcpy(in.buffer.data(), in.ranges, 1, v);
    case 2:
      return BarePread(in.path, in.ranges, PreadThreads(), v);
    case 3:
      return BarePread(in.path, in.ranges, 1, v);
    case 4:
      return ThroughRangeio(MakeMemorySource("memory", in.buffer, false),
                            in.ranges, v, st);
    case 5:
      return ThroughRangeio(MakeMemorySource("memory", in.buffer, true),
                            in.ranges, v, st);
    case 6:
    case 7: {
      // page-cache: the pread pool, each cached read done inline by the
      // consumer's thread. page-cache-uring: io_uring with no inline
      // attempt, so the ring thread does the copies while the consumer's
      // thread runs the stream.
      LocalFileOptions lo;
      lo.threads = kConcurrency;
      lo.engine = k == 6 ? LocalEngine::kPread : LocalEngine::kUring;
      lo.try_inline = k == 6;
      RANGEIO_ASSIGN_OR_RETURN(std::shared_ptr<Source> file,
                               OpenLocalFile(in.path, lo));
      return ThroughRangeio(std::move(file), in.ranges, v, st);
    }
  }
  return 0.0;
}

// The rounds: every strategy once per round, in rotating order, its time
// into its row (and the limiter's peaks, for the rows through a Reader).
// An error for a run that failed or handed out a wrong byte.
Status RunRounds(int rounds, const Inputs& in, Report* rep) {
  Status failure;
  Rounds(rounds, std::size(kNames), [&](size_t k) {
    if (!failure.ok()) return;
    Verifier v;
    Stats st;
    Result<double> ms = RunStrategy(k, in, &v, &st);
    if (!ms.ok()) {
      failure = ms.status();
      return;
    }
    failure = v.Summary(kNames[k], kRanges);
    rep->rows[k].elapsed_ms_runs.push_back(*ms);
    if (k >= kFirstReaderRow) {
      rep->rows[k].peak_inflight = st.peak_in_flight;
      rep->rows[k].peak_retained = st.peak_retained_count;
    }
  });
  return failure;
}

// The targets: the library's rates against the bare loops'.
void AddVerdicts(Report* rep) {
  auto rate = [&](const char* s) { return rep->Find(s)->ranges_per_s(); };
  char buf[200];
  std::snprintf(buf, sizeof buf, "memory-copy / memcpy = %.2f (target >= 0.8)",
                rate("memory-copy") / rate("memcpy"));
  rep->AddVerdict(rate("memory-copy") / rate("memcpy") >= 0.8, buf);
  std::snprintf(buf, sizeof buf,
                "memory-zero-copy / memcpy = %.2f (target >= 3)",
                rate("memory-zero-copy") / rate("memcpy"));
  rep->AddVerdict(rate("memory-zero-copy") / rate("memcpy") >= 3, buf);
  std::snprintf(buf, sizeof buf,
                "page-cache / pread on all cores = %.2f (target >= 0.8)",
                rate("page-cache") / rate("pread"));
  rep->AddVerdict(rate("page-cache") / rate("pread") >= 0.8, buf);
}

}  // namespace

Result<Report> RunHotCache(const BenchOptions& options) {
  Inputs in;
  in.ranges = ShuffledRanges();
  RANGEIO_ASSIGN_OR_RETURN(in.buffer, AlignedData());
  in.path = options.file.empty() ? DefaultFile() : options.file;
  RANGEIO_RETURN_NOT_OK(PrepareFile(in.path, in.buffer.data()));

  Report rep;
  rep.scenario = "hot-cache";
  rep.config = HotCacheConfig(in.path, options.rounds);
  for (const char* n : kNames)
    rep.rows.push_back({n, {}, kRanges, {}, {}, {}, {}});
  RANGEIO_RETURN_NOT_OK(RunRounds(options.rounds, in, &rep));
  rep.baseline = "memcpy";
  AddVerdicts(&rep);
  return rep;
}

}  // namespace rangeio::bench
