// Reader / RangeStream: the invariants of ARCHITECTURE.md, proved with an
// instrumented source whose reads the test completes one by one.
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
// (Limiter-wide bounds across readers and clones: limiter_test.cc.)
#include "rangeio/reader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "rangeio/rangeio.h"
#include "stream/baselines.h"
#include "support/gated_source.h"
#include "support/test_util.h"

namespace rangeio {
namespace {

using std::chrono::milliseconds;
using ::testing::AnyOf;
using testing::GatedSource;
using ::testing::HasSubstr;
using testing::LimitOptions;
using testing::SpreadRanges;
using testing::StreamConsumer;
using testing::WaitUntil;

Reader OpenReader(std::shared_ptr<Source> source, const Options& o = {},
                  std::shared_ptr<Limiter> limiter = nullptr) {
  auto r = Reader::Open(std::move(source), o, std::move(limiter));
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return std::move(r).value();
}

std::vector<size_t> Iota(size_t n) {
  std::vector<size_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

// Every index in [0, n) exactly once.
void ExpectEachIndexOnce(std::vector<size_t> idx, size_t n) {
  std::sort(idx.begin(), idx.end());
  EXPECT_EQ(idx, Iota(n));
}

// Waits until the limiter is idle: nothing in flight, nothing retained.
using testing::ExpectLimiterDrains;

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

// The benchmark baseline: C reads at a time, the next chunk waits for the
// slowest read of the previous one.
TEST(ReaderTest, ChunkedWaitsForTheWholeChunk) {
  constexpr uint32_t kC = 4;
  auto gate = GatedSource::Make("gate", 1ull << 36);
  Reader reader = OpenReader(gate, LimitOptions(kC));
  const auto ranges = SpreadRanges(12, 32);
  auto stream = detail::ReadRangesScheduled(
      reader, ranges, Delivery::kAsCompleted, detail::Scheduling::kChunked);
  ASSERT_TRUE(stream.ok());
  StreamConsumer consumer(std::move(*stream), ranges);

  for (uint64_t chunk = 1; chunk <= 3; ++chunk) {
    ASSERT_TRUE(gate->WaitForStarted(chunk * kC));
    ASSERT_TRUE(gate->WaitForOutstanding(kC));
    // Complete all but the oldest read of the chunk (the straggler).
    for (uint32_t i = 0; i + 1 < kC; ++i) ASSERT_TRUE(gate->ReleaseNewest());
    ASSERT_TRUE(consumer.WaitForCount((chunk - 1) * kC + kC - 1));
    testing::GiveThreadsAChance(milliseconds(30));
    EXPECT_EQ(gate->reads_started(), chunk * kC)
        << "chunk " << chunk + 1 << " started before chunk " << chunk
        << " finished";
    EXPECT_EQ(gate->outstanding(), 1u);
    ASSERT_EQ(gate->ReleaseOldest(), 1u);
  }
  ASSERT_TRUE(consumer.WaitForDone());
  EXPECT_TRUE(consumer.final_status().ok());
  ExpectEachIndexOnce(consumer.indexes(), ranges.size());
  EXPECT_EQ(gate->peak_outstanding(), kC);
  EXPECT_EQ(reader.limiter()->GetStats().peak_in_flight, kC);
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
  o.response_stall_timeout = milliseconds(50);
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
  o.response_stall_timeout = milliseconds(50);
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
  o.response_stall_timeout = milliseconds(50);
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
  o.response_stall_timeout = milliseconds(50);
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
  // The two reads still in flight return their permits when they complete.
  EXPECT_EQ(reader.limiter()->GetStats().in_flight, 2u);
  gate->ReleaseAll();
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
  EXPECT_THAT(bad.status().message(), HasSubstr("read-thread-num"));

  Options stall;
  stall.response_stall_timeout = milliseconds(0);
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

}  // namespace
}  // namespace rangeio
