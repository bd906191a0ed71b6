// Reader::ReadRanges: delivery order, exactly once, the bytes, bad input.
//
// The invariants of ARCHITECTURE.md, proved with an instrumented source
// whose reads the test completes one by one:
//
//   1. in-flight reads never exceed C            -> PeakInFlight*, Chunked*
//   2. retained responses stay within the budget  -> Stalling*, ByteBudget*,
//      and a read larger than the budget is admitted alone -> LargeRead*
//   3. every permit comes back exactly once       -> Failing*, Drop*, Cancel*
//   4. a completion admits the next read at once  -> Rolling*
//   5. exactly once, exactly the bytes, or an error naming the range
//                                                 -> Ordered*, AsCompleted*,
//                                                    ExactlyOnce*, Failing*
//   6. dropping a stream or reader leaks nothing  -> Drop*
// This file holds 5 (and the Reader's argument checks);
// reader_admission_test.cc 1, 2 and 4; reader_cancel_test.cc 3, 6 and the
// failures of 5. (Limiter-wide bounds across readers and clones:
// limiter_test.cc.)
#include "rangeio/reader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <random>
#include <vector>

#include "rangeio/rangeio.h"
#include "support/gated_source.h"
#include "support/test_util.h"

namespace rangeio {
namespace {

using std::chrono::milliseconds;
using ::testing::AnyOf;
using testing::ExpectEachIndexOnce;
using testing::ExpectLimiterDrains;
using testing::GatedSource;
using ::testing::HasSubstr;
using testing::Iota;
using testing::LimitOptions;
using testing::OpenReader;
using testing::SpreadRanges;
using testing::StreamConsumer;
using testing::WaitUntil;

// --- 5. Ordering and exactly-once delivery ---------------------------------

TEST(ReaderTest, OrderedDeliversInRequestOrderWhenReadsCompleteInReverse) {
  constexpr uint32_t kN = 8;
  auto gate = GatedSource::Make("gate", 1ull << 36);
  Reader reader = OpenReader(gate, LimitOptions(kN));
  const auto ranges = SpreadRanges(kN, 24);
  auto stream = reader.ReadRanges(ranges, Delivery::kOrdered);
  ASSERT_TRUE(stream.ok());
  StreamConsumer consumer(std::move(*stream), ranges);
  ASSERT_TRUE(gate->WaitForOutstanding(kN));
  for (size_t i = kN - 1; i >= 1; --i) {
    ASSERT_TRUE(gate->ReleaseOffset(ranges[i].offset)) << i;
  }
  testing::GiveThreadsAChance();
  EXPECT_EQ(consumer.count(), 0u) << "delivered before index 0 completed";
  ASSERT_TRUE(gate->ReleaseOffset(ranges[0].offset));
  ASSERT_TRUE(consumer.WaitForDone());
  EXPECT_TRUE(consumer.final_status().ok());
  EXPECT_EQ(consumer.indexes(), Iota(kN));
  EXPECT_EQ(consumer.bad_bytes(), 0u);
}

TEST(ReaderTest, OrderedUnderRandomCompletionOrder) {
  auto gate = GatedSource::Make("gate", 1ull << 36);
  Reader reader = OpenReader(gate, LimitOptions(4, 8));
  const auto ranges = SpreadRanges(60, 40);
  auto stream = reader.ReadRanges(ranges, Delivery::kOrdered);
  ASSERT_TRUE(stream.ok());
  StreamConsumer consumer(std::move(*stream), ranges);
  std::mt19937 rng(7);
  while (true) {
    ASSERT_TRUE(WaitUntil([&] { return gate->held() > 0 || consumer.done(); }));
    if (consumer.done()) break;
    auto held = gate->held_ranges();
    if (held.empty()) continue;
    gate->ReleaseOffset(held[rng() % held.size()].offset);
  }
  EXPECT_TRUE(consumer.final_status().ok())
      << consumer.final_status().ToString();
  EXPECT_EQ(consumer.indexes(), Iota(ranges.size()));
  EXPECT_EQ(consumer.bad_bytes(), 0u);
  EXPECT_LE(reader.limiter()->GetStats().peak_retained_count, 8u);
  EXPECT_EQ(gate->peak_outstanding(), 4u);
}

TEST(ReaderTest, AsCompletedDeliversInCompletionOrder) {
  constexpr uint32_t kN = 6;
  auto gate = GatedSource::Make("gate", 1ull << 36);
  Reader reader = OpenReader(gate, LimitOptions(kN));
  const auto ranges = SpreadRanges(kN, 24);
  auto stream = reader.ReadRanges(ranges, Delivery::kAsCompleted);
  ASSERT_TRUE(stream.ok());
  StreamConsumer consumer(std::move(*stream), ranges);
  ASSERT_TRUE(gate->WaitForOutstanding(kN));
  const std::vector<size_t> order = {3, 0, 5, 1, 4, 2};
  for (size_t k = 0; k < order.size(); ++k) {
    ASSERT_TRUE(gate->ReleaseOffset(ranges[order[k]].offset));
    ASSERT_TRUE(consumer.WaitForCount(k + 1));
    EXPECT_EQ(consumer.indexes()[k], order[k]) << "position " << k;
  }
  ASSERT_TRUE(consumer.WaitForDone());
  EXPECT_TRUE(consumer.final_status().ok());
  EXPECT_EQ(consumer.indexes(), order);
  EXPECT_EQ(consumer.bad_bytes(), 0u);
}

TEST(ReaderTest, AsCompletedUnderRandomCompletionOrder) {
  auto gate = GatedSource::Make("gate", 1ull << 36);
  Reader reader = OpenReader(gate, LimitOptions(4));
  const auto ranges = SpreadRanges(40, 40);
  auto stream = reader.ReadRanges(ranges, Delivery::kAsCompleted);
  ASSERT_TRUE(stream.ok());
  StreamConsumer consumer(std::move(*stream), ranges);
  std::map<uint64_t, size_t> index_of;
  for (size_t i = 0; i < ranges.size(); ++i) index_of[ranges[i].offset] = i;
  std::mt19937 rng(11);
  std::vector<size_t> released;
  while (released.size() < ranges.size()) {
    ASSERT_TRUE(
        gate->WaitFor([](const GatedSource& g) { return g.held() > 0; }));
    auto held = gate->held_ranges();
    uint64_t off = held[rng() % held.size()].offset;
    ASSERT_TRUE(gate->ReleaseOffset(off));
    released.push_back(index_of[off]);
    ASSERT_TRUE(consumer.WaitForCount(released.size()));
  }
  ASSERT_TRUE(consumer.WaitForDone());
  EXPECT_TRUE(consumer.final_status().ok());
  EXPECT_EQ(consumer.indexes(), released);
  EXPECT_EQ(consumer.bad_bytes(), 0u);
}

// Duplicates, overlaps, adjacency, zero lengths, unsorted input: each
// requested range once, with exactly its bytes, from both memory modes.
TEST(ReaderTest, ExactlyOnceWithRightBytesFromMemory) {
  constexpr size_t kSize = 256 * 1024;
  Slice buffer = testing::PatternBuffer(kSize);
  std::mt19937_64 rng(1234);
  std::vector<ByteRange> ranges;
  for (int i = 0; i < 1500; ++i) {
    uint64_t len = (i % 50 == 0) ? 0 : 1 + rng() % 3000;
    uint64_t off = rng() % (kSize - len + 1);
    ranges.push_back({off, len});
  }
  ranges.push_back(ranges[10]);                                  // duplicate
  ranges.push_back({ranges[11].offset, ranges[11].length / 2});  // overlap
  ranges.push_back({100, 50});  // adjacent pair
  ranges.push_back({150, 50});
  ranges.push_back({0, kSize});      // the whole buffer
  ranges.push_back({kSize - 1, 1});  // the last byte
  ranges.push_back({kSize, 0});      // empty, at the end
  for (bool zero_copy : {true, false}) {
    auto source = MakeMemorySource("mem", buffer, zero_copy);
    Reader reader = OpenReader(source, LimitOptions(3, 5, 64 * 1024));
    for (Delivery d : {Delivery::kOrdered, Delivery::kAsCompleted}) {
      SCOPED_TRACE(::testing::Message()
                   << "zero_copy=" << zero_copy
                   << " ordered=" << (d == Delivery::kOrdered));
      auto stream = reader.ReadRanges(ranges, d);
      ASSERT_TRUE(stream.ok()) << stream.status().ToString();
      EXPECT_EQ(stream->size(), ranges.size());
      size_t bad = 0;
      std::vector<size_t> idx;
      while (true) {
        auto next = stream->Next();
        ASSERT_TRUE(next.ok()) << next.status().ToString();
        if (!next->has_value()) break;
        const RangeResult& r = **next;
        ASSERT_LT(r.index, ranges.size());
        if (!testing::MatchesPattern(ranges[r.index], r.bytes.span())) ++bad;
        idx.push_back(r.index);
      }
      EXPECT_EQ(bad, 0u);
      if (d == Delivery::kOrdered) {
        EXPECT_EQ(idx, Iota(ranges.size()));
      } else {
        ExpectEachIndexOnce(idx, ranges.size());
      }
      Stats s = reader.limiter()->GetStats();
      EXPECT_LE(s.peak_in_flight, 3u);
      EXPECT_LE(s.peak_retained_count, 5u);
    }
    ExpectLimiterDrains(*reader.limiter());
  }
}

// Reads that complete inline (a memory source) do not run ahead of the
// consumer up to the whole response budget: after the first pass (C reads)
// at most a few results wait, in both delivery modes; every range still
// comes exactly once with its bytes, and a consumer that holds every slice
// still ends with the budget's clear error rather than a hang.
TEST(ReaderTest, InlineReadsWaitForTheConsumerAFewAtATime) {
  constexpr size_t kSize = 1 << 20;
  constexpr uint32_t kC = 16;
  constexpr uint32_t kBudget = 64;
  Slice buffer = testing::PatternBuffer(kSize);
  std::vector<ByteRange> ranges;
  for (uint64_t i = 0; i < 2000; ++i)
    ranges.push_back({(i * 509) % (kSize - 100), 100});
  for (Delivery d : {Delivery::kOrdered, Delivery::kAsCompleted}) {
    SCOPED_TRACE(d == Delivery::kOrdered ? "ordered" : "as-completed");
    Reader reader = OpenReader(MakeMemorySource("mem", buffer, false),
                               LimitOptions(kC, kBudget, 1 << 20));
    auto stream = reader.ReadRanges(ranges, d);
    ASSERT_TRUE(stream.ok()) << stream.status().ToString();
    uint64_t most_waiting = 0;
    size_t bad = 0;
    std::vector<size_t> idx;
    for (;;) {
      auto next = stream->Next();
      ASSERT_TRUE(next.ok()) << next.status().ToString();
      if (!next->has_value()) break;
      const RangeResult& r = **next;
      if (!testing::MatchesPattern(ranges[r.index], r.bytes.span())) ++bad;
      idx.push_back(r.index);
      // Retained now: this result and those waiting behind it.
      if (idx.size() > kC) {
        most_waiting = std::max(
            most_waiting, reader.limiter()->GetStats().retained_count - 1);
      }
    }
    EXPECT_EQ(bad, 0u);
    ExpectEachIndexOnce(idx, ranges.size());
    // Paused at 8 waiting, resumed at 4 with a pass of 8: at most 12.
    EXPECT_LE(most_waiting, 12u);
    EXPECT_GE(most_waiting, 4u);  // it did read ahead
    EXPECT_EQ(reader.limiter()->GetStats().peak_in_flight, kC);
    ExpectLimiterDrains(*reader.limiter());
  }
  // Holding every slice: the budget fills and the stream says so.
  Options o = LimitOptions(kC, kBudget, 1 << 20);
  o.reader.response_stall_timeout = milliseconds(50);
  Reader reader = OpenReader(MakeMemorySource("mem", buffer, false), o);
  auto stream = reader.ReadRanges(ranges, Delivery::kAsCompleted);
  ASSERT_TRUE(stream.ok());
  std::vector<Slice> held;
  Status end;
  for (;;) {
    auto next = stream->Next();
    if (!next.ok()) {
      end = next.status();
      break;
    }
    ASSERT_TRUE(next->has_value()) << "ended without the budget's error";
    held.push_back(std::move((*next)->bytes));
  }
  EXPECT_EQ(end.code(), StatusCode::kResourceExhausted) << end.ToString();
  EXPECT_EQ(held.size(), kBudget);
}

TEST(ReaderTest, ExactlyOnceWithRightBytesFromSimulatedStore) {
  auto source = MakeSimulatedSource(
      "sim://bucket/obj", 8 << 20,
      LatencyModel::EveryKth(std::chrono::microseconds(100),
                             std::chrono::microseconds(900), 7));
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  Reader reader = OpenReader(*source, LimitOptions(16));
  std::mt19937_64 rng(99);
  std::vector<ByteRange> ranges;
  for (int i = 0; i < 400; ++i) {
    uint64_t len = rng() % 5000;
    ranges.push_back({rng() % ((8 << 20) - len), len});
  }
  for (Delivery d : {Delivery::kOrdered, Delivery::kAsCompleted}) {
    auto stream = reader.ReadRanges(ranges, d);
    ASSERT_TRUE(stream.ok());
    auto out = testing::Drain(*stream, ranges, SimulatedByteAt);
    ASSERT_TRUE(out.status.ok()) << out.status.ToString();
    if (d == Delivery::kOrdered) {
      EXPECT_EQ(out.indexes, Iota(ranges.size()));
    } else {
      ExpectEachIndexOnce(out.indexes, ranges.size());
    }
    EXPECT_EQ(out.bad_bytes, 0u);
  }
  EXPECT_LE(reader.limiter()->GetStats().peak_in_flight, 16u);
}

TEST(ReaderTest, ZeroLengthRangeYieldsEmptyBytes) {
  auto gate = GatedSource::Make("gate", 1000, GatedSource::Mode::kPassAsync);
  Reader reader = OpenReader(gate, LimitOptions(2));
  const std::vector<ByteRange> ranges = {{5, 0}, {10, 3}, {1000, 0}, {0, 0}};
  auto stream = reader.ReadRanges(ranges);
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  auto out = testing::Drain(*stream, {}, nullptr, /*keep_slices=*/true);
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  ASSERT_EQ(out.indexes, Iota(4));
  EXPECT_TRUE(out.slices[0].empty());
  EXPECT_EQ(out.slices[0].size(), 0u);
  EXPECT_TRUE(testing::MatchesPattern(ranges[1], out.slices[1].span()));
  EXPECT_TRUE(out.slices[2].empty());
  EXPECT_TRUE(out.slices[3].empty());
  EXPECT_EQ(reader.GetStats().ranges_delivered, 4u);
  EXPECT_EQ(reader.GetStats().logical_bytes, 3u);
}

TEST(ReaderTest, EmptyRequestEndsImmediately) {
  auto gate = GatedSource::Make("gate", 1000);
  Reader reader = OpenReader(gate, LimitOptions(2));
  for (Delivery d : {Delivery::kOrdered, Delivery::kAsCompleted}) {
    auto stream = reader.ReadRanges({}, d);
    ASSERT_TRUE(stream.ok());
    EXPECT_EQ(stream->size(), 0u);
    auto next = stream->Next();
    ASSERT_TRUE(next.ok()) << next.status().ToString();
    EXPECT_FALSE(next->has_value());
    auto again = stream->Next();
    ASSERT_TRUE(again.ok());
    EXPECT_FALSE(again->has_value());
  }
  EXPECT_EQ(gate->reads_started(), 0u);
}

// --- Bad input: rejected before any I/O --------------------------------------

TEST(ReaderTest, RangePastTheEndIsOutOfRangeBeforeAnyIo) {
  auto gate = GatedSource::Make("bucket/key.bin", 1000);
  Reader reader = OpenReader(gate, LimitOptions(2));
  std::vector<ByteRange> ranges = {{0, 10}, {100, 10}, {995, 10}, {20, 10}};
  auto stream = reader.ReadRanges(ranges);
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().code(), StatusCode::kOutOfRange);
  EXPECT_THAT(stream.status().message(), HasSubstr("bucket/key.bin"));
  EXPECT_THAT(stream.status().message(), HasSubstr("[995, 1005)"));
  testing::GiveThreadsAChance();
  EXPECT_EQ(gate->reads_started(), 0u);

  const std::vector<ByteRange> past = {{1001, 0}};
  EXPECT_EQ(reader.ReadRanges(past).status().code(), StatusCode::kOutOfRange);
}

TEST(ReaderTest, OverflowingRangeIsRejectedBeforeAnyIo) {
  auto gate = GatedSource::Make("g", UINT64_MAX);
  Reader reader = OpenReader(gate, LimitOptions(2));
  // Built by hand, bypassing ByteRange::Make: offset + length wraps.
  const std::vector<ByteRange> ranges = {{0, 10}, {UINT64_MAX - 4, 10}};
  auto stream = reader.ReadRanges(ranges);
  ASSERT_FALSE(stream.ok());
  EXPECT_THAT(stream.status().code(),
              AnyOf(StatusCode::kInvalidArgument, StatusCode::kOutOfRange));
  EXPECT_THAT(stream.status().message(), HasSubstr("18446744073709551611"));
  EXPECT_EQ(gate->reads_started(), 0u);
}

TEST(ReaderTest, SourceSizeErrorIsReported) {
  auto gate = GatedSource::Make("g", 1000);
  gate->FailSize(Status::IoError("HEAD failed: 503"));
  auto reader = Reader::Open(gate, LimitOptions(2));
  if (!reader.ok()) {  // Open may ask the size up front
    EXPECT_EQ(reader.status().code(), StatusCode::kIoError);
    return;
  }
  const std::vector<ByteRange> ranges = {{0, 10}};
  auto stream = reader->ReadRanges(ranges);
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().code(), StatusCode::kIoError);
  EXPECT_THAT(stream.status().message(), HasSubstr("503"));
  EXPECT_EQ(gate->reads_started(), 0u);
}

TEST(ReaderTest, OpenRejectsBadArguments) {
  auto none = Reader::Open(nullptr);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);

  auto gate = GatedSource::Make("g", 10);
  auto bad = Reader::Open(gate, LimitOptions(0));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("io-concurrency"));

  Options stall;
  stall.reader.response_stall_timeout = milliseconds(0);
  auto bad_stall = Reader::Open(gate, stall);
  ASSERT_FALSE(bad_stall.ok());
  EXPECT_THAT(bad_stall.status().message(),
              HasSubstr("response-stall-timeout-ms"));
}

TEST(ReaderTest, StreamIsMovable) {
  auto source = MakeMemorySource("mem", testing::PatternBuffer(1000));
  Reader reader = OpenReader(source, LimitOptions(2));
  const auto ranges = SpreadRanges(5, 10, 100);
  auto stream = reader.ReadRanges(ranges);
  ASSERT_TRUE(stream.ok());
  RangeStream a = std::move(*stream);
  auto first = a.Next();
  ASSERT_TRUE(first.ok() && first->has_value());
  EXPECT_EQ((*first)->index, 0u);
  RangeStream b = std::move(a);
  auto rest = testing::Drain(b, ranges);
  EXPECT_TRUE(rest.status.ok()) << rest.status.ToString();
  EXPECT_EQ(rest.bad_bytes, 0u);
  EXPECT_EQ(rest.indexes, (std::vector<size_t>{1, 2, 3, 4}));
}

// Bug 2: a range longer than the machine's memory (1 TiB, 2^62 bytes) is a
// clear error naming it before any read, on every backend, never an abort
// from the buffer allocation (in Next(), or on a backend's own thread).
TEST(ReaderTest, RangeLongerThanMemoryIsAnErrorNotAnAbort) {
  std::vector<std::shared_ptr<Source>> sources;
  auto sim = MakeSimulatedSource("sim", uint64_t{1} << 63,
                                 LatencyModel::Fixed(milliseconds(1)));
  ASSERT_TRUE(sim.ok()) << sim.status().ToString();
  sources.push_back(*sim);
  testing::ScratchDir dir;
  const std::string path = dir.WriteFile("sparse.bin", 16);
  // A sparse file of 2^62 bytes where the file system allows it.
  if (::truncate(path.c_str(), int64_t{1} << 62) == 0 ||
      ::truncate(path.c_str(), int64_t{1} << 42) == 0) {
    auto local = OpenLocalFile(path);
    ASSERT_TRUE(local.ok()) << local.status().ToString();
    sources.push_back(*local);
  }
  for (const auto& source : sources) {
    Reader reader = OpenReader(source);
    const uint64_t size = *source->Size();
    for (uint64_t len : {uint64_t{1} << 40, uint64_t{1} << 62}) {
      if (len > size) continue;
      const std::vector<ByteRange> ranges = {{0, 10}, {0, len}};
      auto stream = reader.ReadRanges(ranges);
      const Status st =
          stream.ok() ? testing::Drain(*stream).status : stream.status();
      EXPECT_EQ(st.code(), StatusCode::kResourceExhausted)
          << source->name() << ": " << st.ToString();
      EXPECT_THAT(st.message(), HasSubstr(std::to_string(len)));
      EXPECT_THAT(st.message(), HasSubstr("range 1"));
    }
    ExpectLimiterDrains(*reader.limiter());
  }
}

}  // namespace
}  // namespace rangeio
