// Microbenchmarks of one read's way through the library (issue #21): the
// cost per read of completing a read (and, with it, submitting the read its
// permit admits next), delivering it to the consumer and releasing its bytes,
// with no I/O at all; and the whole path through the io_uring engine with
// IORING_OP_NOP in place of reads (a ring and its thread, no disk).
//
//   ./build/bench/rangeio_microbench --benchmark_filter=HotPath
//
// Instructions per read: run the same under
// `valgrind --tool=callgrind --collect-atstart=yes` with
// --benchmark_min_time=0.05 and divide the Ir total by the reads it printed.
#include <benchmark/benchmark.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "bench_seam.h"
#include "one_cpu.h"
#include "rangeio/rangeio.h"

namespace rangeio {
namespace {

constexpr uint64_t kReadBytes = 4096;
constexpr uint32_t kWindow = 64;  // C, as bench local uses

// A source whose reads wait until the benchmark completes them: Read and
// ReadMany only record (sink, tag). Single-threaded: the benchmark's thread
// is the only one that completes reads, and so the only one that submits.
class HeldSource final : public Source {
 public:
  explicit HeldSource(uint64_t size) : size_(size) {}
  const std::string& name() const override { return name_; }
  Result<uint64_t> Size() override { return size_; }
  void Read(ByteRange range, ReadSink* sink, uint64_t tag) override {
    (void)range;
    held_.push_back({tag, sink});
  }
  void ReadMany(std::span<const ReadRequest> reads, ReadSink* sink) override {
    for (const ReadRequest& r : reads) held_.push_back({r.tag, sink});
  }

  struct Held {
    uint64_t tag;
    ReadSink* sink;
  };
  // The reads issued so far, handed over (and forgotten).
  void TakeHeld(std::vector<Held>* out) {
    out->clear();
    out->swap(held_);
  }

 private:
  const std::string name_ = "held";
  const uint64_t size_;
  std::vector<Held> held_;
};

// CPU time of the calling thread, in ns: unlike the wall clock it does not
// count the time a loaded machine (other builds) runs something else. Each
// call costs a system call, of which a share lands in the phases timed:
// tens of ns over a round of kWindow reads, a few ns per read.
double ThreadCpuNs() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

// User + system CPU time of the whole process (every thread), in ns.
double ProcessCpuNs() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  auto ns = [](const timeval& tv) {
    return static_cast<double>(tv.tv_sec) * 1e9 +
           static_cast<double>(tv.tv_usec) * 1e3;
  };
  return ns(ru.ru_utime) + ns(ru.ru_stime);
}

// Round after round of kWindow reads of one stream: complete them all (one
// OnReadsDone call, as the io_uring engine delivers a reaped batch; each
// completion returns its permit and admits the next read, which the source
// records), take every result with Next() and release the bytes. The
// counters are nanoseconds of CPU per read of each phase (one thread does
// all of it); the items/s are reads.
void BM_HotPathPerRead(benchmark::State& state) {
  const uint64_t reads_per_stream = uint64_t{1} << 20;
  auto source = std::make_shared<HeldSource>(reads_per_stream * kReadBytes);
  std::vector<ByteRange> ranges(reads_per_stream);
  for (uint64_t i = 0; i < reads_per_stream; ++i) {
    ranges[i] = {i * kReadBytes, kReadBytes};
  }
  Options o;
  o.limiter.io_concurrency = kWindow;
  o.reader.planner = PlannerOptions::None();
  o.limiter.response_budget_count = 2 * kWindow;
  o.limiter.response_budget_bytes = 2 * kWindow * kReadBytes;
  Reader reader = *Reader::Open(source, o);
  std::byte* page = nullptr;
  const Slice bytes = Slice::Allocate(kReadBytes, &page);

  std::vector<HeldSource::Held> held;
  std::vector<ReadCompletion> done;
  std::vector<Slice> results;
  double complete_ns = 0;
  double deliver_ns = 0;
  double release_ns = 0;
  uint64_t reads = 0;
  std::optional<RangeStream> stream;
  for ([[maybe_unused]] auto _ : state) {
    if (!stream) {
      state.PauseTiming();
      stream.emplace(*reader.ReadRanges(ranges, Delivery::kAsCompleted));
      state.ResumeTiming();
    }
    source->TakeHeld(&held);
    if (held.empty()) {  // every range read: the next round starts anew
      stream.reset();
      continue;
    }
    done.resize(held.size());
    for (size_t i = 0; i < held.size(); ++i) done[i] = {held[i].tag, bytes};
    const double t0 = ThreadCpuNs();
    held.front().sink->OnReadsDone(done);
    const double t1 = ThreadCpuNs();
    results.clear();
    for (size_t i = 0; i < held.size(); ++i) {
      Result<std::optional<RangeResult>> r = stream->Next();
      results.push_back(std::move((*r)->bytes));
    }
    const double t2 = ThreadCpuNs();
    results.clear();
    const double t3 = ThreadCpuNs();
    complete_ns += t1 - t0;
    deliver_ns += t2 - t1;
    release_ns += t3 - t2;
    reads += held.size();
  }
  const auto per_read = [&](double ns) {
    return benchmark::Counter(reads > 0 ? ns / static_cast<double>(reads) : 0);
  };
  state.counters["complete_ns"] = per_read(complete_ns);
  state.counters["deliver_ns"] = per_read(deliver_ns);
  state.counters["release_ns"] = per_read(release_ns);
  state.counters["total_ns"] = per_read(complete_ns + deliver_ns + release_ns);
  state.SetItemsProcessed(static_cast<int64_t>(reads));
}
BENCHMARK(BM_HotPathPerRead);

// A 4 KiB-aligned file for the no-op ring to be opened on: it reads none
// of it, but opens it O_DIRECT, as bench local's uring-direct rows do.
std::string NopFile() {
  static const std::string path = [] {
    const char* dir = std::getenv("TMPDIR");
    std::string p =
        std::string(dir && *dir ? dir : "/tmp") + "/rangeio-microbench-nop.bin";
    if (FILE* f = std::fopen(p.c_str(), "wb")) {
      std::vector<char> zeros(kReadBytes * kWindow);
      std::fwrite(zeros.data(), 1, zeros.size(), f);
      std::fclose(f);
    }
    return p;
  }();
  return path;
}

// Whole streams of 4 KiB reads through the io_uring engine with
// IORING_OP_NOP for every read (bench_seam::OpenUringNopFile), consumed as they
// complete: the ring thread's submit and reap, buffers, scheduler and
// consumer, with no device. cpu_ns: CPU of the whole process (consumer and
// ring thread) per read, as bench local's no-disk-uring-nop row counts it;
// the wall time per read depends on what else the machine runs. Arg 1:
// the consumer and the ring thread on one CPU (bench::OneCpu), so that
// cpu_ns is the library's work per read without the handoff between cores.
void BM_HotPathUringNop(benchmark::State& state) {
  std::optional<bench::OneCpu> pin;  // outlives the ring thread
  if (state.range(0) == 1) {
    pin.emplace();
    if (pin->cpu() < 0) {
      state.SkipWithError("cannot pin to one CPU");
      return;
    }
  }
  LocalFileOptions lo;
  lo.threads = kWindow;
  lo.direct = true;
  auto source = bench_seam::OpenUringNopFile(NopFile(), lo);
  if (!source.ok()) {
    state.SkipWithError(source.status().ToString().c_str());
    return;
  }
  std::vector<ByteRange> ranges(8192);
  for (size_t i = 0; i < ranges.size(); ++i) {
    ranges[i] = {(i % kWindow) * kReadBytes, kReadBytes};
  }
  Options o;
  o.limiter.io_concurrency = kWindow;
  o.reader.planner = PlannerOptions::None();
  o.limiter.response_budget_count = 2 * kWindow;
  o.limiter.response_budget_bytes = 2 * kWindow * kReadBytes;
  Reader reader = *Reader::Open(*source, o);
  const double cpu0 = ProcessCpuNs();
  for ([[maybe_unused]] auto _ : state) {
    RangeStream stream = *reader.ReadRanges(ranges, Delivery::kAsCompleted);
    for (;;) {
      auto r = stream.Next();
      if (!r.ok() || !*r) break;
      benchmark::DoNotOptimize((*r)->bytes.data());
    }
  }
  const auto reads = static_cast<double>(state.iterations() * ranges.size());
  state.counters["cpu_ns"] =
      benchmark::Counter((ProcessCpuNs() - cpu0) / std::max(reads, 1.0));
  state.SetItemsProcessed(state.iterations() *
                          static_cast<int64_t>(ranges.size()));
}
BENCHMARK(BM_HotPathUringNop)
    ->ArgName("one_cpu")
    ->Arg(0)
    ->Arg(1)
    ->UseRealTime();

}  // namespace
}  // namespace rangeio
