// Microbenchmarks of the hot paths, with google/benchmark. The scenario
// benchmarks that compare strategies live in rangeio-bench.
//
//   ./build/bench/rangeio_microbench --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include <algorithm>
#include <random>
#include <vector>

#include "rangeio/rangeio.h"

namespace rangeio {
namespace {

constexpr uint64_t kRangeBytes = 4096;

// A buffer of simulated bytes shared by the in-memory benchmarks.
const Slice& Data() {
  static const Slice data = [] {
    std::byte* p = nullptr;
    Slice s = Slice::Allocate(64 << 20, &p);
    FillSimulatedBytes(0, {p, size_t{64} << 20});
    return s;
  }();
  return data;
}

std::vector<ByteRange> ShuffledRanges(size_t n) {
  std::vector<ByteRange> r;
  const uint64_t stride = Data().size() / n;
  for (size_t i = 0; i < n; ++i) r.push_back({i * stride, kRangeBytes});
  std::shuffle(r.begin(), r.end(), std::mt19937_64(1));
  return r;
}

// Whole stream through Reader + Limiter from an in-memory source: per-range
// scheduling cost (zero-copy) or scheduling plus a copy (copy).
void BM_MemoryStream(benchmark::State& state) {
  const bool zero_copy = state.range(0) != 0;
  const auto delivery =
      state.range(1) ? Delivery::kAsCompleted : Delivery::kOrdered;
  const std::vector<ByteRange> ranges = ShuffledRanges(8192);
  Reader reader = *Reader::Open(MakeMemorySource("mem", Data(), zero_copy));
  for ([[maybe_unused]] auto _ : state) {
    RangeStream stream = *reader.ReadRanges(ranges, delivery);
    for (;;) {
      auto r = stream.Next();
      if (!r.ok() || !*r) break;
      benchmark::DoNotOptimize((*r)->bytes.data());
    }
  }
  state.SetItemsProcessed(state.iterations() *
                          static_cast<int64_t>(ranges.size()));
}
BENCHMARK(BM_MemoryStream)
    ->ArgsProduct({{0, 1}, {0, 1}})
    ->ArgNames({"zero_copy", "as_completed"});

// Many streams sharing one limiter, consumed round-robin from one thread (a
// k-way merge): the cost of fair admission across waiting streams. The
// response budget leaves every stream room for 4 results: a merge from one
// thread needs at least one per stream (see RangeStream::Next).
void BM_SharedLimiterStreams(benchmark::State& state) {
  const size_t streams = static_cast<size_t>(state.range(0));
  const std::vector<ByteRange> ranges = ShuffledRanges(1024);
  Options o;
  o.limiter.io_concurrency = 16;
  o.limiter.response_budget_count = static_cast<uint32_t>(4 * streams);
  std::shared_ptr<Limiter> limiter = *Limiter::Make(o);
  Reader reader =
      *Reader::Open(MakeMemorySource("mem", Data(), true), o, limiter);
  for ([[maybe_unused]] auto _ : state) {
    std::vector<RangeStream> open;
    for (size_t i = 0; i < streams; ++i)
      open.push_back(*reader.ReadRanges(ranges));
    size_t live = streams;
    while (live > 0) {
      live = 0;
      for (RangeStream& s : open) {
        auto r = s.Next();
        if (r.ok() && *r) ++live;
      }
    }
  }
  state.SetItemsProcessed(state.iterations() *
                          static_cast<int64_t>(streams * ranges.size()));
}
BENCHMARK(BM_SharedLimiterStreams)->Arg(1)->Arg(4)->Arg(32);

void BM_HistogramRecord(benchmark::State& state) {
  LatencyHistogram h;
  uint64_t v = 1;
  for ([[maybe_unused]] auto _ : state) {
    v = v * 6364136223846793005ull + 1442695040888963407ull;
    h.Record(v >> 40);
  }
  benchmark::DoNotOptimize(h.count());
}
BENCHMARK(BM_HistogramRecord);

void BM_FillSimulatedBytes(benchmark::State& state) {
  std::vector<std::byte> buf(kRangeBytes);
  uint64_t off = 0;
  for ([[maybe_unused]] auto _ : state) {
    FillSimulatedBytes(off, buf);
    off += 8192;
    benchmark::DoNotOptimize(buf.data());
  }
  state.SetBytesProcessed(state.iterations() *
                          static_cast<int64_t>(kRangeBytes));
}
BENCHMARK(BM_FillSimulatedBytes);

void BM_OptionsParse(benchmark::State& state) {
  for ([[maybe_unused]] auto _ : state) {
    auto o = Options::Parse("read-thread-num=64,response-budget-bytes=64MiB");
    benchmark::DoNotOptimize(o);
  }
}
BENCHMARK(BM_OptionsParse);

}  // namespace
}  // namespace rangeio

BENCHMARK_MAIN();
