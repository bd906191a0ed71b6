// Reader admission: the in-flight bound C, rolling admission, the budget.
//
// Invariants 1, 2 and 4 of ARCHITECTURE.md (the map: reader_test.cc),
// proved with an instrumented source whose reads the test completes one
// by one.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "rangeio/rangeio.h"
#include "rangeio/reader.h"
#include "support/gated_source.h"
#include "support/test_util.h"

namespace rangeio {
namespace {

using std::chrono::milliseconds;
using testing::ExpectEachIndexOnce;
using testing::ExpectLimiterDrains;
using testing::GatedSource;
using testing::Iota;
using testing::LimitOptions;
using testing::OpenReader;
using testing::SpreadRanges;
using testing::StreamConsumer;
using testing::WaitUntil;

// --- 1. In-flight bound --------------------------------------------------

TEST(ReaderTest, PeakInFlightReachesExactlyC) {
  constexpr uint32_t kC = 4;
  auto gate = GatedSource::Make("gate", 1ull << 36);
  Reader reader = OpenReader(gate, LimitOptions(kC));
  const auto ranges = SpreadRanges(64, 32);
  auto stream = reader.ReadRanges(ranges, Delivery::kAsCompleted);
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  StreamConsumer consumer(std::move(*stream), ranges);

  ASSERT_TRUE(gate->WaitForOutstanding(kC));
  testing::GiveThreadsAChance();
  EXPECT_EQ(gate->outstanding(), kC);
  EXPECT_EQ(gate->reads_started(), kC);
  EXPECT_EQ(reader.limiter()->GetStats().in_flight, kC);

  // Release one at a time, alternating newest and oldest, until done.
  bool newest = true;
  while (true) {
    ASSERT_TRUE(WaitUntil([&] { return gate->held() > 0 || consumer.done(); }));
    if (consumer.done()) break;
    EXPECT_LE(gate->outstanding(), kC);
    if (newest) {
      gate->ReleaseNewest();
    } else {
      gate->ReleaseOldest();
    }
    newest = !newest;
  }
  EXPECT_TRUE(consumer.final_status().ok())
      << consumer.final_status().ToString();
  ExpectEachIndexOnce(consumer.indexes(), ranges.size());
  EXPECT_EQ(consumer.bad_bytes(), 0u);
  EXPECT_EQ(gate->peak_outstanding(), kC);
  EXPECT_EQ(gate->reads_started(), ranges.size());
  Stats s = reader.limiter()->GetStats();
  EXPECT_EQ(s.peak_in_flight, kC);
  EXPECT_LE(s.peak_retained_count, 2u * kC);
  ExpectLimiterDrains(*reader.limiter());
}

// --- 4. Rolling admission ------------------------------------------------

TEST(ReaderTest, RollingReleaseOfOneAdmitsExactlyOneMore) {
  constexpr uint32_t kC = 4;
  auto gate = GatedSource::Make("gate", 1ull << 36);
  // The budget is ample and the consumer keeps every slice, so only the
  // completion itself can admit the next read (not a released slice).
  Reader reader = OpenReader(gate, LimitOptions(kC, 100));
  const auto ranges = SpreadRanges(20, 32);
  auto stream = reader.ReadRanges(ranges, Delivery::kAsCompleted);
  ASSERT_TRUE(stream.ok());
  StreamConsumer consumer(std::move(*stream), ranges, /*hold_slices=*/true);
  ASSERT_TRUE(gate->WaitForOutstanding(kC));
  for (uint64_t k = 1; k <= 8; ++k) {
    // The straggler (oldest) stays held for the first half: no barrier.
    if (k <= 4) {
      ASSERT_TRUE(gate->ReleaseNewest());
    } else {
      ASSERT_EQ(gate->ReleaseOldest(), 1u);
    }
    ASSERT_TRUE(gate->WaitForStarted(kC + k))
        << "a completion did not admit the next read (k=" << k << ")";
    ASSERT_TRUE(gate->WaitForOutstanding(kC));
    testing::GiveThreadsAChance(milliseconds(5));
    EXPECT_EQ(gate->reads_started(), kC + k) << "admitted more than one";
    EXPECT_EQ(gate->outstanding(), kC);
  }
  gate->SetMode(GatedSource::Mode::kPassAsync);
  ASSERT_TRUE(consumer.WaitForDone());
  EXPECT_TRUE(consumer.final_status().ok());
  ExpectEachIndexOnce(consumer.indexes(), ranges.size());
  EXPECT_EQ(consumer.bad_bytes(), 0u);
  EXPECT_EQ(gate->peak_outstanding(), kC);
}

// --- 2. Response budget --------------------------------------------------

// A consumer that keeps every slice: the count budget caps what is retained
// (in flight + waiting + held), and a release admits more.
TEST(ReaderTest, StallingConsumerNeverExceedsCountBudget) {
  constexpr uint32_t kC = 4, kBudget = 6;
  auto gate = GatedSource::Make("gate", 1ull << 36);
  Reader reader = OpenReader(gate, LimitOptions(kC, kBudget));
  const auto& limiter = reader.limiter();
  const auto ranges = SpreadRanges(30, 100);
  auto stream = reader.ReadRanges(ranges, Delivery::kAsCompleted);
  ASSERT_TRUE(stream.ok());
  StreamConsumer consumer(std::move(*stream), ranges, /*hold_slices=*/true);

  ASSERT_TRUE(gate->WaitForOutstanding(kC));
  ASSERT_EQ(gate->ReleaseOldest(2), 2u);
  ASSERT_TRUE(consumer.WaitForCount(2));
  ASSERT_TRUE(gate->WaitForStarted(6));  // 2 held + 4 in flight = budget
  ASSERT_TRUE(gate->WaitForOutstanding(kC));
  ASSERT_EQ(gate->ReleaseOldest(2), 2u);
  ASSERT_TRUE(consumer.WaitForCount(4));
  testing::GiveThreadsAChance();
  EXPECT_EQ(gate->reads_started(), 6u) << "admitted past the count budget";
  EXPECT_EQ(gate->outstanding(), 2u);
  Stats s = limiter->GetStats();
  EXPECT_EQ(s.retained_count, kBudget);
  EXPECT_EQ(s.retained_bytes, kBudget * 100u);
  EXPECT_EQ(s.in_flight, 2u);

  // Letting go of the 4 held slices makes room for 4; C allows 2 of them.
  consumer.ReleaseSlices(/*stop_holding=*/false);
  ASSERT_TRUE(gate->WaitForStarted(8));
  ASSERT_TRUE(gate->WaitForOutstanding(kC));
  testing::GiveThreadsAChance();
  EXPECT_EQ(gate->reads_started(), 8u);

  consumer.ReleaseSlices(/*stop_holding=*/true);
  gate->SetMode(GatedSource::Mode::kPassAsync);
  ASSERT_TRUE(consumer.WaitForDone());
  EXPECT_TRUE(consumer.final_status().ok())
      << consumer.final_status().ToString();
  ExpectEachIndexOnce(consumer.indexes(), ranges.size());
  EXPECT_EQ(consumer.bad_bytes(), 0u);
  s = limiter->GetStats();
  EXPECT_EQ(s.peak_retained_count, kBudget);
  EXPECT_LE(s.peak_retained_bytes, kBudget * 100u);
  EXPECT_EQ(s.peak_in_flight, kC);
  EXPECT_EQ(gate->peak_outstanding(), kC);
  ExpectLimiterDrains(*limiter);
}

// The byte budget caps admission on its own (here below C).
TEST(ReaderTest, ByteBudgetLimitsAdmission) {
  constexpr uint32_t kC = 8;
  constexpr uint64_t kLen = 64;
  auto gate = GatedSource::Make("gate", 1ull << 36);
  Reader reader = OpenReader(gate, LimitOptions(kC, 100, 3 * kLen));
  const auto ranges = SpreadRanges(20, kLen);
  auto stream = reader.ReadRanges(ranges, Delivery::kAsCompleted);
  ASSERT_TRUE(stream.ok());
  StreamConsumer consumer(std::move(*stream), ranges);
  ASSERT_TRUE(gate->WaitForOutstanding(3));
  testing::GiveThreadsAChance();
  EXPECT_EQ(gate->outstanding(), 3u) << "byte budget of 3 reads exceeded";
  EXPECT_LE(reader.limiter()->GetStats().retained_bytes, 3 * kLen);
  ASSERT_EQ(gate->ReleaseOldest(), 1u);
  ASSERT_TRUE(gate->WaitForStarted(4));
  ASSERT_TRUE(gate->WaitForOutstanding(3));
  gate->SetMode(GatedSource::Mode::kPassAsync);
  ASSERT_TRUE(consumer.WaitForDone());
  EXPECT_TRUE(consumer.final_status().ok());
  EXPECT_EQ(consumer.bad_bytes(), 0u);
  Stats s = reader.limiter()->GetStats();
  EXPECT_LE(s.peak_retained_bytes, 3 * kLen);
  EXPECT_EQ(gate->peak_outstanding(), 3u);
}

// In request order, completed results wait for the head; they count against
// the budget, so a slow head stops admission once the budget is full — but
// that is not a stall of the caller's making: no ResourceExhausted.
TEST(ReaderTest, OrderedHeadOfLineWaitIsNotAStall) {
  constexpr uint32_t kC = 2, kBudget = 4;
  auto gate = GatedSource::Make("gate", 1ull << 36);
  Options o = LimitOptions(kC, kBudget);
  o.reader.response_stall_timeout = milliseconds(50);
  Reader reader = OpenReader(gate, o);
  const auto ranges = SpreadRanges(12, 16);
  auto stream = reader.ReadRanges(ranges, Delivery::kOrdered);
  ASSERT_TRUE(stream.ok());
  StreamConsumer consumer(std::move(*stream), ranges);
  ASSERT_TRUE(gate->WaitForOutstanding(kC));
  // Complete 1, 2, 3 while 0 (the head) stays held.
  for (uint64_t i = 1; i <= 3; ++i) {
    ASSERT_TRUE(gate->WaitForHeld(2));  // the head and read i
    ASSERT_TRUE(gate->ReleaseOffset(ranges[i].offset)) << i;
  }
  testing::GiveThreadsAChance(milliseconds(150));  // 3x the stall timeout
  EXPECT_EQ(gate->reads_started(), kBudget) << "admitted past the count budget";
  EXPECT_EQ(consumer.count(), 0u) << "delivered ahead of the head";
  EXPECT_FALSE(consumer.done()) << consumer.final_status().ToString();
  EXPECT_EQ(reader.limiter()->GetStats().retained_count, kBudget);

  ASSERT_TRUE(gate->ReleaseOffset(ranges[0].offset));
  gate->SetMode(GatedSource::Mode::kPassAsync);
  ASSERT_TRUE(consumer.WaitForDone());
  EXPECT_TRUE(consumer.final_status().ok())
      << consumer.final_status().ToString();
  EXPECT_EQ(consumer.indexes(), Iota(ranges.size()));
  EXPECT_EQ(consumer.bad_bytes(), 0u);
  EXPECT_LE(reader.limiter()->GetStats().peak_retained_count, kBudget);
}

// A consumer that keeps every slice fills the budget with its own results;
// Next() then reports ResourceExhausted after the stall timeout.
TEST(ReaderTest, ConsumerHoldingEverythingGetsResourceExhausted) {
  auto source = MakeMemorySource("mem", testing::PatternBuffer(1 << 16));
  Options o = LimitOptions(2, 4);
  o.reader.response_stall_timeout = milliseconds(50);
  Reader reader = OpenReader(source, o);
  const auto ranges = SpreadRanges(10, 100, 1000);
  auto stream = reader.ReadRanges(ranges, Delivery::kOrdered);
  ASSERT_TRUE(stream.ok());
  // Keeps every slice: the stream must end with the stall error, not data.
  auto out = testing::Drain(*stream, ranges, nullptr, /*keep_slices=*/true);
  std::vector<Slice>& kept = out.slices;
  const Status& error = out.status;
  EXPECT_EQ(error.code(), StatusCode::kResourceExhausted) << error.ToString();
  EXPECT_EQ(kept.size(), 4u);
  EXPECT_EQ(out.bad_bytes, 0u);
  EXPECT_LE(reader.limiter()->GetStats().retained_count, 4u);
  // The error is sticky.
  auto again = stream->Next();
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), StatusCode::kResourceExhausted);

  kept.clear();
  { RangeStream dropped = std::move(*stream); }
  ExpectLimiterDrains(*reader.limiter());
  // The limiter still works.
  auto fresh = reader.ReadRanges(ranges);
  ASSERT_TRUE(fresh.ok());
  auto d = testing::Drain(*fresh, ranges);
  EXPECT_TRUE(d.status.ok()) << d.status.ToString();
  EXPECT_EQ(d.indexes, Iota(ranges.size()));
  EXPECT_EQ(d.bad_bytes, 0u);
}

TEST(ReaderTest, ConsumerHoldingBytesBudgetGetsResourceExhausted) {
  auto source = MakeMemorySource("mem", testing::PatternBuffer(1 << 16));
  Options o = LimitOptions(4, 100, 300);
  o.reader.response_stall_timeout = milliseconds(50);
  Reader reader = OpenReader(source, o);
  const auto ranges = SpreadRanges(10, 100, 1000);
  auto stream = reader.ReadRanges(ranges, Delivery::kAsCompleted);
  ASSERT_TRUE(stream.ok());
  auto out = testing::Drain(*stream, ranges, nullptr, /*keep_slices=*/true);
  const Status& error = out.status;
  EXPECT_EQ(error.code(), StatusCode::kResourceExhausted) << error.ToString();
  EXPECT_EQ(out.slices.size(), 3u);
  EXPECT_EQ(out.bad_bytes, 0u);
  EXPECT_LE(reader.limiter()->GetStats().peak_retained_bytes, 300u);
}

// One thread drains many streams of one limiter one after the other: every
// stream ends (data or ResourceExhausted after the stall timeout), none hangs.
// Bug 1: a consumer that starts waiting while another stream's read is in
// flight (so nothing is stalled yet) must still notice when that read
// completes into the budget and nothing is left in flight: only consumers
// can free the budget then, and Next() fails with ResourceExhausted after
// the stall timeout rather than waiting forever.
TEST(ReaderTest, StallThatBeginsWhileWaitingStillTimesOut) {
  auto gate = GatedSource::Make("gate", 1 << 20);
  Options o = LimitOptions(2, 2);
  o.reader.response_stall_timeout = milliseconds(200);
  Reader reader = OpenReader(gate, o);
  const std::vector<ByteRange> one = {{0, 10}};
  auto x = reader.ReadRanges(one);  // in flight while the consumer waits
  ASSERT_TRUE(x.ok());
  ASSERT_TRUE(gate->WaitForOutstanding(1));
  auto b = reader.ReadRanges(one);  // completes into the budget
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(gate->WaitForOutstanding(2));
  ASSERT_TRUE(gate->ReleaseNewest());
  auto a = reader.ReadRanges(one);  // waits for admission: budget is full
  ASSERT_TRUE(a.ok());
  std::atomic<bool> done{false};
  Status got;
  testing::ScopedThread consumer([&] {
    auto next = a->Next();
    got = next.ok() ? Status::OK() : next.status();
    done = true;
  });
  testing::GiveThreadsAChance(milliseconds(50));  // the consumer sleeps
  ASSERT_EQ(gate->ReleaseOldest(), 1u);  // x's read: now nothing in flight
  const bool ended =
      testing::WaitUntil([&] { return done.load(); }, milliseconds(5000));
  if (!ended) {  // free the budget, so that the consumer can finish
    gate->SetMode(GatedSource::Mode::kPassInline);
    x->Cancel();
    b->Cancel();
  }
  consumer.join();
  ASSERT_TRUE(ended) << "Next() did not return within 25 stall timeouts";
  EXPECT_EQ(got.code(), StatusCode::kResourceExhausted) << got.ToString();
}

class ManyStreamsTest : public ::testing::TestWithParam<const char*> {};

INSTANTIATE_TEST_SUITE_P(Sources, ManyStreamsTest,
                         ::testing::Values("memory", "local"));

TEST_P(ManyStreamsTest, OneThreadDrainingManyStreamsInTurnNeverHangs) {
  testing::ScratchDir dir;
  std::shared_ptr<Source> source =
      MakeMemorySource("mem", testing::PatternBuffer(1 << 20));
  if (std::string(GetParam()) == "local") {
    auto file = OpenLocalFile(dir.WriteFile("f.bin", 1 << 20));
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    source = *file;
  }
  Options o = LimitOptions(4, 128);
  o.reader.response_stall_timeout = milliseconds(200);
  Reader reader = OpenReader(source, o);
  const auto ranges = SpreadRanges(8, 100, 1000);
  std::vector<RangeStream> streams;
  for (int i = 0; i < 150; ++i) {
    auto s = reader.ReadRanges(ranges, Delivery::kOrdered);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    streams.push_back(std::move(*s));
  }
  std::atomic<size_t> ok{0};
  std::atomic<size_t> exhausted{0};
  testing::ScopedThread drainer([&] {
    for (RangeStream& s : streams) {
      auto out = testing::Drain(s, ranges, testing::PatternByteAt);
      EXPECT_EQ(out.bad_bytes, 0u);
      if (out.status.ok()) {
        ++ok;
      } else {
        EXPECT_EQ(out.status.code(), StatusCode::kResourceExhausted)
            << out.status.ToString();
        ++exhausted;
      }
    }
  });
  if (!testing::WaitUntil([&] { return ok + exhausted == 150; },
                          milliseconds(60'000))) {
    std::fprintf(stderr, "hang: %zu streams ended with data, %zu exhausted\n",
                 ok.load(), exhausted.load());
    std::abort();  // the drainer would never join
  }
  drainer.join();
  streams.clear();
  ExpectLimiterDrains(*reader.limiter());
}

// A read larger than the whole byte budget is admitted alone (no deadlock),
// and only once nothing else is retained; while it is retained nothing else
// is admitted.
TEST(ReaderTest, LargeReadIsAdmittedAlone) {
  constexpr uint64_t kBudget = 1024;
  constexpr uint64_t kBig = 64 * 1024;
  auto limiter = Limiter::Make(LimitOptions(4, 0, kBudget));
  ASSERT_TRUE(limiter.ok());
  auto small_gate = GatedSource::Make("small", 1ull << 36);
  auto big_gate = GatedSource::Make("big", 1ull << 36);
  Reader small = OpenReader(small_gate, {}, *limiter);
  Reader big = OpenReader(big_gate, {}, *limiter);

  const std::vector<ByteRange> small_range = {{0, 100}};
  auto s1 = small.ReadRanges(small_range);
  ASSERT_TRUE(s1.ok());
  auto c1 = std::make_unique<StreamConsumer>(std::move(*s1), small_range);
  ASSERT_TRUE(small_gate->WaitForOutstanding(1));

  const std::vector<ByteRange> big_range = {{4096, kBig}};
  auto s2 = big.ReadRanges(big_range);
  ASSERT_TRUE(s2.ok());
  StreamConsumer c2(std::move(*s2), big_range);
  testing::GiveThreadsAChance();
  EXPECT_EQ(big_gate->reads_started(), 0u)
      << "a read larger than the budget was admitted beside another";

  small_gate->ReleaseAll();
  ASSERT_TRUE(c1->WaitForDone());
  EXPECT_TRUE(c1->final_status().ok());
  c1.reset();  // its slice is released
  ASSERT_TRUE(big_gate->WaitForStarted(1)) << "large read never admitted";

  // While the large read is retained, a small one waits.
  const std::vector<ByteRange> later = {{1 << 20, 100}};
  auto s3 = small.ReadRanges(later);
  ASSERT_TRUE(s3.ok());
  StreamConsumer c3(std::move(*s3), later);
  testing::GiveThreadsAChance();
  EXPECT_EQ(small_gate->reads_started(), 1u)
      << "admitted beside a read larger than the budget";

  big_gate->SetMode(GatedSource::Mode::kPassAsync);
  ASSERT_TRUE(c2.WaitForDone());
  EXPECT_TRUE(c2.final_status().ok()) << c2.final_status().ToString();
  EXPECT_EQ(c2.count(), 1u);
  EXPECT_EQ(c2.bad_bytes(), 0u);
  small_gate->SetMode(GatedSource::Mode::kPassAsync);
  ASSERT_TRUE(c3.WaitForDone());
  EXPECT_TRUE(c3.final_status().ok());
  ExpectLimiterDrains(**limiter);
}

TEST(ReaderTest, LargeReadsFromMemoryComplete) {
  auto source = MakeMemorySource("mem", testing::PatternBuffer(1 << 20),
                                 /*zero_copy=*/false);
  Reader reader = OpenReader(source, LimitOptions(4, 0, 1000));
  const std::vector<ByteRange> ranges = {{0, 10},
                                         {1000, 300'000},
                                         {400'000, 10},
                                         {500'000, 500'000},
                                         {(1 << 20) - 1, 1}};
  for (Delivery d : {Delivery::kOrdered, Delivery::kAsCompleted}) {
    auto stream = reader.ReadRanges(ranges, d);
    ASSERT_TRUE(stream.ok());
    auto out = testing::Drain(*stream, ranges);
    ASSERT_TRUE(out.status.ok()) << out.status.ToString();
    ExpectEachIndexOnce(out.indexes, ranges.size());
    EXPECT_EQ(out.bad_bytes, 0u);
  }
}

// Budget is held by the slices a caller keeps (and their copies and
// sub-slices), not by the stream: it returns when the last one goes.
TEST(ReaderTest, BudgetIsHeldUntilTheLastSliceIsReleased) {
  auto source = MakeMemorySource("mem", testing::PatternBuffer(4096));
  Reader reader = OpenReader(source, LimitOptions(1, 2));
  const auto& limiter = *reader.limiter();
  const std::vector<ByteRange> ranges = {{0, 100}, {1000, 50}};
  auto stream = reader.ReadRanges(ranges, Delivery::kOrdered);
  ASSERT_TRUE(stream.ok());
  auto n0 = stream->Next();
  auto n1 = stream->Next();
  ASSERT_TRUE(n0.ok() && n1.ok());
  ASSERT_TRUE(n0->has_value() && n1->has_value());
  Slice s0 = (*n0)->bytes, s1 = (*n1)->bytes;
  n0 = Status::Cancelled("dropped by test");
  n1 = Status::Cancelled("dropped by test");
  EXPECT_EQ(limiter.GetStats().retained_count, 2u);
  EXPECT_EQ(limiter.GetStats().retained_bytes, 150u);
  EXPECT_EQ(limiter.GetStats().in_flight, 0u);

  Slice copy = s0;
  s0.Reset();
  EXPECT_EQ(limiter.GetStats().retained_count, 2u) << "a copy still holds it";
  copy.Reset();
  EXPECT_EQ(limiter.GetStats().retained_count, 1u);
  EXPECT_EQ(limiter.GetStats().retained_bytes, 50u);

  Slice sub = s1.Sub(10, 5);
  s1.Reset();
  EXPECT_EQ(limiter.GetStats().retained_count, 1u) << "a sub-slice holds it";
  EXPECT_TRUE(testing::MatchesPattern({1010, 5}, sub.span()));
  sub.Reset();
  EXPECT_EQ(limiter.GetStats().retained_count, 0u);
  EXPECT_EQ(limiter.GetStats().retained_bytes, 0u);

  auto end = stream->Next();
  ASSERT_TRUE(end.ok());
  EXPECT_FALSE(end->has_value());
}

}  // namespace
}  // namespace rangeio
