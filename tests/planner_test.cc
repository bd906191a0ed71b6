// PlanReads and PlannerOptions: presets, validation, edge cases, and property
// tests over seeded random range sets checked against independent oracles
// (a byte-level simulation, a brute-force and a quadratic minimum).
#include "rangeio/planner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace rangeio {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
constexpr uint64_t KiB = 1024;
constexpr uint64_t MiB = 1024 * KiB;

Plan MustPlan(const std::vector<ByteRange>& ranges, const PlannerOptions& o) {
  Result<Plan> plan = PlanReads(ranges, o);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  return plan.ok() ? *std::move(plan) : Plan();
}

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
  EXPECT_THAT(plan.status().message(),
              AllOf(HasSubstr("range #2"), HasSubstr("18446744073709551614"),
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

// ------------------------------------------------------ property tests

// The byte at `offset` of the synthetic file.
uint8_t ContentAt(uint64_t offset) {
  return static_cast<uint8_t>((offset * 0x9E3779B97F4A7C15ull) >> 56);
}

// A random case: up to max_ranges ranges within a window of the address
// space (at 0, in the middle, or ending at its last byte), with duplicates,
// contained ranges, touching ranges and empty ones; and random options with
// ratios in quarters, so that the oracles can check the rule exactly.
struct Case {
  std::vector<ByteRange> ranges;
  PlannerOptions options;
  uint64_t ratio_quarters = 0;  // 0: no ratio limit
};

Case RandomCase(std::mt19937_64& rng, size_t max_ranges) {
  auto uniform = [&](uint64_t lo, uint64_t hi) {
    return std::uniform_int_distribution<uint64_t>(lo, hi)(rng);
  };
  auto pick = [&](std::initializer_list<uint64_t> values) {
    return *(values.begin() + uniform(0, values.size() - 1));
  };
  Case c;
  const uint64_t window = pick({64, 300, 2000});
  const uint64_t max_length = pick({4, 16, 64, 300});
  const uint64_t base =
      pick({0, uint64_t{1} << 40, kMax - window - max_length});
  const size_t n = uniform(0, max_ranges);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t kind = uniform(0, 9);
    if (kind == 0 && !c.ranges.empty()) {  // duplicate
      c.ranges.push_back(c.ranges[uniform(0, c.ranges.size() - 1)]);
    } else if (kind == 1 && !c.ranges.empty()) {  // contained
      const ByteRange outer = c.ranges[uniform(0, c.ranges.size() - 1)];
      const uint64_t from = uniform(0, outer.length);
      c.ranges.push_back(
          {outer.offset + from, uniform(0, outer.length - from)});
    } else if (kind == 2 && !c.ranges.empty()) {  // touching
      const ByteRange prev = c.ranges.back();
      c.ranges.push_back(
          {prev.end(), uniform(0, std::min(max_length, kMax - prev.end()))});
    } else {
      c.ranges.push_back(
          {base + uniform(0, window), uniform(kind == 3 ? 0 : 1, max_length)});
    }
  }
  PlannerOptions& o = c.options;
  o.coalesce = uniform(0, 7) != 0;
  o.coalesce_gap = pick({0, 1, 2, 5, 16, 64, 1000, kMax});
  c.ratio_quarters = pick({0, 4, 5, 6, 8, 12});
  o.max_overread_ratio = c.ratio_quarters == 0
                             ? PlannerOptions::kNoOverreadLimit
                             : static_cast<double>(c.ratio_quarters) / 4;
  o.max_merged_bytes = pick({1, 8, 32, 100, 400, kMax});
  o.split_bytes =
      uniform(0, 2) == 0
          ? PlannerOptions::kNoSplit
          : uniform(std::max<uint64_t>(
                        1, std::min<uint64_t>(o.max_merged_bytes, 500) / 8),
                    std::min<uint64_t>(o.max_merged_bytes, 500));
  return c;
}

// The oracles' own view of the input: ranges sharing a byte, joined.
struct Segment {
  uint64_t start;
  uint64_t end;
};

std::vector<Segment> SegmentsOf(const std::vector<ByteRange>& ranges) {
  std::vector<ByteRange> sorted;
  for (const ByteRange& r : ranges) {
    if (!r.empty()) sorted.push_back(r);
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const ByteRange& a, const ByteRange& b) {
              return a.offset < b.offset;
            });
  std::vector<Segment> out;
  for (const ByteRange& r : sorted) {
    if (!out.empty() && r.offset < out.back().end) {
      out.back().end = std::max(out.back().end, r.end());
    } else {
      out.push_back({r.offset, r.end()});
    }
  }
  return out;
}

// Reads one physical read needs for segment `s` alone.
uint64_t ReadsAlone(const Segment& s, const PlannerOptions& o) {
  const uint64_t length = s.end - s.start;
  return length > o.split_bytes ? (length + o.split_bytes - 1) / o.split_bytes
                                : 1;
}

// Whether segments [i, j] (j > i) may be one read, straight from the rules.
bool RunAllowed(const std::vector<Segment>& seg, size_t i, size_t j,
                const Case& c) {
  const PlannerOptions& o = c.options;
  if (!o.coalesce) return false;
  uint64_t requested = 0;
  for (size_t k = i; k <= j; ++k) {
    const uint64_t length = seg[k].end - seg[k].start;
    if (length > o.split_bytes || length > o.max_merged_bytes) return false;
    if (k > i && seg[k].start - seg[k - 1].end > o.coalesce_gap) return false;
    requested += length;
  }
  const uint64_t span = seg[j].end - seg[i].start;
  if (span > o.max_merged_bytes) return false;
  return c.ratio_quarters == 0 || 4 * span <= c.ratio_quarters * requested;
}

struct Cost {
  uint64_t reads;
  uint64_t bytes;
  bool operator<(const Cost& b) const {
    return reads != b.reads ? reads < b.reads : bytes < b.bytes;
  }
};

Cost RunCost(const std::vector<Segment>& seg, size_t i, size_t j,
             const PlannerOptions& o) {
  if (i == j) return {ReadsAlone(seg[i], o), seg[i].end - seg[i].start};
  return {1, seg[j].end - seg[i].start};
}

// Minimum over every partition of the segments into runs (s <= 16), each
// run checked from the rules as written.
Cost BruteForceMinimum(const std::vector<Segment>& seg, const Case& c) {
  const size_t s = seg.size();
  if (s == 0) return {0, 0};
  std::optional<Cost> best;
  for (uint32_t cuts = 0; cuts < (1u << (s - 1)); ++cuts) {
    Cost total{0, 0};
    bool ok = true;
    for (size_t i = 0, j = 0; j < s && ok; ++j) {
      if (j + 1 < s && !(cuts & (1u << j))) continue;  // run goes on
      if (i != j && !RunAllowed(seg, i, j, c)) ok = false;
      const Cost run = RunCost(seg, i, j, c.options);
      total.reads += run.reads;
      total.bytes += run.bytes;
      i = j + 1;
    }
    if (ok && (!best || total < *best)) best = total;
  }
  return *best;
}

// The same minimum by a quadratic dynamic program, for larger inputs: the
// run [i, j] is extended leftwards while the gap, alone-segment and length
// rules (which only get harder as i moves left) hold; the ratio is checked
// for each i.
Cost QuadraticMinimum(const std::vector<Segment>& seg, const Case& c) {
  const PlannerOptions& o = c.options;
  auto alone = [&](size_t k) {
    const uint64_t length = seg[k].end - seg[k].start;
    return length > o.split_bytes || length > o.max_merged_bytes;
  };
  const size_t s = seg.size();
  std::vector<Cost> best(s + 1);
  for (size_t j = 0; j < s; ++j) {
    const Cost single = RunCost(seg, j, j, o);
    best[j + 1] = {best[j].reads + single.reads, best[j].bytes + single.bytes};
    if (!o.coalesce || alone(j)) continue;
    uint64_t requested = seg[j].end - seg[j].start;
    for (size_t i = j; i-- > 0;) {
      if (alone(i) || seg[i + 1].start - seg[i].end > o.coalesce_gap) break;
      const uint64_t span = seg[j].end - seg[i].start;
      if (span > o.max_merged_bytes) break;
      requested += seg[i].end - seg[i].start;
      if (c.ratio_quarters != 0 && 4 * span > c.ratio_quarters * requested) {
        continue;
      }
      const Cost total{best[i].reads + 1, best[i].bytes + span};
      if (total < best[j + 1]) best[j + 1] = total;
    }
  }
  return best[s];
}

// Every check of a plan that holds whatever the minimum is. Simulates the
// reads against ContentAt and assembles every range from the map.
void CheckPlan(const Case& c, const Plan& plan) {
  const PlannerOptions& o = c.options;
  const std::vector<Segment> seg = SegmentsOf(c.ranges);
  uint64_t requested = 0;
  for (const Segment& s : seg) requested += s.end - s.start;
  EXPECT_EQ(plan.requested_bytes, requested);

  // Reads: sorted, disjoint, each whole segments (or parts of one), obeying
  // the rules of its kind.
  uint64_t physical = 0;
  size_t k = 0;  // next segment
  for (size_t r = 0; r < plan.reads.size(); ++r) {
    const PhysicalRead& read = plan.reads[r];
    SCOPED_TRACE("read " + std::to_string(r) + " " + read.range().ToString() +
                 " " + std::string(ReadKindName(read.kind)));
    ASSERT_GT(read.length, 0u);
    ASSERT_LE(read.length, kMax - read.offset);
    physical += read.length;
    if (r > 0) {
      ASSERT_LE(plan.reads[r - 1].end(), read.offset);
    }
    ASSERT_LT(k, seg.size());
    if (read.kind == ReadKind::kSplitPart) {
      EXPECT_LE(read.length, o.split_bytes);
      EXPECT_GE(read.length, o.split_bytes - o.split_bytes / 2);
      ASSERT_LE(seg[k].start, read.offset);
      ASSERT_LE(read.end(), seg[k].end);
      if (read.end() == seg[k].end) ++k;
      continue;
    }
    ASSERT_EQ(read.offset, seg[k].start) << "a read starts at a segment";
    uint64_t in_read = 0;
    size_t count = 0;
    for (; k < seg.size() && seg[k].end <= read.end(); ++k, ++count) {
      if (count > 0) {
        EXPECT_LE(seg[k].start - seg[k - 1].end, o.coalesce_gap);
      }
      in_read += seg[k].end - seg[k].start;
    }
    ASSERT_GT(count, 0u);
    ASSERT_EQ(seg[k - 1].end, read.end()) << "a read ends at a segment";
    if (read.kind == ReadKind::kOversize) {
      EXPECT_EQ(count, 1u);
      EXPECT_EQ(o.split_bytes, PlannerOptions::kNoSplit);
      EXPECT_GT(read.length, o.max_merged_bytes);
      continue;
    }
    EXPECT_LE(read.length, o.max_merged_bytes);
    if (count > 1) {
      EXPECT_TRUE(o.coalesce);
      if (c.ratio_quarters != 0) {
        EXPECT_LE(4 * read.length, c.ratio_quarters * in_read);
      }
    }
  }
  EXPECT_EQ(k, seg.size()) << "every segment is read";
  EXPECT_EQ(plan.physical_bytes, physical);

  // Bytes: every range assembled from the simulated reads equals the file.
  std::vector<std::vector<uint8_t>> buffers;
  for (const PhysicalRead& read : plan.reads) {
    std::vector<uint8_t> b(read.length);
    for (uint64_t t = 0; t < read.length; ++t)
      b[t] = ContentAt(read.offset + t);
    buffers.push_back(std::move(b));
  }
  ASSERT_EQ(plan.locations.size(), c.ranges.size());
  for (size_t i = 0; i < c.ranges.size(); ++i) {
    const ByteRange& want = c.ranges[i];
    const RangeLocation& loc = plan.locations[i];
    SCOPED_TRACE("range #" + std::to_string(i) + " " + want.ToString());
    ASSERT_EQ(loc.length, want.length);
    if (want.empty()) {
      EXPECT_EQ(loc, RangeLocation());
      continue;
    }
    ASSERT_GE(loc.read_count, 1u);
    ASSERT_LE(loc.read + loc.read_count, plan.reads.size());
    std::vector<uint8_t> got(want.length, 0);
    std::vector<bool> written(want.length, false);
    for (const RangePart& part : plan.Parts(i)) {
      ASSERT_LT(part.read, buffers.size());
      ASSERT_LE(part.offset_in_read + part.length, buffers[part.read].size());
      ASSERT_LE(part.offset_in_range + part.length, want.length);
      if (loc.read_count > 1) {
        EXPECT_EQ(plan.reads[part.read].kind, ReadKind::kSplitPart);
      }
      for (uint64_t t = 0; t < part.length; ++t) {
        ASSERT_FALSE(written[part.offset_in_range + t]);
        written[part.offset_in_range + t] = true;
        got[part.offset_in_range + t] =
            buffers[part.read][part.offset_in_read + t];
      }
    }
    ASSERT_EQ(std::count(written.begin(), written.end(), false), 0);
    if (loc.read_count == 1) {
      EXPECT_LE(loc.offset + want.length, plan.reads[loc.read].length);
    }
    for (uint64_t t = 0; t < want.length; ++t) {
      ASSERT_EQ(got[t], ContentAt(want.offset + t)) << "byte " << t;
    }
  }
}

// Planning a permutation of the ranges gives the same reads and the same
// locations, permuted.
void CheckOrderIndependent(const Case& c, const Plan& plan,
                           std::mt19937_64& rng) {
  std::vector<size_t> perm(c.ranges.size());
  std::iota(perm.begin(), perm.end(), size_t{0});
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<ByteRange> shuffled;
  shuffled.reserve(perm.size());
  for (size_t p : perm) shuffled.push_back(c.ranges[p]);
  const Plan other = MustPlan(shuffled, c.options);
  EXPECT_EQ(other.reads, plan.reads);
  for (size_t i = 0; i < perm.size(); ++i) {
    EXPECT_EQ(other.locations[i], plan.locations[perm[i]]);
  }
}

std::string Describe(const Case& c) {
  std::string s = c.options.ToString() + " ranges:";
  for (const ByteRange& r : c.ranges) {
    s += " " + std::to_string(r.offset) + "+" + std::to_string(r.length);
  }
  return s;
}

// Small inputs: the plan is checked byte by byte and its cost is the
// minimum over every partition that obeys the rules.
TEST(PlannerPropertyTest, SmallRandomSetsAreCorrectAndMinimal) {
  std::mt19937_64 rng(20240611);
  for (int iter = 0; iter < 4000; ++iter) {
    const Case c = RandomCase(rng, 12);
    SCOPED_TRACE("iteration " + std::to_string(iter) + ": " + Describe(c));
    const Plan plan = MustPlan(c.ranges, c.options);
    ASSERT_NO_FATAL_FAILURE(CheckPlan(c, plan));
    const std::vector<Segment> seg = SegmentsOf(c.ranges);
    const Cost want = BruteForceMinimum(seg, c);
    ASSERT_EQ(plan.reads.size(), want.reads);
    ASSERT_EQ(plan.physical_bytes, want.bytes);
    const Cost quadratic = QuadraticMinimum(seg, c);
    ASSERT_EQ(quadratic.reads, want.reads) << "the oracles disagree";
    ASSERT_EQ(quadratic.bytes, want.bytes) << "the oracles disagree";
    if (iter % 4 == 0) CheckOrderIndependent(c, plan, rng);
  }
}

// Larger inputs: same checks, minimum from the quadratic program.
TEST(PlannerPropertyTest, LargerRandomSetsAreCorrectAndMinimal) {
  std::mt19937_64 rng(7);
  for (int iter = 0; iter < 400; ++iter) {
    const Case c = RandomCase(rng, 300);
    SCOPED_TRACE("iteration " + std::to_string(iter));
    const Plan plan = MustPlan(c.ranges, c.options);
    ASSERT_NO_FATAL_FAILURE(CheckPlan(c, plan));
    const Cost want = QuadraticMinimum(SegmentsOf(c.ranges), c);
    ASSERT_EQ(plan.reads.size(), want.reads) << Describe(c);
    ASSERT_EQ(plan.physical_bytes, want.bytes) << Describe(c);
    CheckOrderIndependent(c, plan, rng);
  }
}

// Long chains of small ranges that could all share a read: where the
// over-read rule is decided over wide windows (the planner's segment tree).
TEST(PlannerPropertyTest, DenseChainsAreMinimal) {
  std::mt19937_64 rng(5);
  for (int iter = 0; iter < 300; ++iter) {
    Case c;
    const uint64_t window = iter % 2 == 0 ? 600 : 3000;
    const size_t n = std::uniform_int_distribution<size_t>(50, 300)(rng);
    for (size_t i = 0; i < n; ++i) {
      c.ranges.push_back(
          {std::uniform_int_distribution<uint64_t>(0, window)(rng),
           std::uniform_int_distribution<uint64_t>(1, 12)(rng)});
    }
    const uint64_t quarters[] = {5, 6, 8, 12};
    c.ratio_quarters = quarters[iter % 4];
    c.options.max_overread_ratio = static_cast<double>(c.ratio_quarters) / 4;
    c.options.coalesce_gap = iter % 3 == 0 ? kMax : 40;
    c.options.max_merged_bytes = iter % 5 == 0 ? 300 : kMax;
    c.options.split_bytes = PlannerOptions::kNoSplit;
    SCOPED_TRACE("iteration " + std::to_string(iter));
    const Plan plan = MustPlan(c.ranges, c.options);
    ASSERT_NO_FATAL_FAILURE(CheckPlan(c, plan));
    const Cost want = QuadraticMinimum(SegmentsOf(c.ranges), c);
    ASSERT_EQ(plan.reads.size(), want.reads) << Describe(c);
    ASSERT_EQ(plan.physical_bytes, want.bytes) << Describe(c);
  }
}

// Every preset on a realistic layout: scattered 4-64 KiB ranges.
TEST(PlannerPropertyTest, PresetsOnScatteredRanges) {
  std::mt19937_64 rng(3);
  for (const char* name : {"none", "local", "object-store"}) {
    Case c;
    c.options = *PlannerOptions::FromPreset(name);
    c.ratio_quarters = c.options.max_overread_ratio == 2.0 ? 8 : 0;
    for (int i = 0; i < 200; ++i) {
      c.ranges.push_back(
          {std::uniform_int_distribution<uint64_t>(0, 8 * MiB)(rng),
           std::uniform_int_distribution<uint64_t>(4 * KiB, 64 * KiB)(rng)});
    }
    SCOPED_TRACE(name);
    const Plan plan = MustPlan(c.ranges, c.options);
    ASSERT_NO_FATAL_FAILURE(CheckPlan(c, plan));
    EXPECT_EQ(plan.reads.size(),
              QuadraticMinimum(SegmentsOf(c.ranges), c).reads);
  }
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
