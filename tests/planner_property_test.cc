// PlanReads property tests: seeded random range sets checked against oracles.
//
// The oracles are independent of the planner: a byte-level simulation of
// the reads, a brute-force and a quadratic minimum. (Presets, validation
// and edge cases: planner_test.cc.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "rangeio/planner.h"
#include "support/test_util.h"

namespace rangeio {
namespace {

using testing::KiB;
using testing::kMax;
using testing::MiB;
using testing::MustPlan;

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

}  // namespace
}  // namespace rangeio
