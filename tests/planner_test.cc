// PlanReads and PlannerOptions: presets, validation, edge cases and cost.
// (Property tests against independent oracles: planner_property_test.cc.)
#include "rangeio/planner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "support/test_util.h"

namespace rangeio {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::KiB;
using testing::kMax;
using testing::MiB;
using testing::MustPlan;

std::vector<ByteRange> ReadRangesOf(const Plan& plan) {
  std::vector<ByteRange> out;
  for (const PhysicalRead& r : plan.reads) out.push_back(r.range());
  return out;
}

// Options that merge anything within the given limits.
PlannerOptions Coalescing(uint64_t gap, double ratio, uint64_t max_merged,
                          uint64_t split = PlannerOptions::kNoSplit) {
  PlannerOptions o;
  o.coalesce_gap = gap;
  o.max_overread_ratio = ratio;
  o.max_merged_bytes = max_merged;
  o.split_bytes = split;
  return o;
}

// ---------------------------------------------------------------- options

TEST(PlannerOptionsTest, DefaultsAreTheObjectStorePreset) {
  PlannerOptions o;
  EXPECT_TRUE(o.coalesce);
  EXPECT_EQ(o.coalesce_gap, 64 * KiB);
  EXPECT_EQ(o.max_overread_ratio, 2.0);
  EXPECT_EQ(o.max_merged_bytes, 16 * MiB);
  EXPECT_EQ(o.split_bytes, 16 * MiB);
  EXPECT_EQ(PlannerOptions::ObjectStore().ToString(), o.ToString());
  EXPECT_EQ(o.ToString(),
            "coalesce=true,coalesce-gap=65536,max-overread-ratio=2,"
            "max-merged-bytes=16777216,split-bytes=16777216");
}

TEST(PlannerOptionsTest, PresetsAreValidAndParse) {
  for (const char* name : {"none", "local", "object-store"}) {
    Result<PlannerOptions> o = PlannerOptions::FromPreset(name);
    ASSERT_TRUE(o.ok()) << name << ": " << o.status().ToString();
    EXPECT_TRUE(o->Validate().ok()) << name << ": " << o->Validate().ToString();
  }
  const PlannerOptions none = *PlannerOptions::FromPreset("none");
  EXPECT_FALSE(none.coalesce);
  EXPECT_EQ(none.split_bytes, PlannerOptions::kNoSplit);
  const PlannerOptions local = *PlannerOptions::FromPreset("local");
  EXPECT_TRUE(local.coalesce);
  EXPECT_EQ(local.coalesce_gap, 4 * KiB);
  EXPECT_EQ(local.max_overread_ratio, PlannerOptions::kNoOverreadLimit);
  EXPECT_EQ(local.max_merged_bytes, 8 * MiB);
  EXPECT_EQ(local.split_bytes, 8 * MiB);

  Result<PlannerOptions> bad = PlannerOptions::FromPreset("s3");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(),
              AllOf(HasSubstr("'s3'"), HasSubstr("none, local, object-store")));
}

// Sets one field through `mutate`; expects Validate to accept it, or to
// reject it with a message naming the key, the value and the valid range.
void ExpectValid(void (*mutate)(PlannerOptions&), bool valid, const char* key,
                 const char* value = "", const char* range = "") {
  PlannerOptions o;
  mutate(o);
  const Status s = o.Validate();
  if (valid) {
    EXPECT_TRUE(s.ok()) << o.ToString() << ": " << s.ToString();
    return;
  }
  ASSERT_FALSE(s.ok()) << o.ToString() << " should be rejected";
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr(std::string("option ") + key),
                                 HasSubstr(value), HasSubstr(range)));
  // PlanReads refuses them the same way, before looking at the ranges.
  const std::vector<ByteRange> ranges = {{0, 1}};
  EXPECT_EQ(PlanReads(ranges, o).status(), s);
}

TEST(PlannerOptionsTest, ValidateNamesOptionValueAndRange) {
  using O = PlannerOptions;
  ExpectValid([](O& o) { o.max_overread_ratio = 0.5; }, false,
              "max-overread-ratio", "'0.5'", "valid 1.0..1000000, or inf");
  ExpectValid([](O& o) { o.max_overread_ratio = 0.999; }, false,
              "max-overread-ratio", "'0.999'");
  ExpectValid([](O& o) { o.max_overread_ratio = -1; }, false,
              "max-overread-ratio", "'-1'");
  ExpectValid([](O& o) { o.max_overread_ratio = std::nan(""); }, false,
              "max-overread-ratio", "'nan'");
  ExpectValid([](O& o) { o.max_overread_ratio = 2e6; }, false,
              "max-overread-ratio", "'2e+06'");
  ExpectValid([](O& o) { o.max_overread_ratio = -O::kNoOverreadLimit; }, false,
              "max-overread-ratio", "'-inf'");
  ExpectValid([](O& o) { o.max_overread_ratio = 1.0; }, true, "");
  ExpectValid([](O& o) { o.max_overread_ratio = 1e6; }, true, "");
  ExpectValid([](O& o) { o.max_overread_ratio = O::kNoOverreadLimit; }, true,
              "");

  ExpectValid([](O& o) { o.max_merged_bytes = 0; }, false, "max-merged-bytes",
              "'0'", "valid 1..18446744073709551615 bytes");
  ExpectValid(
      [](O& o) {
        o.max_merged_bytes = 1;
        o.split_bytes = 1;
      },
      true, "");

  ExpectValid([](O& o) { o.split_bytes = 0; }, false, "split-bytes", "'0'",
              "valid 1..max-merged-bytes (16777216) bytes, or "
              "18446744073709551615 to never split");
  ExpectValid([](O& o) { o.split_bytes = o.max_merged_bytes + 1; }, false,
              "split-bytes", "'16777217'", "valid 1..max-merged-bytes");
  ExpectValid([](O& o) { o.split_bytes = O::kNoSplit; }, true, "");
  ExpectValid([](O& o) { o.split_bytes = 1; }, true, "");

  ExpectValid([](O& o) { o.coalesce_gap = kMax; }, true, "");
  ExpectValid([](O& o) { o.coalesce_gap = 0; }, true, "");
}

// ------------------------------------------------------------ edge cases

TEST(PlannerTest, EmptyInput) {
  const Plan plan = MustPlan({}, PlannerOptions());
  EXPECT_TRUE(plan.reads.empty());
  EXPECT_TRUE(plan.locations.empty());
  EXPECT_EQ(plan.requested_bytes, 0u);
  EXPECT_EQ(plan.physical_bytes, 0u);
}

TEST(PlannerTest, ZeroLengthRangesNeedNoRead) {
  const Plan plan = MustPlan({{5, 0}, {kMax, 0}, {0, 0}}, PlannerOptions());
  EXPECT_TRUE(plan.reads.empty());
  ASSERT_EQ(plan.locations.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(plan.locations[i], RangeLocation()) << i;
    EXPECT_TRUE(plan.Parts(i).empty());
  }
  // Mixed with real ranges, even inside one, they stay without a read.
  const Plan mixed = MustPlan({{10, 5}, {12, 0}}, PlannerOptions());
  ASSERT_EQ(mixed.reads.size(), 1u);
  EXPECT_EQ(mixed.locations[1].read_count, 0u);
}

TEST(PlannerTest, DuplicatesAndContainedRangesShareOneRead) {
  for (const PlannerOptions& o :
       {PlannerOptions::None(), PlannerOptions::Local(), PlannerOptions()}) {
    const Plan plan = MustPlan({{100, 50}, {110, 10}, {100, 50}, {149, 1}}, o);
    ASSERT_EQ(ReadRangesOf(plan), (std::vector<ByteRange>{{100, 50}}))
        << o.ToString();
    EXPECT_EQ(plan.locations[0], (RangeLocation{0, 0, 50, 1}));
    EXPECT_EQ(plan.locations[1], (RangeLocation{0, 10, 10, 1}));
    EXPECT_EQ(plan.locations[2], plan.locations[0]);
    EXPECT_EQ(plan.locations[3], (RangeLocation{0, 49, 1, 1}));
    EXPECT_EQ(plan.requested_bytes, 50u);
    EXPECT_EQ(plan.physical_bytes, 50u);
  }
}

TEST(PlannerTest, OverlappingRangesAreReadAsTheirUnionEvenWithoutCoalescing) {
  const Plan plan = MustPlan({{20, 10}, {0, 25}}, PlannerOptions::None());
  EXPECT_EQ(ReadRangesOf(plan), (std::vector<ByteRange>{{0, 30}}));
  EXPECT_EQ(plan.locations[0], (RangeLocation{0, 20, 10, 1}));
}

TEST(PlannerTest, AdjacentRangesMergeOnlyWhenCoalescing) {
  const std::vector<ByteRange> ranges = {{10, 10}, {0, 10}, {20, 5}};
  EXPECT_EQ(ReadRangesOf(MustPlan(ranges, Coalescing(0, 1.0, 100))),
            (std::vector<ByteRange>{{0, 25}}));
  EXPECT_EQ(ReadRangesOf(MustPlan(ranges, PlannerOptions::None())),
            (std::vector<ByteRange>{{0, 10}, {10, 10}, {20, 5}}));
  // Touching but too long together: max_merged_bytes keeps them apart.
  EXPECT_EQ(ReadRangesOf(MustPlan(ranges, Coalescing(0, 1.0, 20))),
            (std::vector<ByteRange>{{0, 20}, {20, 5}}));
}

TEST(PlannerTest, GapLimitIsInclusive) {
  const std::vector<ByteRange> ranges = {{0, 10}, {14, 10}};  // hole of 4
  EXPECT_EQ(MustPlan(ranges, Coalescing(4, 2.0, 100)).reads.size(), 1u);
  EXPECT_EQ(MustPlan(ranges, Coalescing(3, 2.0, 100)).reads.size(), 2u);
}

TEST(PlannerTest, OverreadRatioIsInclusiveAndExact) {
  // 10 + hole 10 + 10: 30 bytes read for 20 requested, a ratio of 1.5.
  const std::vector<ByteRange> ranges = {{0, 10}, {20, 10}};
  EXPECT_EQ(MustPlan(ranges, Coalescing(100, 1.5, 100)).reads.size(), 1u);
  EXPECT_EQ(MustPlan(ranges, Coalescing(100, 1.4999, 100)).reads.size(), 2u);
  // Exact far beyond double's 53-bit mantissa: 2^62 + 1 requested bytes in
  // a read of 2 x (2^62 + 1) is allowed at 2.0, one more hole byte is not.
  const uint64_t big = (uint64_t{1} << 62) + 1;
  const PlannerOptions o = Coalescing(kMax, 2.0, kMax);
  EXPECT_EQ(MustPlan({{0, big - 1}, {2 * big - 1, 1}}, o).reads.size(), 1u);
  EXPECT_EQ(MustPlan({{0, big - 1}, {2 * big, 1}}, o).reads.size(), 2u);
}

// The case that makes left-to-right greedy merging lose a read: greedy
// takes A+B (exactly max_merged_bytes), then cannot put C and D together
// (5 bytes read for 2 requested breaks the 2.0 ratio). Reading A alone lets
// B carry C and D: 2 reads instead of 3.
TEST(PlannerTest, RatioRuleNeedsMoreThanGreedy) {
  const std::vector<ByteRange> ranges = {
      {0, 60}, {60, 50}, {110, 1}, {114, 1}};  // A B C _ _ _ D
  const Plan plan = MustPlan(ranges, Coalescing(3, 2.0, 110));
  EXPECT_EQ(ReadRangesOf(plan), (std::vector<ByteRange>{{0, 60}, {60, 55}}));
}

// Among plans with the fewest reads, the one with the fewest bytes: both
// {0,1,2}{3} and {0}{1,2,3} use two reads; the second skips the big hole.
TEST(PlannerTest, FewestBytesAmongFewestReads) {
  const std::vector<ByteRange> ranges = {
      {0, 10}, {30, 10}, {42, 10}, {54, 10}};  // holes 20, 2, 2
  const Plan plan =
      MustPlan(ranges, Coalescing(20, PlannerOptions::kNoOverreadLimit, 40));
  EXPECT_EQ(ReadRangesOf(plan), (std::vector<ByteRange>{{0, 10}, {30, 34}}));
}

TEST(PlannerTest, SplitsLongRangesIntoEqualPartsWithinTheS3Band) {
  const PlannerOptions o;  // object store: 16 MiB parts
  const std::vector<ByteRange> ranges = {{0, 17 * MiB}, {kMax - 33 * MiB, 3}};
  const Plan plan = MustPlan(ranges, o);
  ASSERT_EQ(plan.reads.size(), 3u);
  EXPECT_EQ(plan.reads[0], (PhysicalRead{0, 8704 * KiB, ReadKind::kSplitPart}));
  EXPECT_EQ(plan.reads[1],
            (PhysicalRead{8704 * KiB, 8704 * KiB, ReadKind::kSplitPart}));
  EXPECT_EQ(plan.reads[2],
            (PhysicalRead{kMax - 33 * MiB, 3, ReadKind::kWhole}));
  EXPECT_EQ(plan.locations[0], (RangeLocation{0, 0, 17 * MiB, 2}));
  EXPECT_THAT(plan.Parts(0),
              ::testing::ElementsAre(RangePart{0, 0, 8704 * KiB, 0},
                                     RangePart{1, 0, 8704 * KiB, 8704 * KiB}));
  // Every part of any longer range is in [8, 16] MiB.
  for (uint64_t length : {16 * MiB + 1, 31 * MiB, 32 * MiB + 1, 1000 * MiB}) {
    const Plan p = MustPlan({{5, length}}, o);
    for (const PhysicalRead& r : p.reads) {
      EXPECT_GE(r.length, 8 * MiB) << length;
      EXPECT_LE(r.length, 16 * MiB) << length;
    }
  }
}

TEST(PlannerTest, RangesInsideASplitRangeMapToTheirParts) {
  // [0, 10) in parts of 3: lengths 4, 3, 3 ((+-1 byte), longest first).
  PlannerOptions o = Coalescing(0, 1.0, 4, 4);
  const Plan plan = MustPlan({{0, 10}, {3, 2}, {5, 2}, {4, 6}, {9, 1}}, o);
  ASSERT_EQ(ReadRangesOf(plan),
            (std::vector<ByteRange>{{0, 4}, {4, 3}, {7, 3}}));
  EXPECT_EQ(plan.locations[1], (RangeLocation{0, 3, 2, 2}));
  EXPECT_THAT(plan.Parts(1), ::testing::ElementsAre(RangePart{0, 3, 1, 0},
                                                    RangePart{1, 0, 1, 1}));
  EXPECT_EQ(plan.locations[2], (RangeLocation{1, 1, 2, 1}));  // zero-copy
  EXPECT_EQ(plan.locations[3], (RangeLocation{1, 0, 6, 2}));
  EXPECT_EQ(plan.locations[4], (RangeLocation{2, 2, 1, 1}));
}

TEST(PlannerTest, SplitRangesAreNotMergedWithNeighbours) {
  PlannerOptions o = Coalescing(100, 2.0, 10, 10);
  const Plan plan = MustPlan({{0, 2}, {2, 12}, {14, 2}}, o);
  EXPECT_EQ(ReadRangesOf(plan),
            (std::vector<ByteRange>{{0, 2}, {2, 6}, {8, 6}, {14, 2}}));
}

TEST(PlannerTest, RangeLongerThanMaxMergedIsFlaggedWhenSplittingIsOff) {
  const PlannerOptions o = Coalescing(100, 2.0, 12);  // kNoSplit
  const Plan plan = MustPlan({{0, 5}, {5, 13}, {18, 5}, {25, 5}}, o);
  ASSERT_EQ(plan.reads.size(), 3u);
  EXPECT_EQ(plan.reads[0], (PhysicalRead{0, 5, ReadKind::kWhole}));
  EXPECT_EQ(plan.reads[1], (PhysicalRead{5, 13, ReadKind::kOversize}));
  EXPECT_EQ(plan.reads[2], (PhysicalRead{18, 12, ReadKind::kWhole}));
  EXPECT_EQ(ReadKindName(plan.reads[1].kind), "oversize");
  // Overlapping ranges that are each short enough still make one oversize
  // union: bytes are never read twice.
  const Plan joined = MustPlan({{0, 8}, {4, 10}}, o);
  EXPECT_EQ(joined.reads,
            (std::vector<PhysicalRead>{{0, 14, ReadKind::kOversize}}));
}

TEST(PlannerTest, OverflowingRangeIsRejectedByIndex) {
  const std::vector<ByteRange> ranges = {{0, 1}, {kMax, 0}, {kMax - 1, 2}};
  Result<Plan> plan = PlanReads(ranges, PlannerOptions());
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(plan.status().message(), AllOf(HasSubstr("range 2 (offset"),
                                             HasSubstr("18446744073709551614"),
                                             HasSubstr("overflows 64 bits")));
}

TEST(PlannerTest, RangesAtTheEndOfTheAddressSpace) {
  // The last byte there is, split and coalesced, with gaps and lengths whose
  // sums would wrap if computed carelessly.
  const std::vector<ByteRange> ranges = {
      {kMax - 1, 1}, {kMax - 10, 3}, {0, 1}, {kMax - 100, 50}};
  const Plan all = MustPlan(ranges, Coalescing(kMax, 2.0, kMax));
  EXPECT_EQ(ReadRangesOf(all),
            (std::vector<ByteRange>{{0, 1}, {kMax - 100, 100}}));
  const Plan split = MustPlan({{kMax - 7, 7}}, Coalescing(0, 1.0, 2, 2));
  EXPECT_EQ(ReadRangesOf(split),
            (std::vector<ByteRange>{
                {kMax - 7, 2}, {kMax - 5, 2}, {kMax - 3, 2}, {kMax - 1, 1}}));
  // The whole address space bar one byte, as one range.
  const Plan huge =
      MustPlan({{0, kMax}, {kMax - 1, 1}}, PlannerOptions::None());
  EXPECT_EQ(huge.reads,
            (std::vector<PhysicalRead>{{0, kMax, ReadKind::kWhole}}));
  EXPECT_EQ(huge.locations[1], (RangeLocation{0, kMax - 1, 1, 1}));
}

TEST(PlannerTest, TooManySplitPartsIsRefused) {
  const PlannerOptions o = Coalescing(0, 1.0, 1 * MiB, 1);
  const std::vector<ByteRange> at_limit = {{0, kMaxSplitParts}};
  EXPECT_TRUE(PlanReads(at_limit, o).ok());
  const std::vector<ByteRange> ranges = {{0, 4}, {10, kMaxSplitParts}};
  Result<Plan> plan = PlanReads(ranges, o);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(plan.status().message(),
              AllOf(HasSubstr("[10, 1048586)"), HasSubstr("split-bytes=1"),
                    HasSubstr("1048576 split parts")));
}

// ------------------------------------------------------------- cost

// 100,000 ranges plan in a few milliseconds: O(n log n), not quadratic, also
// when every range could merge with every other one (one huge window).
TEST(PlannerCostTest, HundredThousandRanges) {
  std::mt19937_64 rng(11);
  struct Layout {
    const char* name;
    uint64_t spread;
    uint64_t max_length;
  };
  for (const Layout& layout :
       {Layout{"scattered over 64 GiB", 64ull << 30, 64 * KiB},
        Layout{"dense in 4 MiB", 4 * MiB, 100}}) {
    std::vector<ByteRange> ranges;
    ranges.reserve(100'000);
    for (int i = 0; i < 100'000; ++i) {
      ranges.push_back(
          {std::uniform_int_distribution<uint64_t>(0, layout.spread)(rng),
           std::uniform_int_distribution<uint64_t>(1, layout.max_length)(rng)});
    }
    for (const PlannerOptions& o :
         {PlannerOptions(), PlannerOptions::Local(), PlannerOptions::None()}) {
      const auto start = std::chrono::steady_clock::now();
      const Plan plan = MustPlan(ranges, o);
      const double ms = std::chrono::duration<double, std::milli>(
                            std::chrono::steady_clock::now() - start)
                            .count();
      std::printf("%s, %s: %zu reads in %.2f ms\n", layout.name,
                  o.ToString().c_str(), plan.reads.size(), ms);
      // Generous for sanitizer builds on a shared machine; a quadratic
      // plan would take minutes.
      EXPECT_LT(ms, 2000.0);
    }
  }
}

}  // namespace
}  // namespace rangeio
