// One conformance suite for every Source backend (support/source_conformance.h
// lists them): memory, simulated, block-cached, the local pread pool and
// io_uring (buffered and O_DIRECT), HTTP (nginx) and S3 (s3rver). Each opens
// the same object and must pass the same checks:
//
//   name and size                    -> NameAndSize
//   exact bytes of seeded ranges     -> SeededRangesReadExactBytes,
//                                       ReadsFromManyThreads*
//   zero-length ranges               -> ZeroLengthRanges*
//   first and last byte              -> FirstAndLastByte*
//   past the end / overflow: an error naming source and range, no I/O
//                                    -> RangesPastTheEnd*
//   in-flight <= C, retained <= budget, each range once with its bytes in
//   both deliveries                  -> ReaderBounds*, ConcurrentReaders*
//   slices keep their bytes while held and after the source is gone
//                                    -> SlicesKeep*, SlicesOutlive*
//   a cancelled or dropped stream returns every permit, leaks nothing
//                                    -> CancelledOrDropped*, SourceReleased*
//   ReadMany and Assist              -> ReadManyCompletesEachReadOnce
//
// What only one backend has stays beside it: O_DIRECT alignment, engine
// choice and files truncated under reads (local_conformance_test.cc), HTTP
// request counts and faults (http_test.cc, http_fault_test.cc), latency
// models (sim_test.cc), cache accounting (block_cache_test.cc).
// Deterministic: no assertion depends on timing.
#include "support/source_conformance.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "rangeio/rangeio.h"
#include "support/collecting_sink.h"
#include "support/http_servers.h"
#include "support/test_util.h"

namespace rangeio {
namespace {

using ::testing::AnyOf;
using testing::CollectingSink;
using testing::ConformanceBackends;
using testing::DrainResult;
using testing::ExpectLimiterDrains;
using ::testing::HasSubstr;
using testing::kConformanceBytes;
using testing::LimitOptions;
using testing::OpenedSource;
using testing::SourceBackend;
using testing::SpreadRanges;
using testing::WaitUntil;

constexpr uint64_t kN = kConformanceBytes;

bool Matches(ByteRange range, const Slice& bytes) {
  return testing::MatchesBytes(range, bytes.span(), SimulatedByteAt);
}

DrainResult Drain(RangeStream& stream, const std::vector<ByteRange>& ranges,
                  bool keep_slices = false) {
  return testing::Drain(stream, ranges, SimulatedByteAt, keep_slices);
}

// Every index in [0, n) exactly once.
void ExpectEachIndexOnce(std::vector<size_t> idx, size_t n) {
  std::sort(idx.begin(), idx.end());
  ASSERT_EQ(idx.size(), n);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(idx[i], i);
}

// `n` seeded ranges of 0..max_len - 1 (or 1..max_len) bytes within the object.
std::vector<ByteRange> RandomRanges(uint64_t seed, int n, uint64_t max_len,
                                    bool allow_empty) {
  std::mt19937_64 rng(seed);
  std::vector<ByteRange> ranges;
  for (int i = 0; i < n; ++i) {
    const uint64_t len = allow_empty ? rng() % max_len : 1 + rng() % max_len;
    ranges.push_back({rng() % (kN - len + 1), len});
  }
  return ranges;
}

class SourceConformanceTest : public ::testing::TestWithParam<SourceBackend> {
 protected:
  static void SetUpTestSuite() {
    env_.local_path = ::testing::TempDir() + "rangeio_conformance_" +
                      std::to_string(::getpid()) + ".bin";
    Status st = testing::WriteConformanceFile(env_.local_path);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  static void TearDownTestSuite() { ::unlink(env_.local_path.c_str()); }

  void SetUp() override {
    if (!GetParam().needs_servers) return;
    RANGEIO_NEED_SERVERS(s);
    RANGEIO_NEED_BACKEND(s, GetParam().server);
    servers_ = s;
  }

  // A new source of the conformance object; a null source with skip_ set
  // where the backend cannot run here (no O_DIRECT on this file system).
  OpenedSource Open() {
    testing::ConformanceEnv env = env_;
    if (servers_) env.servers = &*servers_;
    auto opened = GetParam().open(env);
    if (!opened.ok() && testing::IsDirectUnsupported(opened.status())) {
      skip_ = opened.status().ToString();
      return {};
    }
    EXPECT_TRUE(opened.ok()) << opened.status().ToString();
    return opened.ok() ? *opened : OpenedSource{};
  }

  // Each range is its own read (no planner), so that the reads are the ones
  // the test describes; with `default_planner`, the source's own preset.
  static Reader OpenReader(std::shared_ptr<Source> source, Options options,
                           std::shared_ptr<Limiter> limiter = nullptr,
                           bool default_planner = false) {
    if (!default_planner) options.reader.planner = PlannerOptions::None();
    auto reader = Reader::Open(std::move(source), options, std::move(limiter));
    EXPECT_TRUE(reader.ok()) << reader.status().ToString();
    return std::move(reader).value();
  }

  static testing::ConformanceEnv env_;
  std::optional<testing::TestServers> servers_;
  std::string skip_;
};

testing::ConformanceEnv SourceConformanceTest::env_;

#define OPEN_OR_SKIP(var)                                   \
  OpenedSource var = Open();                                \
  if (!var.source && !skip_.empty()) GTEST_SKIP() << skip_; \
  ASSERT_NE(var.source, nullptr)

INSTANTIATE_TEST_SUITE_P(Backends, SourceConformanceTest,
                         ::testing::ValuesIn(ConformanceBackends()),
                         [](const ::testing::TestParamInfo<SourceBackend>& p) {
                           return p.param.id;
                         });

TEST_P(SourceConformanceTest, NameAndSize) {
  OPEN_OR_SKIP(o);
  EXPECT_EQ(o.source->name(), o.name);
  for (int i = 0; i < 2; ++i) {  // the second answer is the cached one
    auto size = o.source->Size();
    ASSERT_TRUE(size.ok()) << size.status().ToString();
    EXPECT_EQ(*size, kN);
  }
}

// Source::Read straight, each read completed exactly once with exactly its
// bytes: unaligned offsets and lengths, the first and last byte, the whole
// object, and 200 seeded random ranges.
TEST_P(SourceConformanceTest, SeededRangesReadExactBytes) {
  OPEN_OR_SKIP(o);
  std::vector<ByteRange> ranges = {
      {0, 1},          {kN - 1, 1},       {0, kN},       {4095, 2},
      {123456, 65536}, {kN - 4096, 4096}, {511, 513},    {512, 512},
      {4096, 4096},    {1, kN - 2},       {kN - 13, 13}, {13, 1 << 20},
      {0, 4096},       {777, 100'000},    {kN, 0}};
  for (const ByteRange& r : RandomRanges(11, 200, 20'000, false)) {
    ranges.push_back(r);
  }
  CollectingSink sink;
  for (size_t i = 0; i < ranges.size(); ++i)
    o.source->Read(ranges[i], &sink, i);
  ASSERT_TRUE(sink.WaitFor(ranges.size(), testing::kHangGuard));
  EXPECT_EQ(sink.duplicates(), 0u);
  for (size_t i = 0; i < ranges.size(); ++i) {
    auto d = sink.Get(i);
    ASSERT_TRUE(d.bytes.ok())
        << ranges[i].ToString() << ": " << d.bytes.status().ToString();
    EXPECT_TRUE(Matches(ranges[i], *d.bytes)) << ranges[i].ToString();
  }
}

TEST_P(SourceConformanceTest, ReadsFromManyThreadsCompleteExactlyOnce) {
  OPEN_OR_SKIP(o);
  constexpr int kThreads = 4;
  constexpr int kPerThread = 300;
  const auto ranges = RandomRanges(3, kThreads * kPerThread, 9000, false);
  CollectingSink sink;
  {
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = t * kPerThread; i < (t + 1) * kPerThread; ++i) {
          o.source->Read(ranges[i], &sink, i);
        }
      });
    }
    for (std::thread& t : threads) t.join();
  }
  ASSERT_TRUE(sink.WaitFor(ranges.size(), testing::kHangGuard));
  EXPECT_EQ(sink.duplicates(), 0u);
  for (size_t i = 0; i < ranges.size(); ++i) {
    auto d = sink.Get(i);
    ASSERT_TRUE(d.bytes.ok()) << d.bytes.status().ToString();
    EXPECT_TRUE(Matches(ranges[i], *d.bytes)) << ranges[i].ToString();
  }
}

// Zero-length ranges, anywhere up to the end itself, complete with an empty
// slice: from the source and through a Reader.
TEST_P(SourceConformanceTest, ZeroLengthRangesAreEmptySlices) {
  OPEN_OR_SKIP(o);
  const std::vector<ByteRange> ranges = {
      {0, 0}, {12345, 0}, {kN, 0}, {kN - 1, 1}, {kN / 2, 0}};
  CollectingSink sink;
  for (size_t i = 0; i < ranges.size(); ++i)
    o.source->Read(ranges[i], &sink, i);
  ASSERT_TRUE(sink.WaitFor(ranges.size(), testing::kHangGuard));
  for (size_t i = 0; i < ranges.size(); ++i) {
    auto d = sink.Get(i);
    ASSERT_TRUE(d.bytes.ok()) << d.bytes.status().ToString();
    EXPECT_TRUE(Matches(ranges[i], *d.bytes)) << ranges[i].ToString();
  }

  // Every slice is kept: the response budget holds them all.
  Reader reader = OpenReader(o.source, LimitOptions(2, 8));
  auto stream = reader.ReadRanges(ranges, Delivery::kOrdered);
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  DrainResult out = Drain(*stream, ranges, /*keep_slices=*/true);
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  EXPECT_EQ(out.indexes, (std::vector<size_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(out.bad_bytes, 0u);
  for (size_t i : {0, 1, 2, 4}) EXPECT_TRUE(out.slices[i].empty()) << i;
}

// Ranges that end exactly at the end, start at the beginning or cover it
// all, through a Reader.
TEST_P(SourceConformanceTest, FirstAndLastByteThroughAReader) {
  OPEN_OR_SKIP(o);
  Reader reader = OpenReader(o.source, LimitOptions(4));
  const std::vector<ByteRange> ranges = {{kN - 1, 1},     {0, 1},
                                         {0, kN},         {kN / 2, kN - kN / 2},
                                         {kN - 512, 512}, {kN - 100, 100}};
  auto stream = reader.ReadRanges(ranges, Delivery::kOrdered);
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  DrainResult out = Drain(*stream, ranges);
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  EXPECT_EQ(out.indexes, (std::vector<size_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(out.bad_bytes, 0u);
}

// A request with a range past the end, or whose end overflows 64 bits,
// fails as a whole when it is made: an error naming the source and the
// range, and no read is issued.
TEST_P(SourceConformanceTest, RangesPastTheEndFailBeforeAnyIo) {
  OPEN_OR_SKIP(o);
  Reader reader = OpenReader(o.source, LimitOptions(4));
  for (ByteRange past : {ByteRange{kN - 10, 11}, ByteRange{kN, 1},
                         ByteRange{2 * kN, 0}, ByteRange{0, kN + 1}}) {
    const std::vector<ByteRange> ranges = {{0, 10}, past};
    auto bad = reader.ReadRanges(ranges);
    ASSERT_FALSE(bad.ok()) << past.ToString();
    EXPECT_EQ(bad.status().code(), StatusCode::kOutOfRange);
    EXPECT_THAT(bad.status().message(), HasSubstr(o.name));
    EXPECT_THAT(bad.status().message(), HasSubstr(past.ToString()));
  }
  // Built by hand, bypassing ByteRange::Make: offset + length wraps.
  const std::vector<ByteRange> wraps = {{0, 10}, {UINT64_MAX - 4, 10}};
  auto bad = reader.ReadRanges(wraps);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().code(),
              AnyOf(StatusCode::kInvalidArgument, StatusCode::kOutOfRange));
  EXPECT_THAT(bad.status().message(), HasSubstr(o.name));
  EXPECT_THAT(bad.status().message(), HasSubstr("18446744073709551611"));
  const Stats s = reader.limiter()->GetStats();
  EXPECT_EQ(s.physical_reads, 0u);
  EXPECT_EQ(s.peak_in_flight, 0u);
}

// The Reader's invariants over this backend: in-flight within C, retained
// responses and bytes within the budget, every range exactly once with its
// bytes (in request order when ordered), and once the streams end every
// permit and every budget byte is back.
TEST_P(SourceConformanceTest, ReaderBoundsAndExactlyOnceInBothDeliveries) {
  OPEN_OR_SKIP(o);
  constexpr uint32_t kC = 6;
  constexpr uint64_t kBudgetBytes = 64 * 1024;
  Reader reader = OpenReader(o.source, LimitOptions(kC, 10, kBudgetBytes));
  std::vector<ByteRange> ranges = {{kN - 1, 1}, {0, 1}, {kN - 100, 100}};
  for (const ByteRange& r : RandomRanges(5, 400, 9000, true)) {
    ranges.push_back(r);
  }
  for (Delivery d : {Delivery::kOrdered, Delivery::kAsCompleted}) {
    auto stream = reader.ReadRanges(ranges, d);
    ASSERT_TRUE(stream.ok()) << stream.status().ToString();
    DrainResult out = Drain(*stream, ranges);
    ASSERT_TRUE(out.status.ok()) << out.status.ToString();
    EXPECT_EQ(out.bad_bytes, 0u);
    if (d == Delivery::kOrdered) {
      EXPECT_TRUE(std::is_sorted(out.indexes.begin(), out.indexes.end()));
    }
    ExpectEachIndexOnce(out.indexes, ranges.size());
  }
  ExpectLimiterDrains(*reader.limiter());
  const Stats s = reader.limiter()->GetStats();
  EXPECT_LE(s.peak_in_flight, kC);
  EXPECT_LE(s.peak_retained_count, 10u);
  EXPECT_LE(s.peak_retained_bytes, kBudgetBytes);
  EXPECT_EQ(s.read_errors, 0u);
  EXPECT_EQ(s.ranges_delivered, 2 * ranges.size());
}

// Two readers of two sources of this backend share one limiter: its bounds
// hold across both, each consumer on its own thread. The first plans its
// reads with the source's default preset (DefaultPlannerOptions), the second
// reads each range as asked.
TEST_P(SourceConformanceTest, ConcurrentReadersShareALimiter) {
  OPEN_OR_SKIP(a);
  OPEN_OR_SKIP(b);
  auto limiter = Limiter::Make(LimitOptions(3));
  ASSERT_TRUE(limiter.ok());
  Reader r1 = OpenReader(a.source, {}, *limiter, /*default_planner=*/true);
  Reader r2 = OpenReader(b.source, {}, *limiter);
  const auto ranges = SpreadRanges(200, 300, 320);
  auto st1 = r1.ReadRanges(ranges, Delivery::kAsCompleted);
  auto st2 = r2.ReadRanges(ranges, Delivery::kOrdered);
  ASSERT_TRUE(st1.ok() && st2.ok());
  {
    testing::StreamConsumer c1(std::move(*st1), ranges, false, SimulatedByteAt);
    testing::StreamConsumer c2(std::move(*st2), ranges, false, SimulatedByteAt);
    ASSERT_TRUE(c1.WaitForDone());
    ASSERT_TRUE(c2.WaitForDone());
    EXPECT_TRUE(c1.final_status().ok()) << c1.final_status().ToString();
    EXPECT_TRUE(c2.final_status().ok()) << c2.final_status().ToString();
    EXPECT_EQ(c1.count(), 200u);
    EXPECT_EQ(c2.count(), 200u);
    EXPECT_EQ(c1.bad_bytes() + c2.bad_bytes(), 0u);
  }
  ExpectLimiterDrains(**limiter);
  const Stats s = (*limiter)->GetStats();
  EXPECT_LE(s.peak_in_flight, 3u);
  EXPECT_LE(s.peak_retained_count, 6u);
  EXPECT_EQ(s.ranges_delivered, 400u);
}

// Wide reads (what a coalescing planner issues): every slice keeps its bytes
// for as long as the caller holds it, while later reads may reuse buffers
// released before. Pass 1's slices are held through passes 2 (released as
// read) and 3 (held), then checked again.
TEST_P(SourceConformanceTest, SlicesKeepTheirBytesWhileHeld) {
  OPEN_OR_SKIP(o);
  std::mt19937_64 rng(9);
  std::vector<ByteRange> ranges;
  for (int i = 0; i < 40; ++i) {
    const uint64_t len = (64 << 10) + rng() % ((1 << 20) - (64 << 10));
    ranges.push_back({rng() % (kN - len + 1), len});
  }
  Reader reader = OpenReader(o.source, LimitOptions(4, 128, 128 << 20));
  std::vector<DrainResult> held;
  for (bool keep : {true, false, true}) {
    auto stream = reader.ReadRanges(ranges, Delivery::kAsCompleted);
    ASSERT_TRUE(stream.ok()) << stream.status().ToString();
    held.push_back(Drain(*stream, ranges, keep));
    const DrainResult& out = held.back();
    ASSERT_TRUE(out.status.ok()) << out.status.ToString();
    EXPECT_EQ(out.bad_bytes, 0u);
    ASSERT_EQ(out.indexes.size(), ranges.size());
  }
  for (const DrainResult& out : held) {
    for (size_t i = 0; i < out.slices.size(); ++i) {
      EXPECT_TRUE(Matches(ranges[out.indexes[i]], out.slices[i]))
          << ranges[out.indexes[i]].ToString();
    }
  }
}

// A slice keeps its bytes after the source that read it is gone.
TEST_P(SourceConformanceTest, SlicesOutliveTheSource) {
  const std::vector<ByteRange> ranges = {{256, 256}, {1000, 100'000}};
  std::vector<Slice> kept;
  {
    OPEN_OR_SKIP(o);
    CollectingSink sink;
    for (size_t i = 0; i < ranges.size(); ++i) {
      o.source->Read(ranges[i], &sink, i);
    }
    ASSERT_TRUE(sink.WaitFor(ranges.size(), testing::kHangGuard));
    for (size_t i = 0; i < ranges.size(); ++i) {
      auto d = sink.Get(i);
      ASSERT_TRUE(d.bytes.ok()) << d.bytes.status().ToString();
      kept.push_back(*d.bytes);
    }
  }
  for (size_t i = 0; i < ranges.size(); ++i) {
    EXPECT_TRUE(Matches(ranges[i], kept[i])) << ranges[i].ToString();
  }
}

// A stream cancelled, or dropped, mid-way with reads in flight: the reads in
// flight complete into the void, every permit and budget byte comes back,
// the reads never admitted are never issued, and the reader still reads.
TEST_P(SourceConformanceTest, CancelledOrDroppedStreamReturnsEveryPermit) {
  OPEN_OR_SKIP(o);
  constexpr uint32_t kC = 8;
  Reader reader = OpenReader(o.source, LimitOptions(kC));
  const auto ranges = SpreadRanges(250, 4000, 4096, 3);
  for (bool cancel : {true, false}) {
    SCOPED_TRACE(cancel ? "cancelled" : "dropped");
    const uint64_t reads_before = reader.limiter()->GetStats().physical_reads;
    {
      auto stream = reader.ReadRanges(ranges, Delivery::kAsCompleted);
      ASSERT_TRUE(stream.ok()) << stream.status().ToString();
      for (int i = 0; i < 10; ++i) {
        auto next = stream->Next();
        ASSERT_TRUE(next.ok() && next->has_value()) << next.status().ToString();
        EXPECT_TRUE(Matches(ranges[(*next)->index], (*next)->bytes));
      }
      if (cancel) {
        stream->Cancel();
        EXPECT_EQ(stream->Next().status().code(), StatusCode::kCancelled);
      }
    }
    ExpectLimiterDrains(*reader.limiter());
    EXPECT_LT(reader.limiter()->GetStats().physical_reads - reads_before,
              ranges.size());
  }
  EXPECT_LE(reader.limiter()->GetStats().peak_in_flight, kC);

  const std::vector<ByteRange> again = {{kN - 10, 10}};
  auto stream = reader.ReadRanges(again);
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  DrainResult out = Drain(*stream, again);
  EXPECT_TRUE(out.status.ok()) << out.status.ToString();
  EXPECT_EQ(out.indexes.size(), 1u);
  EXPECT_EQ(out.bad_bytes, 0u);
}

// The stream is the last owner of the source and is dropped with reads in
// flight: the backend's own thread may then destroy the source from inside
// a completion, which must neither deadlock (joining itself) nor leak.
TEST_P(SourceConformanceTest, SourceReleasedFromItsOwnCompletion) {
  std::weak_ptr<Source> weak;
  std::shared_ptr<Limiter> limiter;
  {
    OPEN_OR_SKIP(o);
    weak = o.source;
    Reader reader = OpenReader(o.source, LimitOptions(4));
    limiter = reader.limiter();
    const auto ranges = SpreadRanges(200, 1000, 4096);
    auto stream = reader.ReadRanges(ranges, Delivery::kAsCompleted);
    ASSERT_TRUE(stream.ok()) << stream.status().ToString();
    auto first = stream->Next();
    ASSERT_TRUE(first.ok() && first->has_value());
    o.source.reset();
    // `reader` and `stream` go out of scope here: the stream's in-flight
    // reads hold the last reference.
  }
  EXPECT_TRUE(WaitUntil([&] { return weak.expired(); }));
  ExpectLimiterDrains(*limiter);
}

// ReadMany is Read for each request: every read completes exactly once with
// its bytes. Assist runs at most what it is asked for, and nothing once
// every read has completed.
TEST_P(SourceConformanceTest, ReadManyCompletesEachReadOnce) {
  OPEN_OR_SKIP(o);
  constexpr size_t kReads = 64;
  std::vector<ReadRequest> reads;
  for (size_t i = 0; i < kReads; ++i)
    reads.push_back({{i * 8192 + 100, 4000}, i});
  CollectingSink sink;
  o.source->ReadMany(reads, &sink);
  EXPECT_LE(o.source->Assist(3), 3u);
  ASSERT_TRUE(sink.WaitFor(kReads, testing::kHangGuard));
  EXPECT_EQ(sink.duplicates(), 0u);
  for (const ReadRequest& r : reads) {
    auto d = sink.Get(r.tag);
    ASSERT_TRUE(d.bytes.ok()) << d.bytes.status().ToString();
    EXPECT_TRUE(Matches(r.range, *d.bytes)) << r.range.ToString();
  }
  EXPECT_EQ(o.source->Assist(8), 0u) << "nothing is left queued";
}

}  // namespace
}  // namespace rangeio
