// local — a real disk (docs/benchmarks.md): random 4 KiB and 1 MiB reads at
// C = 64 from a 2 GiB file, through the pread pool and io_uring, buffered
// (cold: the file's pages dropped first) and O_DIRECT, next to fio on the
// same file with the same block size, depth and engine.
//
// The comparison that the targets judge, uring-direct against fio, runs as
// interleaved pairs (an even number, at least 4, the first of each pair
// alternating), so that both sides of a ratio see the same machine: the
// verdicts take the median of the per-pair ratios, the spread is printed,
// and a pair whose fio figure is more than kFioDrift off the fio median is
// flagged. The other rows
// run once, for reference. Two no-disk rows at 4 KiB (no-disk-uring-nop: the
// same ring with IORING_OP_NOP for every read, and -1cpu with both threads
// on one CPU; no-disk-memory: an in-memory source completing inline) show
// the library's own CPU per read.
//
// Each row reads random block-aligned offsets through a Reader with
// as-completed delivery for kRowSeconds; at 4 KiB, each run from a region of
// the file no other run reads (Region in bench_local.h). A buffered row reads
// every block at most once (so that it never hits pages it read itself) and
// ends early if it runs out; an O_DIRECT row goes round the blocks again, as
// fio's time-based run does, so that both run the full kRowSeconds and spread
// their start-up (fresh buffers, registered memory) over as many reads. CPU is
// getrusage(RUSAGE_SELF) over the row (every thread of the process, the
// kernel's io_uring workers included); fio's the same for its whole process
// tree (RUSAGE_CHILDREN), less its start-up (FioStartupCpu).
#include "bench_local.h"

#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "bench_scenarios.h"
#include "bench_seam.h"
#include "one_cpu.h"
#include "progress.h"
#include "rangeio/rangeio.h"

namespace rangeio::bench {
namespace {

// Larger than 1 GiB, so that the page cache cannot hold the cold rows' data,
// and large enough that a 1 MiB row of 3 s does not run out of blocks on a
// disk of a few GiB/s.
constexpr uint64_t kFileBytes = uint64_t{2} << 30;
constexpr uint64_t kBlockSizes[] = {4096, uint64_t{1} << 20};
// The methodology (#21): at least 3 pairs, so that a median exists
// and one disturbed pair cannot decide it; rounded up to an even count so
// that each side goes first equally often. Which side goes first moved the
// CPU-per-read ratio by ~1.6x on this machine kind (a rate-limited virtual
// disk refills while the other side starts up), so an odd count would tilt
// the median toward one order.
constexpr int kMinPairs = 3;
// A row looks at the clock once per this many reads (microseconds apart).
constexpr uint64_t kCheckEvery = 64;
// Runs of each no-disk row (RunNoDisk).
constexpr int kNoDiskRuns = 3;
// The no-disk memory row reads this much memory (the ranges wrap round it).
constexpr uint64_t kMemoryBytes = uint64_t{64} << 20;
// A region of its own per run (see Region in bench_local.h) only when it
// holds at least this many blocks: 3 s at 2,700 IOPS before a run goes round
// its region again.
constexpr uint64_t kMinRegionBlocks = 8192;

enum class Kind {
  kFile,      // OpenLocalFile
  kUringNop,  // the io_uring engine with IORING_OP_NOP instead of reads
  kMemory,    // a zero-copy in-memory source: completes inline
};

struct Strategy {
  const char* name;
  Kind kind;
  LocalEngine engine;
  bool direct;
  bool one_cpu = false;  // the row's threads on one CPU (OneCpu)
};
// Run once per block size, for reference.
constexpr Strategy kSingles[] = {
    {"pread", Kind::kFile, LocalEngine::kPread, false},
    {"pread-direct", Kind::kFile, LocalEngine::kPread, true},
    {"uring", Kind::kFile, LocalEngine::kUring, false},
};
// Paired with fio.
constexpr Strategy kPaired = {"uring-direct", Kind::kFile, LocalEngine::kUring,
                              true};
// 4 KiB only: the library's own cost per read.
constexpr Strategy kNoDisk[] = {
    {"no-disk-uring-nop", Kind::kUringNop, LocalEngine::kUring, true},
    {"no-disk-uring-nop-1cpu", Kind::kUringNop, LocalEngine::kUring, true,
     true},
    {"no-disk-memory", Kind::kMemory, LocalEngine::kAuto, false},
};

using Clock = std::chrono::steady_clock;

std::string DefaultFile() {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir && *dir ? dir : "/tmp") + "/rangeio-local.bin";
}

// Every block of `region` once, in random order.
std::vector<ByteRange> RandomBlocks(uint64_t block_size, Region region) {
  std::vector<ByteRange> ranges;
  ranges.reserve(region.bytes / block_size);
  for (uint64_t off = 0; off + block_size <= region.bytes; off += block_size) {
    ranges.push_back({region.offset + off, block_size});
  }
  std::shuffle(ranges.begin(), ranges.end(), std::mt19937_64(42));
  return ranges;
}

// The simulated bytes of [0, kMemoryBytes), made once.
const Slice& MemoryBytes() {
  static const Slice bytes = [] {
    std::byte* p = nullptr;
    Slice s = Slice::Allocate(kMemoryBytes, &p);
    FillSimulatedBytes(0, {p, kMemoryBytes});
    return s;
  }();
  return bytes;
}

Result<std::shared_ptr<Source>> OpenRowSource(const std::string& path,
                                              const Strategy& s) {
  LocalFileOptions lo;
  lo.threads = kConcurrency;
  lo.engine = s.engine;
  lo.direct = s.direct;
  switch (s.kind) {
    case Kind::kFile:
      return OpenLocalFile(path, lo);
    case Kind::kUringNop:
      return bench_seam::OpenUringNopFile(path, lo);
    case Kind::kMemory:
      return MakeMemorySource("memory", MemoryBytes(), true);
  }
  return Status::Internal("bench local: unknown row kind");
}

// A row's Reader: C = 64, and like fio each read is one block (the local
// preset would merge adjacent random blocks into larger reads), with a
// response budget of 2C responses of the row's block size, so that the
// budget never holds back the 64 reads in flight.
Options RowOptions(uint64_t block_size) {
  Options o;
  o.limiter.io_concurrency = kConcurrency;
  o.reader.planner = PlannerOptions::None();
  o.limiter.response_budget_count = 2 * kConcurrency;
  o.limiter.response_budget_bytes = uint64_t{2} * kConcurrency * block_size;
  return o;
}

// What an O_DIRECT or no-disk row reads: `blocks` again and again, laps
// for the row's time at 6 GiB/s (beyond any disk of this kind), at most
// 2^20 ranges (16 MiB of list, copied by ReadRanges inside the timed row):
// 4 KiB rows keep their single lap of 524,288 blocks. A memory row's
// offsets wrap round its kMemoryBytes.
std::vector<ByteRange> Laps(const Strategy& s, uint64_t block_size,
                            const std::vector<ByteRange>& blocks) {
  std::vector<ByteRange> laps;
  const uint64_t want = std::min<uint64_t>(
      (uint64_t{6} << 30) * kRowSeconds / block_size, uint64_t{1} << 20);
  laps.reserve(std::max<uint64_t>(want, blocks.size()));
  while (laps.size() < want) {
    laps.insert(laps.end(), blocks.begin(), blocks.end());
  }
  if (s.kind == Kind::kMemory) {
    for (ByteRange& r : laps) r.offset %= kMemoryBytes;
  }
  return laps;
}

// The timed part of a row: reads `ranges` as completed until kRowSeconds
// have passed (or every range is read), then drops the stream, which
// cancels the rest. Sets the row's reads, seconds and CPU; returns how many
// reads had the wrong size or first or last byte (bytes unchecked unless
// `check_bytes`).
Result<uint64_t> TimeRow(const Reader& reader,
                         const std::vector<ByteRange>& ranges, bool check_bytes,
                         IoRow* row) {
  uint64_t wrong = 0;
  // The list is the bench's own; reading it, from here, is the row's.
  const double cpu0 = CpuSeconds(RUSAGE_SELF);
  const auto t0 = Clock::now();
  const auto deadline = t0 + std::chrono::seconds(kRowSeconds);
  RANGEIO_ASSIGN_OR_RETURN(RangeStream stream,
                           reader.ReadRanges(ranges, Delivery::kAsCompleted));
  for (;;) {
    RANGEIO_ASSIGN_OR_RETURN(std::optional<RangeResult> r, stream.Next());
    if (!r) break;
    const ByteRange& want = ranges[r->index];
    const Slice& got = r->bytes;
    if (got.size() != want.length ||
        (check_bytes &&
         (got.data()[0] != SimulatedByteAt(want.offset) ||
          got.data()[want.length - 1] != SimulatedByteAt(want.end() - 1)))) {
      ++wrong;
    }
    // The clock and the progress counter every kCheckEvery reads: once
    // per read they would add the bench's own cost to the no-disk rows.
    if (++row->reads % kCheckEvery == 0) {
      Progress::Get().AddReads(kCheckEvery);
      if (Clock::now() >= deadline) break;
    }
  }
  row->seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  row->cpu_seconds = CpuSeconds(RUSAGE_SELF) - cpu0;
  return wrong;
}

// A row once its reads are back: its latency from the limiter, and a note
// when `resident` (the fraction of the file cached at the start) shows; an
// error for wrong bytes or more than C reads in flight.
Result<IoRow> FinishRow(IoRow row, const Limiter& limiter, uint64_t wrong,
                        double resident) {
  if (wrong != 0) {
    return Status::Internal("bench local " + row.strategy + ": " +
                            std::to_string(wrong) + " reads had wrong bytes");
  }
  const Stats st = limiter.GetStats();
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

// One row through rangeio: the blocks of `region` in random order (a
// buffered file row drops the file's pages first), read for kRowSeconds
// (TimeRow); waits for the cancelled reads before it reads the stats.
Result<IoRow> RunOurs(const std::string& path, const Strategy& s,
                      uint64_t block_size, Region region) {
  const std::vector<ByteRange> ranges = RandomBlocks(block_size, region);
  IoRow row;
  row.strategy = s.name;
  row.block_size = block_size;
  row.span_bytes = region.bytes;
  double resident = 0;
  if (!s.direct && s.kind == Kind::kFile) {
    RANGEIO_ASSIGN_OR_RETURN(resident, DropCache(path, kFileBytes));
  }
  std::optional<OneCpu> pin;  // outlives the source and its ring thread
  if (s.one_cpu) pin.emplace();
  RANGEIO_ASSIGN_OR_RETURN(std::shared_ptr<Source> source,
                           OpenRowSource(path, s));
  // The no-op ring leaves its buffers as they were: nothing to check.
  const bool check_bytes = s.kind != Kind::kUringNop;
  const bool laps_wanted = s.direct || s.kind != Kind::kFile;
  std::shared_ptr<Limiter> limiter;
  uint64_t wrong = 0;
  {
    RANGEIO_ASSIGN_OR_RETURN(Reader reader,
                             Reader::Open(source, RowOptions(block_size)));
    limiter = reader.limiter();
    const std::vector<ByteRange> laps =
        laps_wanted ? Laps(s, block_size, ranges) : std::vector<ByteRange>();
    RANGEIO_ASSIGN_OR_RETURN(
        wrong, TimeRow(reader, laps_wanted ? laps : ranges, check_bytes, &row));
  }  // the stream is cancelled; its reads in flight finish on their own
  while (limiter->GetStats().in_flight != 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  row.note = source->Info().description;
  if (pin) row.note += pin->cpu() < 0 ? " [NOT PINNED]" : " [on one CPU]";
  return FinishRow(std::move(row), *limiter, wrong, resident);
}

// The no-disk rows, kNoDiskRuns of each in rotating order: each row shows
// the run of median CPU per read, with the runs' spread (one run on two
// cores moved by up to 3x between runs).
Status RunNoDisk(const std::string& path, Report* rep) {
  constexpr size_t kRows = std::size(kNoDisk);
  std::array<std::vector<IoRow>, kRows> runs;
  for (int run = 0; run < kNoDiskRuns; ++run) {
    for (size_t k = 0; k < kRows; ++k) {
      const size_t i = (k + static_cast<size_t>(run)) % kRows;
      Progress::Get().Phase("local: " + std::string(kNoDisk[i].name));
      RANGEIO_ASSIGN_OR_RETURN(
          IoRow row, RunOurs(path, kNoDisk[i], 4096, Region{0, kFileBytes}));
      runs[i].push_back(std::move(row));
    }
  }
  for (std::vector<IoRow>& r : runs) {
    std::sort(r.begin(), r.end(), [](const IoRow& a, const IoRow& b) {
      return CpuPerRead(a) < CpuPerRead(b);
    });
    IoRow row = r[r.size() / 2];
    char buf[120];
    std::snprintf(
        buf, sizeof buf, " [median CPU of %d runs; %.2f-%.2f us per read]",
        kNoDiskRuns, CpuPerRead(r.front()) * 10, CpuPerRead(r.back()) * 10);
    row.note += buf;
    rep->io_rows.push_back(std::move(row));
  }
  return Status::OK();
}

// Marks rows that measured a cache rather than the disk.
void FlagCaches(Report* rep, const std::vector<PairSummary>& sums,
                const std::string& virtual_device) {
  for (IoRow& r : rep->io_rows) {
    const PairSummary* sum = nullptr;
    for (const PairSummary& s : sums) {
      if (s.block_size == r.block_size) sum = &s;
    }
    const bool buffered = r.strategy == "pread" || r.strategy == "uring";
    // Faster than O_DIRECT fio: the page cache served part of the row.
    if (buffered && sum != nullptr && r.iops() > 1.5 * sum->fio_iops) {
      r.note +=
          " [PAGE CACHE: 1.5x fio's O_DIRECT IOPS or more, not a disk "
          "figure]";
    }
    const double laps = static_cast<double>(r.reads) *
                        static_cast<double>(r.block_size) /
                        static_cast<double>(r.span_bytes);
    const bool direct = !buffered && r.strategy.rfind("no-disk", 0) != 0;
    if (direct && !virtual_device.empty() && laps > 1) {
      char buf[160];
      std::snprintf(buf, sizeof buf,
                    " [HOST CACHE?: read %s %.1f times on a virtual disk]",
                    r.span_bytes < kFileBytes ? "its region" : "the file",
                    laps);
      r.note += buf;
    }
  }
  if (!virtual_device.empty()) {
    rep->lines.push_back(
        "  NOTE  the file is on a virtual disk, " + virtual_device +
        ": its host may serve O_DIRECT reads from the host's page cache, so "
        "rows that read the file more than once (HOST CACHE?) show the host's "
        "memory, not the disk. The pairs still compare rangeio and fio on the "
        "same state; the absolute figures do not transfer.");
    for (uint64_t bs : kBlockSizes) {
      uint64_t span = kFileBytes;  // the regions' size, if split
      for (const IoRow& r : rep->io_rows) {
        if (r.block_size == bs && r.span_bytes != 0) {
          span = std::min(span, r.span_bytes);
        }
      }
      char line[240];
      std::snprintf(
          line, sizeof line, "  NOTE  %s: %s", bs == 4096 ? "4 KiB" : "1 MiB",
          span < kFileBytes
              ? "each run that reads the file reads a region of its own, so "
                "none reads blocks an earlier run left in the host's cache"
              : "every run reads the whole file, which the host may cache");
      rep->lines.push_back(line);
    }
  }
}

}  // namespace

Result<IoRow> RunUringDirect(const std::string& path, uint64_t block_size,
                             Region region) {
  return RunOurs(path, kPaired, block_size, region);
}

Result<Report> RunLocal(const BenchOptions& options) {
  const std::string path =
      options.local_file.empty() ? DefaultFile() : options.local_file;
  RANGEIO_RETURN_NOT_OK(PrepareFile(path, kFileBytes));
  const std::string fio = FioVersion();
  int pairs = std::max(options.rounds, kMinPairs);
  pairs += pairs % 2;
  const std::string virtual_device = VirtualDevice(path);

  Report rep;
  rep.scenario = "local";
  rep.config = {
      {"file", path},
      {"file_bytes", kFileBytes},
      {"io_concurrency", kConcurrency},
      {"row_seconds", kRowSeconds},
      {"offsets",
       "random, block-aligned; at 4 KiB each run reads a region of the file "
       "of its own; buffered rows read each block at most once, O_DIRECT "
       "rows go round again until the row's time is up"},
      {"delivery", "as-completed"},
      {"buffered_rows", "cold: posix_fadvise(DONTNEED) first"},
      {"pairs", pairs},
      {"pairing",
       "uring-direct and fio-uring-direct interleaved, first alternating; "
       "verdicts on the median of the per-pair ratios"},
      {"fio_drift_flag", kFioDrift},
      {"virtual_disk", virtual_device},
      {"fio", fio.empty() ? "missing" : fio}};
  if (fio.empty()) {
    std::fprintf(stderr,
                 "bench local: fio not found on PATH: no fio rows "
                 "(install it: apt-get install fio)\n");
  }
  std::vector<PairSummary> sums;
  nlohmann::json jpairs = nlohmann::json::object();
  for (uint64_t bs : kBlockSizes) {
    // Regions in run order: the reference rows, then the pairs (or the one
    // uring-direct row without fio).
    const size_t runs = std::size(kSingles) + (fio.empty() ? 1 : 2 * pairs);
    const std::vector<Region> regions =
        SplitFile(kFileBytes, bs, runs, kMinRegionBlocks);
    size_t next = 0;
    for (const Strategy& s : kSingles) {
      Progress::Get().Phase("local: " + std::string(s.name) + " " +
                            std::to_string(bs >> 10) + " KiB");
      RANGEIO_ASSIGN_OR_RETURN(IoRow row,
                               RunOurs(path, s, bs, regions[next++]));
      rep.io_rows.push_back(std::move(row));
    }
    if (bs == 4096) RANGEIO_RETURN_NOT_OK(RunNoDisk(path, &rep));
    if (fio.empty()) {
      Progress::Get().Phase("local: uring-direct " + std::to_string(bs >> 10) +
                            " KiB");
      RANGEIO_ASSIGN_OR_RETURN(IoRow row,
                               RunOurs(path, kPaired, bs, regions[next]));
      rep.io_rows.push_back(std::move(row));
      continue;
    }
    RANGEIO_ASSIGN_OR_RETURN(
        PairSummary sum,
        RunPairs(path, bs, std::span<const Region>(regions).subspan(next),
                 pairs, &rep, &jpairs));
    sums.push_back(sum);
  }
  if (fio.empty()) rep.lines.push_back("  fio missing: not compared");
  FlagCaches(&rep, sums, virtual_device);
  AddTargets(&rep, !fio.empty(), sums);
  rep.details["pairs"] = std::move(jpairs);
  return rep;
}

}  // namespace rangeio::bench
