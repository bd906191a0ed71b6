// Reader failures, Cancel and drop: errors name the range, nothing leaks.
//
// Invariants 3 and 6 of ARCHITECTURE.md and the error half of 5 (the map:
// reader_test.cc): every permit comes back exactly once, a failed read
// ends the stream with an error naming its range, and dropping a stream
// or reader leaks nothing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <vector>

#include "rangeio/rangeio.h"
#include "rangeio/reader.h"
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

// --- Errors ----------------------------------------------------------------

TEST(ReaderTest, FailingReadEndsStreamNamingRangeAndReturnsPermits) {
  auto gate = GatedSource::Make("flaky-object", 1ull << 36);
  Reader reader = OpenReader(gate, LimitOptions(2));
  const auto ranges = SpreadRanges(6, 48);
  gate->FailOffset(ranges[3].offset, "disk on fire");
  auto stream = reader.ReadRanges(ranges, Delivery::kOrdered);
  ASSERT_TRUE(stream.ok());
  gate->SetMode(GatedSource::Mode::kPassAsync);
  auto out = testing::Drain(*stream, ranges);
  ASSERT_FALSE(out.status.ok());
  EXPECT_EQ(out.status.code(), StatusCode::kIoError);
  EXPECT_THAT(out.status.message(), HasSubstr(ranges[3].ToString()));
  EXPECT_THAT(out.status.message(), HasSubstr("flaky-object"));
  EXPECT_THAT(out.status.message(), HasSubstr("disk on fire"));
  EXPECT_EQ(out.indexes, Iota(3)) << "results before the failed one";
  EXPECT_EQ(out.bad_bytes, 0u);
  // Sticky.
  auto again = stream->Next();
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status(), out.status);

  ExpectLimiterDrains(*reader.limiter());

  // The next read on the same limiter succeeds.
  std::vector<ByteRange> good = ranges;
  good.erase(good.begin() + 3);
  auto retry = reader.ReadRanges(good, Delivery::kAsCompleted);
  ASSERT_TRUE(retry.ok());
  auto ok = testing::Drain(*retry, good);
  EXPECT_TRUE(ok.status.ok()) << ok.status.ToString();
  EXPECT_EQ(ok.bad_bytes, 0u);
  ExpectEachIndexOnce(ok.indexes, good.size());
  EXPECT_EQ(reader.GetStats().read_errors, 1u);
}

TEST(ReaderTest, FailingReadAsCompletedNamesRange) {
  auto gate = GatedSource::Make("flaky-object", 1ull << 36);
  Reader reader = OpenReader(gate, LimitOptions(4));
  const auto ranges = SpreadRanges(4, 48);
  gate->FailOffset(ranges[2].offset);
  auto stream = reader.ReadRanges(ranges, Delivery::kAsCompleted);
  ASSERT_TRUE(stream.ok());
  StreamConsumer consumer(std::move(*stream), ranges);
  ASSERT_TRUE(gate->WaitForOutstanding(4));
  ASSERT_TRUE(gate->ReleaseOffset(ranges[0].offset));
  ASSERT_TRUE(consumer.WaitForCount(1));
  ASSERT_TRUE(gate->ReleaseOffset(ranges[2].offset));
  ASSERT_TRUE(consumer.WaitForDone());
  Status st = consumer.final_status();
  EXPECT_EQ(st.code(), StatusCode::kIoError);
  EXPECT_THAT(st.message(), HasSubstr(ranges[2].ToString()));
  EXPECT_THAT(st.message(), HasSubstr("flaky-object"));
  EXPECT_EQ(consumer.indexes(), std::vector<size_t>{0});
  // The error ends the stream, which cancels its two reads still held in
  // the backend (Source::Cancel with kAllReads): their permits come back
  // without waiting for them.
  EXPECT_EQ(gate->cancelled(), 2u);
  EXPECT_EQ(gate->held(), 0u);
  ExpectLimiterDrains(*reader.limiter());
  EXPECT_EQ(gate->reads_started(), 4u) << "work admitted after the error";
}

// A backend that finishes reads in bursts hands each burst over with one
// OnReadsDone: every result arrives once with its bytes, in order where
// asked, the bounds hold, a failure in a burst ends the stream naming its
// range while the burst's other reads still return their permits, and the
// stats count every read of the bursts.
TEST(ReaderTest, BatchedCompletionsDeliverEachResultOnce) {
  for (Delivery delivery : {Delivery::kOrdered, Delivery::kAsCompleted}) {
    constexpr uint32_t kC = 8;
    auto gate = GatedSource::Make("bursty", 1ull << 36);
    Reader reader = OpenReader(gate, LimitOptions(kC));
    const auto ranges = SpreadRanges(200, 512);
    auto stream = reader.ReadRanges(ranges, delivery);
    ASSERT_TRUE(stream.ok());
    StreamConsumer consumer(std::move(*stream), ranges);
    const auto deadline =
        std::chrono::steady_clock::now() + milliseconds(10'000);
    while (!consumer.done()) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline)
          << "stream stuck with " << gate->held() << " reads held, "
          << consumer.count() << " delivered";
      if (!gate->WaitFor([](const GatedSource& g) { return g.held() > 0; },
                         milliseconds(50))) {
        continue;
      }
      // Bursts of up to 5, the oldest first.
      ASSERT_LE(gate->held(), kC);
      gate->ReleaseOldestTogether(5);
    }
    EXPECT_TRUE(consumer.final_status().ok())
        << consumer.final_status().ToString();
    EXPECT_EQ(consumer.bad_bytes(), 0u);
    if (delivery == Delivery::kOrdered) {
      EXPECT_EQ(consumer.indexes(), Iota(ranges.size()));
    } else {
      ExpectEachIndexOnce(consumer.indexes(), ranges.size());
    }
    const Stats st = reader.limiter()->GetStats();
    EXPECT_EQ(st.peak_in_flight, kC);
    EXPECT_LE(st.peak_retained_count, 2 * kC);
    EXPECT_EQ(st.physical_reads, ranges.size());
    EXPECT_EQ(reader.GetStats().physical_reads, ranges.size());
    EXPECT_EQ(reader.GetStats().ranges_delivered, ranges.size());
    ExpectLimiterDrains(*reader.limiter());
  }

  // A failure inside a burst.
  auto gate = GatedSource::Make("bursty", 1ull << 36);
  Reader reader = OpenReader(gate, LimitOptions(4));
  const auto ranges = SpreadRanges(12, 64);
  gate->FailOffset(ranges[2].offset, "bad sector");
  auto stream = reader.ReadRanges(ranges, Delivery::kOrdered);
  ASSERT_TRUE(stream.ok());
  StreamConsumer consumer(std::move(*stream), ranges);
  ASSERT_TRUE(gate->WaitForHeld(4));
  EXPECT_EQ(gate->ReleaseOldestTogether(4), 4u);
  ASSERT_TRUE(consumer.WaitForDone());
  EXPECT_EQ(consumer.final_status().code(), StatusCode::kIoError);
  EXPECT_THAT(consumer.final_status().message(),
              HasSubstr(ranges[2].ToString()));
  EXPECT_THAT(consumer.final_status().message(), HasSubstr("bad sector"));
  EXPECT_EQ(consumer.indexes(), Iota(2));
  gate->ReleaseAll();
  ExpectLimiterDrains(*reader.limiter());
  EXPECT_EQ(gate->reads_started(), 4u) << "work admitted after the error";
  EXPECT_EQ(reader.GetStats().read_errors, 1u);
}

// --- 3 and 6. Cancellation and drop ---------------------------------------

TEST(ReaderTest, DroppingStreamMidwayLeaksNothing) {
  constexpr uint32_t kC = 4;
  auto gate = GatedSource::Make("gate", 1ull << 36);
  Reader reader = OpenReader(gate, LimitOptions(kC));
  const auto& limiter = *reader.limiter();
  const auto ranges = SpreadRanges(50, 64);
  Slice kept;
  {
    auto stream = reader.ReadRanges(ranges, Delivery::kOrdered);
    ASSERT_TRUE(stream.ok());
    testing::ScopedThread first([&] {
      auto n = stream->Next();
      ASSERT_TRUE(n.ok()) << n.status().ToString();
      ASSERT_TRUE(n->has_value());
      EXPECT_EQ((*n)->index, 0u);
      kept = (*n)->bytes;
    });
    ASSERT_TRUE(gate->WaitForOutstanding(kC));
    ASSERT_TRUE(gate->ReleaseOffset(ranges[0].offset));
    first.join();
    ASSERT_TRUE(gate->WaitForStarted(kC + 1));
    ASSERT_TRUE(gate->WaitForOutstanding(kC));
    EXPECT_EQ(limiter.GetStats().in_flight, kC);
    // The stream goes out of scope with kC reads held in the gate.
  }
  EXPECT_EQ(limiter.GetStats().waiting_streams, 0u);
  EXPECT_GE(limiter.GetStats().retained_count, 1u) << "the kept slice";
  gate->ReleaseAll();
  EXPECT_TRUE(WaitUntil([&] { return limiter.GetStats().in_flight == 0; }));
  testing::GiveThreadsAChance();
  EXPECT_EQ(gate->reads_started(), kC + 1) << "reads admitted after drop";
  // Only the slice the caller kept is still retained, and it is intact.
  EXPECT_EQ(limiter.GetStats().retained_count, 1u);
  EXPECT_EQ(limiter.GetStats().retained_bytes, 64u);
  EXPECT_TRUE(testing::MatchesPattern(ranges[0], kept.span()));
  kept.Reset();
  ExpectLimiterDrains(limiter);
  EXPECT_EQ(reader.GetStats().reads_cancelled, kC);
  // Reads that completed after the drop still count as physical reads, in
  // the reader's stats as in the limiter's.
  EXPECT_EQ(reader.GetStats().physical_reads, kC + 1);
  EXPECT_EQ(reader.GetStats().read_latency.count(), kC + 1);
  EXPECT_EQ(limiter.GetStats().physical_reads, kC + 1);

  // The limiter is whole again.
  gate->SetMode(GatedSource::Mode::kPassAsync);
  auto again = reader.ReadRanges(ranges, Delivery::kAsCompleted);
  ASSERT_TRUE(again.ok());
  auto out = testing::Drain(*again, ranges);
  EXPECT_TRUE(out.status.ok()) << out.status.ToString();
  EXPECT_EQ(out.indexes.size(), ranges.size());
  EXPECT_EQ(out.bad_bytes, 0u);
}

TEST(ReaderTest, DroppingStreamWithUndeliveredResultsReturnsTheirBudget) {
  auto gate = GatedSource::Make("gate", 1ull << 36);
  Reader reader = OpenReader(gate, LimitOptions(4));
  const auto ranges = SpreadRanges(10, 64);
  {
    auto stream = reader.ReadRanges(ranges, Delivery::kOrdered);
    ASSERT_TRUE(stream.ok());
    testing::ScopedThread consumer([&] { (void)stream->Next(); });
    ASSERT_TRUE(gate->WaitForOutstanding(4));
    // Complete 1, 2, 3 (undelivered: 0 is the head) then 0.
    for (size_t i : {1, 2, 3, 0})
      ASSERT_TRUE(gate->ReleaseOffset(ranges[i].offset));
    consumer.join();
  }
  gate->ReleaseAll();
  ExpectLimiterDrains(*reader.limiter());
  EXPECT_EQ(gate->outstanding(), 0u);
}

TEST(ReaderTest, CancelReturnsEveryPermitAndLaterNextIsCancelled) {
  auto gate = GatedSource::Make("gate", 1ull << 36);
  Reader reader = OpenReader(gate, LimitOptions(3));
  const auto ranges = SpreadRanges(10, 64);
  auto stream = reader.ReadRanges(ranges, Delivery::kAsCompleted);
  ASSERT_TRUE(stream.ok());
  testing::ScopedThread first([&] {
    auto n = stream->Next();
    EXPECT_TRUE(n.ok() && n->has_value());
  });
  ASSERT_TRUE(gate->WaitForOutstanding(3));
  gate->ReleaseOldest();
  first.join();
  ASSERT_TRUE(gate->WaitForOutstanding(3));
  const uint64_t started = gate->reads_started();
  stream->Cancel();
  stream->Cancel();  // idempotent
  auto n = stream->Next();
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), StatusCode::kCancelled);
  gate->ReleaseAll();
  ExpectLimiterDrains(*reader.limiter());
  testing::GiveThreadsAChance();
  EXPECT_EQ(gate->reads_started(), started) << "reads admitted after Cancel";
  auto again = stream->Next();
  EXPECT_EQ(again.status().code(), StatusCode::kCancelled);
}

// Dropping the Reader while its stream still reads: nothing dangles; the stream
// either finishes or reports Cancelled, and every delivered byte is right.
TEST(ReaderTest, DroppingReaderWhileStreamingDanglesNothing) {
  auto gate = GatedSource::Make("gate", 1ull << 36);
  std::shared_ptr<Limiter> limiter;
  std::optional<RangeStream> stream;
  const auto ranges = SpreadRanges(20, 64);
  {
    Reader reader = OpenReader(gate, LimitOptions(4));
    limiter = reader.limiter();
    auto s = reader.ReadRanges(ranges, Delivery::kAsCompleted);
    ASSERT_TRUE(s.ok());
    stream.emplace(std::move(*s));
  }
  {
    StreamConsumer consumer(std::move(*stream), ranges);
    stream.reset();
    ASSERT_TRUE(gate->WaitForOutstanding(4));
    gate->SetMode(GatedSource::Mode::kPassAsync);
    ASSERT_TRUE(consumer.WaitForDone());
    EXPECT_THAT(consumer.final_status().code(),
                AnyOf(StatusCode::kOk, StatusCode::kCancelled));
    EXPECT_EQ(consumer.bad_bytes(), 0u);
  }
  ExpectLimiterDrains(*limiter);
}

}  // namespace
}  // namespace rangeio
