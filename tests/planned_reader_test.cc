// Reader with a planner: requested ranges become coalesced and split
// physical reads, and every range still comes back exactly once with its
// own bytes, zero-copy when it lies inside one read, with the response budget
// charged per physical buffer.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "rangeio/rangeio.h"
#include "support/gated_source.h"
#include "support/test_util.h"

namespace rangeio {
namespace {

using testing::Drain;
using testing::DrainResult;
using testing::PatternBuffer;

// Small numbers so that random requests exercise every rule.
PlannerOptions SmallPlanner() {
  PlannerOptions p;
  p.coalesce = true;
  p.coalesce_gap = 64;
  p.max_overread_ratio = 2.0;
  p.max_merged_bytes = 4096;
  p.split_bytes = 1024;
  return p;
}

Options PlannedOptions(PlannerOptions p, uint32_t c = 4) {
  Options o = testing::LimitOptions(c);
  o.reader.planner = p;
  return o;
}

// Random requests over `size` bytes: clusters of small ranges, duplicates,
// ranges inside others, zero-length ranges and a few large ones.
std::vector<ByteRange> RandomRanges(std::mt19937_64& rng, uint64_t size,
                                    size_t n) {
  std::vector<ByteRange> r;
  auto pick = [&](uint64_t lo, uint64_t hi) {
    return std::uniform_int_distribution<uint64_t>(lo, hi)(rng);
  };
  while (r.size() < n) {
    switch (pick(0, 9)) {
      case 0:
        if (!r.empty()) r.push_back(r[pick(0, r.size() - 1)]);  // duplicate
        break;
      case 1:
        if (!r.empty()) {  // inside an earlier one
          const ByteRange& o = r[pick(0, r.size() - 1)];
          const uint64_t off = o.offset + pick(0, o.length);
          r.push_back({off, pick(0, o.end() - off)});
        }
        break;
      case 2:
        r.push_back({pick(0, size), 0});
        break;
      case 3: {
        const uint64_t len = pick(2000, 9000);  // split or oversize
        r.push_back({pick(0, size - len), len});
        break;
      }
      default: {
        const uint64_t len = pick(1, 300);
        r.push_back({pick(0, size - len), len});
      }
    }
  }
  return r;
}

class PlannedReaderTest : public ::testing::TestWithParam<Delivery> {};

TEST_P(PlannedReaderTest, EveryRangeExactlyOnceWithItsBytes) {
  constexpr uint64_t kSize = 64 << 10;
  std::mt19937_64 rng(42);
  for (int round = 0; round < 200; ++round) {
    // The copying source: every physical read is its own buffer.
    auto source = MakeMemorySource("mem", PatternBuffer(kSize), false);
    const PlannerOptions planner = SmallPlanner();
    Options o = PlannedOptions(planner);
    // Room for every split's parts at once (64 KiB / 1 KiB parts), so that
    // no split falls back to a whole read and the plan below is the one run.
    o.limiter.response_budget_count = 64;
    auto reader = Reader::Open(source, o);
    ASSERT_TRUE(reader.ok()) << reader.status().ToString();
    const std::vector<ByteRange> ranges =
        RandomRanges(rng, kSize, 1 + round % 60);
    auto stream = reader->ReadRanges(ranges, GetParam());
    ASSERT_TRUE(stream.ok()) << stream.status().ToString();
    DrainResult d = Drain(*stream, ranges, testing::PatternByteAt);
    ASSERT_TRUE(d.status.ok()) << d.status.ToString();
    EXPECT_EQ(d.bad_bytes, 0u);
    ASSERT_EQ(d.indexes.size(), ranges.size());
    std::vector<size_t> sorted = d.indexes;
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 0; i < sorted.size(); ++i) ASSERT_EQ(sorted[i], i);
    if (GetParam() == Delivery::kOrdered) {
      EXPECT_EQ(d.indexes, sorted) << "ordered delivery out of order";
    }
    const Stats st = reader->GetStats();
    EXPECT_EQ(st.ranges_delivered, ranges.size());
    uint64_t logical = 0;
    for (const ByteRange& r : ranges) logical += r.length;
    EXPECT_EQ(st.logical_bytes, logical);
    if (GetParam() == Delivery::kAsCompleted) {
      // In completion order the whole request is planned as one.
      auto plan = PlanReads(ranges, planner);
      ASSERT_TRUE(plan.ok());
      EXPECT_EQ(st.physical_reads, plan->reads.size());
      EXPECT_EQ(st.physical_bytes, plan->physical_bytes);
    }
    // Every buffer went back.
    const Stats ls = reader->limiter()->GetStats();
    EXPECT_EQ(ls.retained_count, 0u);
    EXPECT_EQ(ls.retained_bytes, 0u);
    EXPECT_EQ(ls.in_flight, 0u);
  }
}

TEST_P(PlannedReaderTest, NeighboursShareOneReadAndOneBuffer) {
  auto source = testing::GatedSource::Make(
      "gated", 1 << 20, testing::GatedSource::Mode::kPassInline);
  auto reader = Reader::Open(source, PlannedOptions(SmallPlanner()));
  ASSERT_TRUE(reader.ok());
  // Three ranges with 10-byte holes, requested out of order.
  const std::vector<ByteRange> ranges = {{220, 100}, {0, 100}, {110, 100}};
  auto stream = reader->ReadRanges(ranges, GetParam());
  ASSERT_TRUE(stream.ok());
  DrainResult d = Drain(*stream, ranges, testing::PatternByteAt, true);
  ASSERT_TRUE(d.status.ok()) << d.status.ToString();
  EXPECT_EQ(d.bad_bytes, 0u);
  if (GetParam() == Delivery::kAsCompleted) {
    EXPECT_EQ(source->started_ranges(), (std::vector<ByteRange>{{0, 320}}));
    // Zero-copy: the three slices are views of one buffer.
    std::map<size_t, const std::byte*> at;
    for (size_t k = 0; k < d.indexes.size(); ++k) {
      at[d.indexes[k]] = d.slices[k].data();
    }
    EXPECT_EQ(at[2] - at[1], 110);
    EXPECT_EQ(at[0] - at[1], 220);
    // One physical buffer holds the budget of all three.
    EXPECT_EQ(reader->limiter()->GetStats().retained_count, 1u);
    EXPECT_EQ(reader->limiter()->GetStats().retained_bytes, 320u);
  } else {
    // Request order plans runs of non-decreasing offsets: {220} then
    // {0, 110}.
    EXPECT_EQ(source->started_ranges(),
              (std::vector<ByteRange>{{220, 100}, {0, 210}}));
  }
  d.slices.clear();
  EXPECT_EQ(reader->limiter()->GetStats().retained_count, 0u);
}

TEST_P(PlannedReaderTest, SplitRangeIsAssembledAndHoldsItsPartsBudget) {
  auto source = testing::GatedSource::Make(
      "gated", 1 << 20, testing::GatedSource::Mode::kPassInline);
  auto reader = Reader::Open(source, PlannedOptions(SmallPlanner()));
  ASSERT_TRUE(reader.ok());
  const std::vector<ByteRange> ranges = {{1000, 3000}};  // 3 parts of 1000
  auto stream = reader->ReadRanges(ranges, GetParam());
  ASSERT_TRUE(stream.ok());
  DrainResult d = Drain(*stream, ranges, testing::PatternByteAt, true);
  ASSERT_TRUE(d.status.ok()) << d.status.ToString();
  EXPECT_EQ(d.bad_bytes, 0u);
  EXPECT_EQ(source->started_ranges(),
            (std::vector<ByteRange>{{1000, 1000}, {2000, 1000}, {3000, 1000}}));
  const Stats held = reader->limiter()->GetStats();
  EXPECT_EQ(held.retained_count, 3u);
  EXPECT_EQ(held.retained_bytes, 3000u);
  d.slices.clear();
  const Stats released = reader->limiter()->GetStats();
  EXPECT_EQ(released.retained_count, 0u);
  EXPECT_EQ(released.retained_bytes, 0u);
}

TEST_P(PlannedReaderTest, SplitThatCannotFitTheBudgetIsReadWhole) {
  auto source = testing::GatedSource::Make(
      "gated", 1 << 20, testing::GatedSource::Mode::kPassInline);
  Options o = PlannedOptions(SmallPlanner());
  o.limiter.response_budget_bytes = 2048;  // the 3 parts need 3000
  auto reader = Reader::Open(source, o);
  ASSERT_TRUE(reader.ok());
  const std::vector<ByteRange> ranges = {{1000, 3000}};
  auto stream = reader->ReadRanges(ranges, GetParam());
  ASSERT_TRUE(stream.ok());
  DrainResult d = Drain(*stream, ranges, testing::PatternByteAt);
  ASSERT_TRUE(d.status.ok()) << d.status.ToString();
  EXPECT_EQ(source->started_ranges(), (std::vector<ByteRange>{{1000, 3000}}));
}

TEST_P(PlannedReaderTest, FailedReadNamesTheRequestsItServed) {
  auto source = testing::GatedSource::Make(
      "gated", 1 << 20, testing::GatedSource::Mode::kPassInline);
  source->FailOffset(0, "disk on fire");
  auto reader = Reader::Open(source, PlannedOptions(SmallPlanner()));
  ASSERT_TRUE(reader.ok());
  const std::vector<ByteRange> ranges = {{0, 10}, {20, 10}, {5000, 10}};
  auto stream = reader->ReadRanges(ranges, GetParam());
  ASSERT_TRUE(stream.ok());
  DrainResult d = Drain(*stream);
  ASSERT_FALSE(d.status.ok());
  const std::string msg = d.status.ToString();
  EXPECT_NE(msg.find("disk on fire"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[0, 30)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("request indexes 0, 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'gated'"), std::string::npos) << msg;
  const Stats ls = reader->limiter()->GetStats();
  EXPECT_EQ(ls.in_flight, 0u);
  EXPECT_EQ(ls.retained_count, 0u);
}

TEST_P(PlannedReaderTest, DroppingTheStreamWithHeldPartsReturnsEverything) {
  auto source = testing::GatedSource::Make("gated", 1 << 20);  // holds reads
  auto reader = Reader::Open(source, PlannedOptions(SmallPlanner()));
  ASSERT_TRUE(reader.ok());
  const std::vector<ByteRange> ranges = {{0, 3000}, {10000, 10}};
  {
    auto stream = reader->ReadRanges(ranges, GetParam());
    ASSERT_TRUE(stream.ok());
    ASSERT_TRUE(source->WaitForHeld(4));
    source->ReleaseOldest(2);  // two of the three parts arrive
    ASSERT_TRUE(source->WaitFor([](const testing::GatedSource& g) {
      return g.reads_completed() == 2;
    }));
  }  // dropped: parts and in-flight reads must all come back
  source->ReleaseAll();
  ASSERT_TRUE(testing::WaitUntil([&] {
    const Stats s = reader->limiter()->GetStats();
    return s.in_flight == 0 && s.retained_count == 0 && s.retained_bytes == 0;
  }));
}

TEST_P(PlannedReaderTest, PeakRetainedStaysWithinTheBudget) {
  auto source = MakeMemorySource("mem", PatternBuffer(1 << 20), false);
  Options o = PlannedOptions(SmallPlanner(), 2);
  o.limiter.response_budget_count = 3;
  auto reader = Reader::Open(source, o);
  ASSERT_TRUE(reader.ok());
  std::mt19937_64 rng(7);
  const std::vector<ByteRange> ranges = RandomRanges(rng, 1 << 20, 500);
  auto stream = reader->ReadRanges(ranges, GetParam());
  ASSERT_TRUE(stream.ok());
  DrainResult d = Drain(*stream, ranges, testing::PatternByteAt);
  ASSERT_TRUE(d.status.ok()) << d.status.ToString();
  EXPECT_EQ(d.bad_bytes, 0u);
  const Stats ls = reader->limiter()->GetStats();
  EXPECT_LE(ls.peak_retained_count, 3u);
  EXPECT_LE(ls.peak_in_flight, 2u);
}

TEST_P(PlannedReaderTest, CoalescedReadsStayWithinTheByteBudget) {
  auto source = testing::GatedSource::Make(
      "gated", 1 << 20, testing::GatedSource::Mode::kPassInline);
  Options o = PlannedOptions(PlannerOptions::Local());
  o.limiter.response_budget_bytes = 1000;
  auto reader = Reader::Open(source, o);
  ASSERT_TRUE(reader.ok());
  std::vector<ByteRange> ranges;
  for (uint64_t i = 0; i < 20; ++i) ranges.push_back({i * 100, 100});
  auto stream = reader->ReadRanges(ranges, GetParam());
  ASSERT_TRUE(stream.ok());
  DrainResult d = Drain(*stream, ranges, testing::PatternByteAt);
  ASSERT_TRUE(d.status.ok()) << d.status.ToString();
  EXPECT_EQ(d.bad_bytes, 0u);
  for (const ByteRange& r : source->started_ranges()) {
    EXPECT_LE(r.length, 1000u) << r.ToString();
  }
  EXPECT_LT(source->reads_started(), ranges.size());  // still coalesced
  EXPECT_LE(reader->limiter()->GetStats().peak_retained_bytes, 1000u);
}

INSTANTIATE_TEST_SUITE_P(Delivery, PlannedReaderTest,
                         ::testing::Values(Delivery::kOrdered,
                                           Delivery::kAsCompleted),
                         [](const auto& p) {
                           return p.param == Delivery::kOrdered
                                      ? "ordered"
                                      : "as_completed";
                         });

TEST(PlannedReaderDefaults, SourcesChooseTheirPreset) {
  auto mem = MakeMemorySource("mem", PatternBuffer(16), true);
  EXPECT_FALSE(mem->Info().planner.coalesce);
  auto sim = MakeSimulatedSource(
      "sim", 1 << 20, LatencyModel::Fixed(std::chrono::microseconds(1)));
  ASSERT_TRUE(sim.ok());
  EXPECT_EQ((*sim)->Info().planner.ToString(),
            PlannerOptions::ObjectStore().ToString());
}

TEST(PlannedReaderOptions, PresetThenFieldKeys) {
  auto o = Options::Parse("planner=local,coalesce-gap=1KiB,split-bytes=none");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  ASSERT_TRUE(o->reader.planner.has_value());
  PlannerOptions want = PlannerOptions::Local();
  want.coalesce_gap = 1024;
  want.split_bytes = PlannerOptions::kNoSplit;
  EXPECT_EQ(o->reader.planner->ToString(), want.ToString());

  auto fields = Options::Parse("max-overread-ratio=1.5");
  ASSERT_TRUE(fields.ok()) << fields.status().ToString();
  EXPECT_EQ(fields->reader.planner->max_overread_ratio, 1.5);
  EXPECT_EQ(fields->reader.planner->coalesce_gap,
            PlannerOptions::ObjectStore().coalesce_gap);

  EXPECT_FALSE(Options().reader.planner.has_value());
}

TEST(PlannedReaderOptions, BadValuesNameKeyAndValue) {
  const struct {
    const char* text;
    const char* key;
  } cases[] = {{"planner=fast", "planner"},
               {"coalesce=yes", "coalesce"},
               {"coalesce-gap=lots", "coalesce-gap"},
               {"max-overread-ratio=0.5", "max-overread-ratio"},
               {"max-overread-ratio=abc", "max-overread-ratio"},
               {"max-merged-bytes=0", "max-merged-bytes"},
               {"split-bytes=0", "split-bytes"}};
  for (const auto& c : cases) {
    auto o = Options::Parse(c.text);
    ASSERT_FALSE(o.ok()) << c.text;
    EXPECT_EQ(o.status().code(), StatusCode::kInvalidArgument) << c.text;
    EXPECT_NE(o.status().ToString().find(c.key), std::string::npos)
        << c.text << ": " << o.status().ToString();
  }
}

}  // namespace
}  // namespace rangeio
