// Stats: the latency histogram's maths, and reader / limiter accounting
// checked against a hand count of what an instrumented source did.
#include "rangeio/stats.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "rangeio/rangeio.h"
#include "support/gated_source.h"
#include "support/test_util.h"

namespace rangeio {
namespace {

using testing::GatedSource;
using ::testing::HasSubstr;
using testing::StreamConsumer;

constexpr uint64_t kMs = 1'000'000;

std::vector<uint64_t> SampleValues() {
  std::vector<uint64_t> v = {0,
                             1,
                             2,
                             3,
                             4,
                             5,
                             6,
                             7,
                             8,
                             9,
                             10,
                             15,
                             16,
                             17,
                             1000,
                             1023,
                             1024,
                             1025,
                             999'999,
                             kMs,
                             5 * kMs,
                             UINT64_MAX / 3,
                             UINT64_MAX - 1,
                             UINT64_MAX};
  for (int k = 0; k < 64; ++k) {
    uint64_t p = uint64_t{1} << k;
    v.push_back(p);
    v.push_back(p - 1);
    v.push_back(p + p / 2);
    if (k >= 2) v.push_back(p + 3 * (p / 4));
  }
  std::sort(v.begin(), v.end());
  return v;
}

constexpr int kSub = 1 << LatencyHistogram::kSubBits;  // sub-buckets / 2^k

TEST(LatencyHistogramTest, BucketsAreInRangeAndMonotone) {
  // Exactly as many buckets as values can reach: UINT64_MAX is the last.
  EXPECT_EQ(LatencyHistogram::BucketOf(UINT64_MAX),
            LatencyHistogram::kBuckets - 1);
  int prev = -1;
  for (uint64_t x : SampleValues()) {
    int b = LatencyHistogram::BucketOf(x);
    ASSERT_GE(b, 0) << x;
    ASSERT_LT(b, LatencyHistogram::kBuckets) << x;
    EXPECT_GE(b, prev) << "BucketOf not monotone at " << x;
    prev = b;
  }
  // Upper bounds rise with the bucket over every bucket a value can land in.
  const int last = LatencyHistogram::BucketOf(UINT64_MAX);
  EXPECT_EQ(LatencyHistogram::BucketUpperBound(last), UINT64_MAX);
  for (int b = 0; b < last; ++b) {
    EXPECT_LT(LatencyHistogram::BucketUpperBound(b),
              LatencyHistogram::BucketUpperBound(b + 1))
        << b;
  }
}

TEST(LatencyHistogramTest, UpperBoundCoversValueWithinOneSubBucket) {
  for (uint64_t x : SampleValues()) {
    uint64_t ub =
        LatencyHistogram::BucketUpperBound(LatencyHistogram::BucketOf(x));
    EXPECT_GE(ub, x) << "bucket of " << x << " ends below it";
    // kSub linear sub-buckets per power of two: width 2^k / kSub <= x / kSub.
    EXPECT_LE(ub - x, x / kSub) << "bucket of " << x << " too wide: " << ub;
    if (x < static_cast<uint64_t>(kSub)) {
      EXPECT_EQ(ub, x) << "values below " << kSub << " are exact";
    }
  }
}

TEST(LatencyHistogramTest, LinearSubBucketsPerPowerOfTwo) {
  for (int k = LatencyHistogram::kSubBits; k < 63; ++k) {
    const uint64_t p = uint64_t{1} << k;
    const uint64_t w = p / kSub;
    const int b0 = LatencyHistogram::BucketOf(p);
    for (int j = 0; j < kSub; ++j) {
      EXPECT_EQ(LatencyHistogram::BucketOf(p + j * w), b0 + j) << k << "/" << j;
      EXPECT_EQ(LatencyHistogram::BucketOf(p + (j + 1) * w - 1), b0 + j)
          << k << "/" << j;
    }
    EXPECT_EQ(LatencyHistogram::BucketOf(2 * p), b0 + kSub) << k;
    EXPECT_EQ(LatencyHistogram::BucketUpperBound(b0), p + w - 1) << k;
  }
}

TEST(LatencyHistogramTest, EmptyHistogram) {
  LatencyHistogram h;
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.sum_nanos(), 0u);
  EXPECT_EQ(h.min_nanos(), 0u);
  EXPECT_EQ(h.max_nanos(), 0u);
  EXPECT_EQ(h.Percentile(0.5), 0u);
  EXPECT_EQ(h.Percentile(0.99), 0u);
}

TEST(LatencyHistogramTest, CountSumMinMaxAreExact) {
  LatencyHistogram h;
  for (uint64_t v : {5 * kMs, 1 * kMs, 3 * kMs, 7 * kMs}) h.Record(v);
  EXPECT_EQ(h.count(), 4u);
  EXPECT_EQ(h.sum_nanos(), 16 * kMs);
  EXPECT_EQ(h.min_nanos(), 1 * kMs);
  EXPECT_EQ(h.max_nanos(), 7 * kMs);
}

TEST(LatencyHistogramTest, PercentilesFindTheRightBucket) {
  LatencyHistogram h;
  for (int i = 0; i < 90; ++i) h.Record(1 * kMs);
  for (int i = 0; i < 10; ++i) h.Record(100 * kMs);
  // The answer is the upper bound of the bucket (capped at the max): >= the
  // value, and well within 1.25x of it.
  EXPECT_GE(h.Percentile(0.5), 1 * kMs);
  EXPECT_LE(h.Percentile(0.5), 1 * kMs + kMs / 4);
  EXPECT_GE(h.Percentile(0.01), 1 * kMs);
  EXPECT_LE(h.Percentile(0.01), 1 * kMs + kMs / 4);
  EXPECT_GE(h.Percentile(0.89), 1 * kMs);
  EXPECT_LE(h.Percentile(0.89), 1 * kMs + kMs / 4);
  EXPECT_GE(h.Percentile(0.99), 100 * kMs);
  EXPECT_LE(h.Percentile(0.99), 125 * kMs);
  EXPECT_GE(h.Percentile(1.0), 100 * kMs);
  EXPECT_LE(h.Percentile(1.0), 125 * kMs);
  uint64_t prev = 0;
  for (double q = 0.0; q <= 1.0; q += 0.05) {
    uint64_t p = h.Percentile(q);
    EXPECT_GE(p, prev) << "percentile not monotone at q=" << q;
    prev = p;
  }
}

TEST(LatencyHistogramTest, PercentileOfUniformSpread) {
  LatencyHistogram h;
  for (uint64_t i = 1; i <= 1000; ++i) h.Record(i * 1000);  // 1us..1ms
  uint64_t p50 = h.Percentile(0.5);
  EXPECT_GE(p50, 500'000u);
  EXPECT_LE(p50, 625'000u);
  uint64_t p99 = h.Percentile(0.99);
  EXPECT_GE(p99, 990'000u);
  EXPECT_LE(p99, 1'250'000u);
}

TEST(LatencyHistogramTest, MergeAddsEverything) {
  LatencyHistogram a, b, empty;
  for (int i = 0; i < 90; ++i) a.Record(1 * kMs);
  for (int i = 0; i < 10; ++i) b.Record(100 * kMs);
  b.Record(200);
  a.Merge(b);
  a.Merge(empty);
  EXPECT_EQ(a.count(), 101u);
  EXPECT_EQ(a.sum_nanos(), 90 * kMs + 1000 * kMs + 200);
  EXPECT_EQ(a.min_nanos(), 200u);
  EXPECT_EQ(a.max_nanos(), 100 * kMs);
  EXPECT_GE(a.Percentile(0.99), 100 * kMs);

  LatencyHistogram c;
  c.Merge(b);
  EXPECT_EQ(c.count(), b.count());
  EXPECT_EQ(c.min_nanos(), 200u);
  EXPECT_EQ(c.Percentile(0.5), b.Percentile(0.5));
}

TEST(LatencyHistogramTest, SizeIsFixed) {
  // Diagnostics use memory independent of the number of reads (invariant 7).
  LatencyHistogram h;
  const size_t before = sizeof(h);
  for (uint64_t i = 0; i < 100'000; ++i) h.Record(i * 7919);
  EXPECT_EQ(sizeof(h), before);
  EXPECT_LE(sizeof(Stats), sizeof(LatencyHistogram) + 512);
  EXPECT_EQ(h.count(), 100'000u);
}

TEST(StatsTest, ToStringShowsFigures) {
  Stats s;
  s.physical_reads = 12345;
  s.logical_bytes = 987654;
  s.peak_in_flight = 64;
  std::string text = s.ToString();
  EXPECT_THAT(text, HasSubstr("12345"));
  EXPECT_THAT(text, HasSubstr("987654"));
}

// --- Accounting against a hand count ---------------------------------------

uint64_t SumLengths(const std::vector<ByteRange>& rs) {
  uint64_t s = 0;
  for (const ByteRange& r : rs) s += r.length;
  return s;
}

// Ranges of lengths base, base+1, ... spread far apart (no coalescing).
std::vector<ByteRange> VariedRanges(size_t n, uint64_t base, uint64_t first) {
  std::vector<ByteRange> rs;
  for (size_t i = 0; i < n; ++i) {
    rs.push_back(ByteRange{first + i * (1 << 20), base + i * 37});
  }
  return rs;
}

void ExpectLimiterFieldsZero(const Stats& s) {
  EXPECT_EQ(s.in_flight, 0u);
  EXPECT_EQ(s.peak_in_flight, 0u);
  EXPECT_EQ(s.retained_count, 0u);
  EXPECT_EQ(s.peak_retained_count, 0u);
  EXPECT_EQ(s.retained_bytes, 0u);
  EXPECT_EQ(s.peak_retained_bytes, 0u);
  EXPECT_EQ(s.waiting_streams, 0u);
}

TEST(StatsAccountingTest, ReaderAndLimiterMatchHandCount) {
  auto gate1 =
      GatedSource::Make("one", 1ull << 36, GatedSource::Mode::kPassAsync);
  auto gate2 =
      GatedSource::Make("two", 1ull << 36, GatedSource::Mode::kPassInline);
  auto limiter = Limiter::Make(testing::LimitOptions(4));
  ASSERT_TRUE(limiter.ok());
  auto r1 = Reader::Open(gate1, ReaderOptions(), *limiter);
  auto r2 = Reader::Open(gate2, ReaderOptions(), *limiter);
  ASSERT_TRUE(r1.ok()) << r1.status().ToString();
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();

  const auto ranges1 = VariedRanges(10, 100, 0);
  const auto ranges2 = VariedRanges(5, 1000, 7);
  {
    auto s1 = r1->ReadRanges(ranges1, Delivery::kAsCompleted);
    auto s2 = r2->ReadRanges(ranges2, Delivery::kOrdered);
    ASSERT_TRUE(s1.ok() && s2.ok());
    auto d1 = testing::Drain(*s1, ranges1);
    auto d2 = testing::Drain(*s2, ranges2);
    EXPECT_EQ(d1.bad_bytes + d2.bad_bytes, 0u);
    ASSERT_TRUE(d1.status.ok()) << d1.status.ToString();
    ASSERT_TRUE(d2.status.ok()) << d2.status.ToString();
    ASSERT_EQ(d1.indexes.size(), 10u);
    ASSERT_EQ(d2.indexes.size(), 5u);
  }
  // Hand count: the gates saw exactly one read per range.
  ASSERT_EQ(gate1->reads_completed(), 10u);
  ASSERT_EQ(gate2->reads_completed(), 5u);
  const uint64_t bytes1 = SumLengths(ranges1), bytes2 = SumLengths(ranges2);
  ASSERT_EQ(gate1->bytes_returned(), bytes1);
  ASSERT_EQ(gate2->bytes_returned(), bytes2);

  Stats a = r1->GetStats();
  EXPECT_EQ(a.physical_reads, 10u);
  EXPECT_EQ(a.physical_bytes, bytes1);
  EXPECT_EQ(a.logical_bytes, bytes1);
  EXPECT_EQ(a.ranges_delivered, 10u);
  EXPECT_EQ(a.read_errors, 0u);
  EXPECT_EQ(a.reads_cancelled, 0u);
  EXPECT_EQ(a.read_latency.count(), 10u);
  EXPECT_LE(a.read_latency.min_nanos(), a.read_latency.max_nanos());
  ExpectLimiterFieldsZero(a);

  Stats b = r2->GetStats();
  EXPECT_EQ(b.physical_reads, 5u);
  EXPECT_EQ(b.physical_bytes, bytes2);
  EXPECT_EQ(b.logical_bytes, bytes2);
  EXPECT_EQ(b.ranges_delivered, 5u);
  EXPECT_EQ(b.read_latency.count(), 5u);
  ExpectLimiterFieldsZero(b);

  Stats l = (*limiter)->GetStats();
  EXPECT_EQ(l.physical_reads, 15u);
  EXPECT_EQ(l.physical_bytes, bytes1 + bytes2);
  EXPECT_EQ(l.logical_bytes, bytes1 + bytes2);
  EXPECT_EQ(l.ranges_delivered, 15u);
  EXPECT_EQ(l.read_errors, 0u);
  EXPECT_EQ(l.reads_cancelled, 0u);
  EXPECT_EQ(l.read_latency.count(), 15u);
  EXPECT_EQ(l.read_latency.sum_nanos(),
            a.read_latency.sum_nanos() + b.read_latency.sum_nanos());
  EXPECT_EQ(l.in_flight, 0u);
  EXPECT_EQ(l.retained_count, 0u);
  EXPECT_EQ(l.retained_bytes, 0u);
  EXPECT_EQ(l.waiting_streams, 0u);
  EXPECT_GE(l.peak_in_flight, 1u);
  EXPECT_LE(l.peak_in_flight, 4u);
  EXPECT_GE(l.peak_retained_count, 1u);
  EXPECT_LE(l.peak_retained_count, 8u);
  EXPECT_GE(l.peak_retained_bytes, 100u);
}

// A consumer that has seen a stream's end sees all its reads in the
// limiter's stats, though the reads complete on the source's own thread
// (their permits may still be on the way back: in_flight is a live gauge).
TEST(StatsAccountingTest, LimiterHasCountedEveryReadWhenTheStreamEnds) {
  auto gate =
      GatedSource::Make("async", 1ull << 36, GatedSource::Mode::kPassAsync);
  auto limiter = Limiter::Make(testing::LimitOptions(2));
  ASSERT_TRUE(limiter.ok());
  auto reader = Reader::Open(gate, ReaderOptions(), *limiter);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  const auto ranges = testing::SpreadRanges(2, 8);
  for (uint64_t i = 1; i <= 20000; ++i) {
    auto s = reader->ReadRanges(ranges, Delivery::kAsCompleted);
    ASSERT_TRUE(s.ok());
    auto d = testing::Drain(*s, ranges);
    ASSERT_TRUE(d.status.ok()) << d.status.ToString();
    const Stats l = (*limiter)->GetStats();
    ASSERT_EQ(l.physical_reads, 2 * i) << "after stream " << i;
    ASSERT_EQ(l.read_latency.count(), 2 * i) << "after stream " << i;
    ASSERT_EQ(l.ranges_delivered, 2 * i) << "after stream " << i;
  }
}

TEST(StatsAccountingTest, ClonesShareReaderStats) {
  auto gate =
      GatedSource::Make("g", 1ull << 36, GatedSource::Mode::kPassInline);
  auto reader = Reader::Open(gate, testing::LimitOptions(2));
  ASSERT_TRUE(reader.ok());
  Reader clone = reader->Clone();
  EXPECT_EQ(clone.limiter(), reader->limiter());
  EXPECT_EQ(clone.source(), reader->source());
  const auto ranges = testing::SpreadRanges(3, 10);
  for (const Reader* r : {&*reader, &clone}) {
    auto s = r->ReadRanges(ranges);
    ASSERT_TRUE(s.ok());
    auto d = testing::Drain(*s, ranges);
    ASSERT_TRUE(d.status.ok()) << d.status.ToString();
    EXPECT_EQ(d.bad_bytes, 0u);
  }
  EXPECT_EQ(reader->GetStats().ranges_delivered, 6u);
  EXPECT_EQ(clone.GetStats().ranges_delivered, 6u);
  EXPECT_EQ(reader->GetStats().physical_reads, 6u);
  EXPECT_EQ(reader->limiter()->GetStats().ranges_delivered, 6u);
}

TEST(StatsAccountingTest, ErrorCountsMatchHandCount) {
  // C = 1 and a held gate make the sequence exact: reads 0 and 1 succeed,
  // read 2 fails, reads 3 and 4 are never admitted.
  auto gate = GatedSource::Make("flaky", 1ull << 36);
  auto reader = Reader::Open(gate, testing::LimitOptions(1));
  ASSERT_TRUE(reader.ok());
  const auto ranges = testing::SpreadRanges(5, 64);
  gate->FailOffset(ranges[2].offset);
  auto stream = reader->ReadRanges(ranges, Delivery::kOrdered);
  ASSERT_TRUE(stream.ok());
  {
    StreamConsumer consumer(std::move(*stream), ranges);
    for (uint64_t i = 1; i <= 3; ++i) {
      ASSERT_TRUE(gate->WaitForStarted(i));
      ASSERT_TRUE(gate->WaitForHeld(1));
      ASSERT_EQ(gate->ReleaseOldest(), 1u);
    }
    ASSERT_TRUE(consumer.WaitForDone());
    EXPECT_EQ(consumer.final_status().code(), StatusCode::kIoError);
    EXPECT_EQ(consumer.indexes(), (std::vector<size_t>{0, 1}));
  }
  testing::GiveThreadsAChance();
  EXPECT_EQ(gate->reads_started(), 3u) << "reads admitted after the failure";

  for (const Stats& s : {reader->GetStats(), reader->limiter()->GetStats()}) {
    EXPECT_EQ(s.physical_reads, 3u);
    EXPECT_EQ(s.read_errors, 1u);
    EXPECT_EQ(s.physical_bytes, 128u);
    EXPECT_EQ(s.ranges_delivered, 2u);
    EXPECT_EQ(s.logical_bytes, 128u);
    EXPECT_EQ(s.reads_cancelled, 0u);
    EXPECT_EQ(s.read_latency.count(), s.physical_reads);
  }
  Stats l = reader->limiter()->GetStats();
  EXPECT_EQ(l.in_flight, 0u);
  EXPECT_EQ(l.retained_count, 0u);
  EXPECT_EQ(l.peak_in_flight, 1u);
}

TEST(StatsAccountingTest, AggregatesStayConsistentOverManyReads) {
  // 2,000 requested ranges over 500 distinct ones (duplicates included):
  // the logical figures count every request, the latency histogram every
  // physical read, whatever the planner merged.
  auto source = MakeMemorySource("mem", testing::PatternBuffer(1 << 16));
  auto reader = Reader::Open(source, testing::LimitOptions(8));
  ASSERT_TRUE(reader.ok());
  std::vector<ByteRange> ranges;
  for (int i = 0; i < 2000; ++i)
    ranges.push_back({uint64_t(i % 500) * 128, 16});
  auto stream = reader->ReadRanges(ranges, Delivery::kAsCompleted);
  ASSERT_TRUE(stream.ok());
  auto d = testing::Drain(*stream, ranges);
  ASSERT_TRUE(d.status.ok()) << d.status.ToString();
  EXPECT_EQ(d.bad_bytes, 0u);
  Stats s = reader->GetStats();
  EXPECT_EQ(s.ranges_delivered, 2000u);
  EXPECT_EQ(s.logical_bytes, 2000u * 16);
  EXPECT_GE(s.physical_reads, 1u);
  EXPECT_LE(s.physical_reads, 2000u);
  EXPECT_EQ(s.read_latency.count(), s.physical_reads);
}

}  // namespace
}  // namespace rangeio
