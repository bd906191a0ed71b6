// local — a real disk (docs/benchmarks.md): random 4 KiB and 1 MiB reads at
// C = 64 from a 2 GiB file, through the pread pool and io_uring, buffered
// (cold: the file's pages dropped first) and O_DIRECT, next to fio on the
// same file with the same block size, depth and engine.
//
// Each row reads random block-aligned offsets through a Reader with
// as-completed delivery for kRowSeconds. A buffered row reads every block
// at most once (so that it never hits pages it read itself) and ends early
// if it runs out; an O_DIRECT row goes round the blocks again, as fio's
// time-based run does, so that both run the full kRowSeconds and spread
// their start-up (fresh buffers, registered memory) over as many reads. CPU is
// getrusage(RUSAGE_SELF) over the row (every thread of the process, the
// kernel's io_uring workers included); fio's is its own usr + sys.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
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

// Larger than 1 GiB, so that the page cache cannot hold the cold rows' data,
// and large enough that a 1 MiB row of 3 s does not run out of blocks on a
// disk of a few GiB/s.
constexpr uint64_t kFileBytes = uint64_t{2} << 30;
constexpr uint32_t kConcurrency = 64;  // docs/benchmarks.md: C = 64
// Per row: 10 rows of 3 s keep the whole run (with cache drops and fio's
// start-up) near a minute, while 3 s of 4 KiB reads is hundreds of thousands
// of reads: percentiles and rates settle well before that.
constexpr int kRowSeconds = 3;
constexpr uint64_t kBlockSizes[] = {4096, uint64_t{1} << 20};
constexpr uint64_t kChunk = 8 << 20;  // file creation: bytes per pwrite

struct Strategy {
  const char* name;
  LocalEngine engine;
  bool direct;
};
constexpr Strategy kStrategies[] = {
    {"pread", LocalEngine::kPread, false},
    {"pread-direct", LocalEngine::kPread, true},
    {"uring", LocalEngine::kUring, false},
    {"uring-direct", LocalEngine::kUring, true},
};

using Clock = std::chrono::steady_clock;

double CpuSeconds() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  auto sec = [](const timeval& tv) {
    return static_cast<double>(tv.tv_sec) +
           static_cast<double>(tv.tv_usec) / 1e6;
  };
  return sec(ru.ru_utime) + sec(ru.ru_stime);
}

std::string DefaultFile() {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir && *dir ? dir : "/tmp") + "/rangeio-local.bin";
}

// Writes the simulated store's bytes to `path` unless it already has
// exactly kFileBytes, and syncs them so that the cache can be dropped.
Status PrepareFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 &&
      static_cast<uint64_t>(st.st_size) == kFileBytes) {
    return Status::OK();
  }
  std::fprintf(stderr, "bench local: writing %llu MiB to %s (once)\n",
               static_cast<unsigned long long>(kFileBytes >> 20), path.c_str());
  const std::string tmp = path + ".tmp";
  const int fd =
      ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::FromErrno(errno, "creating '" + tmp + "'");
  std::vector<std::byte> buf(kChunk);
  for (uint64_t off = 0; off < kFileBytes; off += kChunk) {
    FillSimulatedBytes(off, buf);
    for (uint64_t done = 0; done < kChunk;) {
      const ssize_t n = ::pwrite(fd, buf.data() + done, kChunk - done,
                                 static_cast<off_t>(off + done));
      if (n <= 0) {
        const int err = errno;
        ::close(fd);
        return Status::FromErrno(err, "writing '" + tmp + "'");
      }
      done += static_cast<uint64_t>(n);
    }
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::FromErrno(err, "syncing '" + tmp + "'");
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    return Status::FromErrno(errno, "renaming '" + tmp + "'");
  }
  return Status::OK();
}

// Drops the file's pages from the page cache; returns the fraction of its
// pages still resident afterwards (mincore), so a warm "cold" row shows.
Result<double> DropCache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, "opening '" + path + "'");
  (void)::fdatasync(fd);
  const int err = ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  if (err != 0) {
    ::close(fd);
    return Status::FromErrno(err, "posix_fadvise(DONTNEED) '" + path + "'");
  }
  void* map = ::mmap(nullptr, kFileBytes, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return 0.0;  // unknown; not worth failing for
  const long page = ::sysconf(_SC_PAGESIZE);
  std::vector<unsigned char> resident(kFileBytes / page);
  double fraction = 0;
  if (::mincore(map, kFileBytes, resident.data()) == 0) {
    fraction = static_cast<double>(std::count_if(
                   resident.begin(), resident.end(),
                   [](unsigned char c) { return (c & 1) != 0; })) /
               static_cast<double>(resident.size());
  }
  ::munmap(map, kFileBytes);
  return fraction;
}

// Every block of the file once, in random order.
std::vector<ByteRange> RandomBlocks(uint64_t block_size) {
  std::vector<ByteRange> ranges;
  ranges.reserve(kFileBytes / block_size);
  for (uint64_t off = 0; off < kFileBytes; off += block_size) {
    ranges.push_back({off, block_size});
  }
  std::shuffle(ranges.begin(), ranges.end(), std::mt19937_64(42));
  return ranges;
}

// One row through rangeio: reads `ranges` as completed until kRowSeconds
// have passed (or every range is read), then cancels the rest.
Result<IoRow> RunOurs(const std::string& path, const Strategy& s,
                      uint64_t block_size,
                      const std::vector<ByteRange>& ranges) {
  IoRow row;
  row.strategy = s.name;
  row.block_size = block_size;
  double resident = 0;
  if (!s.direct) {
    RANGEIO_ASSIGN_OR_RETURN(resident, DropCache(path));
  }
  LocalFileOptions lo;
  lo.threads = kConcurrency;
  lo.engine = s.engine;
  lo.direct = s.direct;
  RANGEIO_ASSIGN_OR_RETURN(std::shared_ptr<Source> source,
                           OpenLocalFile(path, lo));
  Options o;
  o.io_concurrency = kConcurrency;
  // Like fio, each read is one block: the local preset would merge adjacent
  // random blocks into larger reads.
  o.planner = PlannerOptions::None();
  // 2C responses of the row's block size: the budget never holds back
  // the 64 reads in flight.
  o.response_budget_count = 2 * kConcurrency;
  o.response_budget_bytes = uint64_t{2} * kConcurrency * block_size;
  std::shared_ptr<Limiter> limiter;
  uint64_t wrong = 0;
  {
    RANGEIO_ASSIGN_OR_RETURN(Reader reader, Reader::Open(source, o));
    limiter = reader.limiter();
    const double cpu0 = CpuSeconds();
    const auto t0 = Clock::now();
    const auto deadline = t0 + std::chrono::seconds(kRowSeconds);
    std::vector<ByteRange> laps;
    if (s.direct) {
      // Laps for the row's time at 6 GiB/s (beyond any disk of this kind), at
      // most 2^20 ranges (16 MiB of list, copied by ReadRanges inside the
      // timed row): 4 KiB rows keep their single lap of 524,288 blocks.
      const uint64_t want = std::min<uint64_t>(
          (uint64_t{6} << 30) * kRowSeconds / block_size, uint64_t{1} << 20);
      laps.reserve(std::max<uint64_t>(want, ranges.size()));
      while (laps.size() < want) {
        laps.insert(laps.end(), ranges.begin(), ranges.end());
      }
    }
    const std::vector<ByteRange>& row_ranges = s.direct ? laps : ranges;
    RANGEIO_ASSIGN_OR_RETURN(
        RangeStream stream,
        reader.ReadRanges(row_ranges, Delivery::kAsCompleted));
    for (;;) {
      RANGEIO_ASSIGN_OR_RETURN(std::optional<RangeResult> r, stream.Next());
      if (!r) break;
      Progress::Get().AddReads(1);
      const ByteRange& want = row_ranges[r->index];
      const Slice& got = r->bytes;
      if (got.size() != want.length ||
          got.data()[0] != SimulatedByteAt(want.offset) ||
          got.data()[want.length - 1] != SimulatedByteAt(want.end() - 1)) {
        ++wrong;
      }
      ++row.reads;
      if (Clock::now() >= deadline) break;
    }
    row.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    row.cpu_seconds = CpuSeconds() - cpu0;
  }  // the stream is cancelled; its reads in flight finish on their own
  while (limiter->GetStats().in_flight != 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  row.note = source->Describe();
  if (wrong != 0) {
    return Status::Internal("bench local " + row.strategy + ": " +
                            std::to_string(wrong) + " reads had wrong bytes");
  }
  const Stats st = limiter->GetStats();
  row.p50_us = static_cast<double>(st.read_latency.Percentile(0.50)) / 1e3;
  row.p99_us = static_cast<double>(st.read_latency.Percentile(0.99)) / 1e3;
  if (st.peak_in_flight > kConcurrency) {
    return Status::Internal("bench local " + row.strategy +
                            ": peak in-flight " +
                            std::to_string(st.peak_in_flight));
  }
  if (resident > 0.01) {
    char buf[64];
    std::snprintf(buf, sizeof buf, " [%.0f%% of the file cached at start]",
                  resident * 100);
    row.note += buf;
  }
  return row;
}

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs `cmd` and returns its standard output; empty when it cannot run.
std::string Capture(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  ::pclose(p);
  return out;
}

// fio's version ("fio-3.33"), or empty when fio cannot be run.
std::string FioVersion() {
  std::string v = Capture("fio --version 2>/dev/null");
  while (!v.empty() && (v.back() == '\n' || v.back() == '\r')) v.pop_back();
  return v.rfind("fio-", 0) == 0 ? v : std::string();
}

// fio's io_uring O_DIRECT random reads at the same depth and block size.
Result<IoRow> RunFio(const std::string& path, uint64_t block_size) {
  const std::string cmd =
      "fio --name=rangeio-local --filename=" + ShellQuote(path) +
      " --readonly --ioengine=io_uring --direct=1 --rw=randread"
      " --iodepth=" +
      std::to_string(kConcurrency) + " --bs=" + std::to_string(block_size) +
      " --runtime=" + std::to_string(kRowSeconds) +
      " --time_based=1 --numjobs=1 --lat_percentiles=1"
      " --output-format=json 2>/dev/null";
  const std::string out = Capture(cmd);
  const size_t brace = out.find('{');
  const nlohmann::json j = nlohmann::json::parse(
      brace == std::string::npos ? std::string() : out.substr(brace), nullptr,
      false);
  if (j.is_discarded() || !j.contains("jobs") || j["jobs"].empty()) {
    return Status::IoError("bench local: fio printed no JSON report for: " +
                           cmd);
  }
  const nlohmann::json& job = j["jobs"][0];
  const nlohmann::json& rd = job["read"];
  const nlohmann::json& pct = rd["lat_ns"]["percentile"];
  IoRow row;
  row.strategy = "fio-uring-direct";
  row.block_size = block_size;
  row.reads = rd.value("total_ios", uint64_t{0});
  row.seconds = job.value("job_runtime", 0.0) / 1e3;
  row.p50_us = pct.value("50.000000", 0.0) / 1e3;
  row.p99_us = pct.value("99.000000", 0.0) / 1e3;
  row.cpu_seconds = (job.value("usr_cpu", 0.0) + job.value("sys_cpu", 0.0)) /
                    100 * row.seconds;
  row.note = "fio --ioengine=io_uring --direct=1 --iodepth=" +
             std::to_string(kConcurrency);
  if (job.value("error", 0) != 0 || row.reads == 0) {
    return Status::IoError("bench local: fio failed (error " +
                           std::to_string(job.value("error", 0)) +
                           ") running: " + cmd);
  }
  return row;
}

void AddTargets(Report* rep, bool have_fio) {
  struct Target {
    const char* what;
    uint64_t block_size;
    double (*value)(const IoRow&);
    bool higher_is_better;
    double bound;
  };
  const Target targets[] = {
      {"IOPS", 4096, [](const IoRow& r) { return r.iops(); }, true, 0.9},
      {"MiB/s", uint64_t{1} << 20, [](const IoRow& r) { return r.mib_per_s(); },
       true, 0.95},
      {"CPU per read", 4096, [](const IoRow& r) { return r.cpu_s_per_100k(); },
       false, 1.5},
      {"CPU per read", uint64_t{1} << 20,
       [](const IoRow& r) { return r.cpu_s_per_100k(); }, false, 1.5},
  };
  for (const Target& t : targets) {
    char what[160];
    std::snprintf(what, sizeof what, "uring-direct / fio-uring-direct %s at %s",
                  t.what, t.block_size == 4096 ? "4 KiB" : "1 MiB");
    const IoRow* ours = rep->FindIo("uring-direct", t.block_size);
    const IoRow* fio = rep->FindIo("fio-uring-direct", t.block_size);
    if (!have_fio || fio == nullptr || ours == nullptr) {
      rep->AddSkipped(what, "fio missing: not compared");
      continue;
    }
    const double ratio = t.value(*ours) / t.value(*fio);
    char line[220];
    std::snprintf(line, sizeof line, "%s = %.2f (target %s %.2f)", what, ratio,
                  t.higher_is_better ? ">=" : "<=", t.bound);
    rep->AddVerdict(t.higher_is_better ? ratio >= t.bound : ratio <= t.bound,
                    line);
  }
}

}  // namespace

Result<Report> RunLocal(const BenchOptions& options) {
  const std::string path =
      options.local_file.empty() ? DefaultFile() : options.local_file;
  RANGEIO_RETURN_NOT_OK(PrepareFile(path));
  const std::string fio = FioVersion();

  Report rep;
  rep.scenario = "local";
  rep.config = {
      {"file", path},
      {"file_bytes", kFileBytes},
      {"io_concurrency", kConcurrency},
      {"row_seconds", kRowSeconds},
      {"offsets",
       "random, block-aligned; buffered rows read each block at most once, "
       "O_DIRECT rows go round again until the row's time is up"},
      {"delivery", "as-completed"},
      {"buffered_rows", "cold: posix_fadvise(DONTNEED) first"},
      {"fio", fio.empty() ? "missing" : fio}};
  if (fio.empty()) {
    std::fprintf(stderr,
                 "bench local: fio not found on PATH: no fio rows "
                 "(install it: apt-get install fio)\n");
  }
  for (uint64_t bs : kBlockSizes) {
    const std::vector<ByteRange> ranges = RandomBlocks(bs);
    for (const Strategy& s : kStrategies) {
      Progress::Get().Phase("local: " + std::string(s.name) + " " +
                            std::to_string(bs >> 10) + " KiB");
      RANGEIO_ASSIGN_OR_RETURN(IoRow row, RunOurs(path, s, bs, ranges));
      rep.io_rows.push_back(std::move(row));
    }
    if (!fio.empty()) {
      Progress::Get().Phase("local: fio " + std::to_string(bs >> 10) + " KiB");
      RANGEIO_ASSIGN_OR_RETURN(IoRow row, RunFio(path, bs));
      Progress::Get().AddReads(row.reads);
      rep.io_rows.push_back(std::move(row));
    }
  }
  if (fio.empty()) rep.lines.push_back("  fio missing: not compared");
  AddTargets(&rep, !fio.empty());
  return rep;
}

}  // namespace rangeio::bench
