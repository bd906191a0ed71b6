// planner_fuzz.cc — libFuzzer target for PlanReads, and the same checks as
// a gtest over the committed corpus (fuzz/corpus/planner/).
//
// Each input decodes into PlannerOptions and up to 512 ranges (any options
// and ranges, valid or not: overflowing ranges, NaN ratios, offsets at the
// end of the address space). PlanReads must then either refuse them with the
// error an independent check predicts, or return a plan that reads every
// requested byte, maps each range exactly onto its bytes, obeys every rule,
// is minimal (checked by brute force on small inputs) and does not depend on
// the order of the ranges. Any violation aborts with a description.
//
// Build and run with clang (libFuzzer comes with clang; Debian package
// libclang-rt-14-dev for clang-14), from the repository:
//   CXX=clang++-14 cmake -S . -B build-fuzz -G Ninja -DRANGEIO_BUILD_FUZZERS=ON
//   cmake --build build-fuzz --target planner_fuzz
//   cd build-fuzz && mkdir -p corpus   # new inputs go here, not into the repo
//   fuzz/planner_fuzz -max_total_time=60 corpus ../fuzz/corpus/planner
// -max_total_time=N runs for N seconds (.ci/run adds -timeout=10: an input
// that takes 10 s fails); a failing input is written to build-fuzz/crash-*
// and the exit code is non-zero.
// Add an input that found a bug to fuzz/corpus/planner/ once it is fixed:
// every gcc build replays the corpus (ctest -R PlannerFuzzCorpus).
//
// Input layout (bytes past the end read as 0):
//   u8    flags: bit 0 coalesce, bit 1 never split (split_bytes = kNoSplit)
//   size  coalesce_gap
//   u8    ratio: value % 8 picks 1.0, 1.25, 1.5, 2.0, 3.0, 1e6, inf, or the
//         next 8 bytes as a double (NaN, negative, ... must be refused)
//   size  max_merged_bytes
//   size  split_bytes (absent when bit 1 is set)
//   size  base offset
//   then, while bytes remain, ranges: u8 mode; offset = the next 8 bytes
//   when mode is odd, else base + u16 (wrapping); then size length.
// size: u8 s; s < 128: s; s < 192: u16 << (s - 128); s < 255:
//   2^64 - 1 - u16; s == 255: the next 8 bytes.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "rangeio/planner.h"

namespace rangeio {
namespace {

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
constexpr size_t kMaxRanges = 512;
// Brute force over partitions up to this many segments (2^(n-1) plans).
constexpr size_t kBruteForceSegments = 10;
// Simulate reads byte by byte up to this many physical bytes.
constexpr uint64_t kSimulateBytes = 1 << 16;
// Plans with more split parts than this (up to kMaxSplitParts) are valid but
// slow to check, and add nothing the unit tests do not cover: skipped.
constexpr uint64_t kMaxCheckedSplitParts = 1 << 12;

class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return pos_ >= size_; }
  uint64_t Bytes(int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) {
      v |= uint64_t{pos_ < size_ ? data_[pos_] : uint8_t{0}} << (8 * i);
      ++pos_;
    }
    return v;
  }
  uint64_t Size() {
    const uint64_t s = Bytes(1);
    if (s < 128) return s;
    if (s < 192) return Bytes(2) << (s - 128);
    if (s < 255) return kMax - Bytes(2);
    return Bytes(8);
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

struct Case {
  PlannerOptions options;
  std::vector<ByteRange> ranges;
};

Case Decode(const uint8_t* data, size_t size) {
  Input in(data, size);
  Case c;
  PlannerOptions& o = c.options;
  const uint64_t flags = in.Bytes(1);
  o.coalesce = flags & 1;
  o.coalesce_gap = in.Size();
  static constexpr double kRatios[] = {
      1.0, 1.25, 1.5, 2.0, 3.0, 1e6, PlannerOptions::kNoOverreadLimit};
  const uint64_t ratio = in.Bytes(1) % 8;
  if (ratio < 7) {
    o.max_overread_ratio = kRatios[ratio];
  } else {
    const uint64_t bits = in.Bytes(8);
    std::memcpy(&o.max_overread_ratio, &bits, sizeof bits);
  }
  o.max_merged_bytes = in.Size();
  o.split_bytes = (flags & 2) ? PlannerOptions::kNoSplit : in.Size();
  const uint64_t base = in.Size();
  while (!in.empty() && c.ranges.size() < kMaxRanges) {
    const uint64_t mode = in.Bytes(1);
    const uint64_t offset = (mode & 1) ? in.Bytes(8) : base + in.Bytes(2);
    c.ranges.push_back({offset, in.Size()});
  }
  return c;
}

// The error PlanReads must return for bad options, by an independent reading
// of the documented valid ranges: the key it must name, or none.
std::optional<std::string> InvalidOptionKey(const PlannerOptions& o) {
  const double r = o.max_overread_ratio;
  const bool ratio_ok =
      r >= 1.0 && (r <= 1e6 || r == PlannerOptions::kNoOverreadLimit);
  if (!ratio_ok) return "max-overread-ratio";  // NaN fails r >= 1.0 too
  if (o.max_merged_bytes < 1) return "max-merged-bytes";
  if (o.split_bytes < 1 ||
      (o.split_bytes > o.max_merged_bytes && o.split_bytes != kMax)) {
    return "split-bytes";
  }
  return std::nullopt;
}

struct Segment {
  uint64_t start;
  uint64_t end;
  uint64_t length() const { return end - start; }
};

// Ranges sharing a byte, joined (ranges that only touch stay apart).
std::vector<Segment> SegmentsOf(const std::vector<ByteRange>& ranges) {
  std::vector<ByteRange> sorted;
  for (const ByteRange& r : ranges) {
    if (r.length != 0) sorted.push_back(r);
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const ByteRange& a, const ByteRange& b) {
              return a.offset < b.offset;
            });
  std::vector<Segment> out;
  for (const ByteRange& r : sorted) {
    if (!out.empty() && r.offset < out.back().end) {
      out.back().end = std::max(out.back().end, r.offset + r.length);
    } else {
      out.push_back({r.offset, r.offset + r.length});
    }
  }
  return out;
}

uint64_t PartsOf(const Segment& s, const PlannerOptions& o) {
  return s.length() > o.split_bytes
             ? s.length() / o.split_bytes + (s.length() % o.split_bytes != 0)
             : 1;
}

// The over-read rule exactly as documented: the ratio as a multiple of 2^-32
// (rounded down), compared without rounding.
bool RatioAllows(const PlannerOptions& o, uint64_t span, uint64_t requested) {
  if (o.max_overread_ratio == PlannerOptions::kNoOverreadLimit) return true;
  __extension__ typedef unsigned __int128 U128;
  const auto q = static_cast<uint64_t>(std::ldexp(o.max_overread_ratio, 32));
  return (U128(span) << 32) <= U128(q) * requested;
}

bool Alone(const Segment& s, const PlannerOptions& o) {
  return s.length() > o.split_bytes || s.length() > o.max_merged_bytes;
}

// Whether segments [i, j] may be one read, from the rules as written.
bool RunAllowed(const std::vector<Segment>& seg, size_t i, size_t j,
                const PlannerOptions& o) {
  if (i == j) return true;
  if (!o.coalesce) return false;
  uint64_t requested = 0;
  for (size_t k = i; k <= j; ++k) {
    if (Alone(seg[k], o)) return false;
    if (k > i && seg[k].start - seg[k - 1].end > o.coalesce_gap) return false;
    requested += seg[k].length();
  }
  const uint64_t span = seg[j].end - seg[i].start;
  return span <= o.max_merged_bytes && RatioAllows(o, span, requested);
}

// (reads, bytes) of the best partition of the segments into runs.
std::pair<uint64_t, uint64_t> BruteForceMinimum(const std::vector<Segment>& seg,
                                                const PlannerOptions& o) {
  const size_t n = seg.size();
  std::pair<uint64_t, uint64_t> best{kMax, kMax};
  if (n == 0) return {0, 0};
  for (uint32_t cuts = 0; cuts < (1u << (n - 1)); ++cuts) {
    std::pair<uint64_t, uint64_t> total{0, 0};
    bool ok = true;
    for (size_t i = 0, j = 0; j < n && ok; ++j) {
      if (j + 1 < n && !(cuts & (1u << j))) continue;
      ok = RunAllowed(seg, i, j, o);
      total.first += i == j ? PartsOf(seg[i], o) : 1;
      total.second += seg[j].end - seg[i].start;
      i = j + 1;
    }
    if (ok) best = std::min(best, total);
  }
  return best;
}

uint8_t ContentAt(uint64_t offset) {
  return static_cast<uint8_t>((offset * 0x9E3779B97F4A7C15ull) >> 56);
}

#define CHECK_OR_RETURN(cond, what)                                        \
  do {                                                                     \
    if (!(cond)) return std::string("check failed: " #cond ": ") + (what); \
  } while (false)

std::string RangeText(const ByteRange& r) {
  return std::to_string(r.offset) + "+" + std::to_string(r.length);
}

// The reads: sorted, disjoint, covering exactly the segments, each obeying
// the rules of its kind.
std::string CheckReads(const Plan& plan, const std::vector<Segment>& seg,
                       const PlannerOptions& o) {
  size_t k = 0;
  uint64_t physical = 0;
  for (size_t r = 0; r < plan.reads.size(); ++r) {
    const PhysicalRead& read = plan.reads[r];
    const std::string at =
        "read " + std::to_string(r) + " " + RangeText(read.range());
    CHECK_OR_RETURN(read.length > 0 && read.length <= kMax - read.offset, at);
    CHECK_OR_RETURN(r == 0 || plan.reads[r - 1].end() <= read.offset, at);
    CHECK_OR_RETURN(k < seg.size(), at);
    physical += read.length;
    if (read.kind == ReadKind::kSplitPart) {
      const uint64_t parts = PartsOf(seg[k], o);
      // Parts: contiguous, equal +-1 byte, within the S/2..S band.
      CHECK_OR_RETURN(parts > 1, at);
      const uint64_t base = seg[k].length() / parts;
      CHECK_OR_RETURN(read.length == base || read.length == base + 1, at);
      CHECK_OR_RETURN(read.length <= o.split_bytes, at);
      CHECK_OR_RETURN(read.length >= o.split_bytes - o.split_bytes / 2, at);
      const bool first = read.offset == seg[k].start;
      CHECK_OR_RETURN(
          first || (r > 0 && plan.reads[r - 1].end() == read.offset), at);
      CHECK_OR_RETURN(read.end() <= seg[k].end, at);
      if (read.end() == seg[k].end) {  // the last part: all are there
        CHECK_OR_RETURN(r + 1 >= parts, at);
        CHECK_OR_RETURN(plan.reads[r + 1 - parts].offset == seg[k].start, at);
        ++k;
      }
      continue;
    }
    CHECK_OR_RETURN(read.offset == seg[k].start, at);
    uint64_t requested = 0;
    size_t count = 0;
    for (; k < seg.size() && seg[k].end <= read.end(); ++k, ++count) {
      CHECK_OR_RETURN(
          count == 0 || seg[k].start - seg[k - 1].end <= o.coalesce_gap, at);
      requested += seg[k].length();
    }
    CHECK_OR_RETURN(count > 0 && seg[k - 1].end == read.end(), at);
    if (read.kind == ReadKind::kOversize) {
      CHECK_OR_RETURN(count == 1, at);
      CHECK_OR_RETURN(o.split_bytes == PlannerOptions::kNoSplit, at);
      CHECK_OR_RETURN(read.length > o.max_merged_bytes, at);
      continue;
    }
    CHECK_OR_RETURN(read.kind == ReadKind::kWhole, at);
    CHECK_OR_RETURN(read.length <= o.max_merged_bytes, at);
    CHECK_OR_RETURN(count == 1 || o.coalesce, at);
    CHECK_OR_RETURN(count == 1 || RatioAllows(o, read.length, requested), at);
  }
  CHECK_OR_RETURN(k == seg.size(), "a segment has no read");
  CHECK_OR_RETURN(plan.physical_bytes == physical, "physical_bytes");
  return "";
}

// The map: every range's parts cover it exactly, and each byte comes from
// the same file offset it was asked for.
std::string CheckMap(const Plan& plan, const std::vector<ByteRange>& ranges) {
  CHECK_OR_RETURN(plan.locations.size() == ranges.size(), "");
  for (size_t i = 0; i < ranges.size(); ++i) {
    const ByteRange& want = ranges[i];
    const RangeLocation& loc = plan.locations[i];
    const std::string at =
        "range #" + std::to_string(i) + " " + RangeText(want);
    CHECK_OR_RETURN(loc.length == want.length, at);
    if (want.length == 0) {
      CHECK_OR_RETURN(loc == RangeLocation(), at);
      continue;
    }
    CHECK_OR_RETURN(loc.read_count >= 1, at);
    CHECK_OR_RETURN(loc.read < plan.reads.size() &&
                        plan.reads.size() - loc.read >= loc.read_count,
                    at);
    const std::vector<RangePart> parts = plan.Parts(i);
    CHECK_OR_RETURN(parts.size() == loc.read_count, at);
    uint64_t done = 0;
    for (const RangePart& p : parts) {
      const PhysicalRead& read = plan.reads[p.read];
      CHECK_OR_RETURN(p.offset_in_range == done && p.length > 0, at);
      CHECK_OR_RETURN(p.offset_in_read < read.length &&
                          p.length <= read.length - p.offset_in_read,
                      at);
      CHECK_OR_RETURN(
          read.offset + p.offset_in_read == want.offset + p.offset_in_range,
          at);
      CHECK_OR_RETURN(parts.size() == 1 || read.kind == ReadKind::kSplitPart,
                      at);
      done += p.length;
    }
    CHECK_OR_RETURN(done == want.length, at);
  }
  return "";
}

// The bytes themselves, for small plans: simulated reads, assembled ranges.
std::string CheckBytes(const Plan& plan, const std::vector<ByteRange>& ranges) {
  std::vector<std::vector<uint8_t>> buffers;
  for (const PhysicalRead& read : plan.reads) {
    std::vector<uint8_t> b(read.length);
    for (uint64_t t = 0; t < read.length; ++t)
      b[t] = ContentAt(read.offset + t);
    buffers.push_back(std::move(b));
  }
  for (size_t i = 0; i < ranges.size(); ++i) {
    std::vector<uint8_t> got(ranges[i].length);
    for (const RangePart& p : plan.Parts(i)) {
      std::memcpy(got.data() + p.offset_in_range,
                  buffers[p.read].data() + p.offset_in_read, p.length);
    }
    for (uint64_t t = 0; t < got.size(); ++t) {
      CHECK_OR_RETURN(
          got[t] == ContentAt(ranges[i].offset + t),
          "range #" + std::to_string(i) + " byte " + std::to_string(t));
    }
  }
  return "";
}

std::string CheckCase(const Case& c) {
  const PlannerOptions& o = c.options;
  // What PlanReads must refuse, in the documented order (options, ranges,
  // split parts), as the start of its InvalidArgument message.
  std::optional<std::string> refusal;
  std::vector<Segment> seg;
  uint64_t parts = 0;
  uint64_t requested = 0;
  if (const auto key = InvalidOptionKey(o)) {
    refusal = "option " + *key + "=";
  }
  for (size_t i = 0; i < c.ranges.size() && !refusal; ++i) {
    if (c.ranges[i].length > kMax - c.ranges[i].offset) {
      refusal = "range " + std::to_string(i) + " (";
    }
  }
  if (!refusal) {
    seg = SegmentsOf(c.ranges);
    for (const Segment& s : seg) {
      if (PartsOf(s, o) > 1) parts += PartsOf(s, o);
      requested += s.length();
    }
    if (parts > kMaxSplitParts) {
      refusal = "splitting the ranges at ";
    } else if (parts > kMaxCheckedSplitParts) {
      return "";
    }
  }

  const Result<Plan> plan = PlanReads(c.ranges, o);
  const std::string got =
      plan.ok() ? "a plan of " + std::to_string(plan->reads.size()) + " reads"
                : plan.status().ToString();
  if (refusal) {
    CHECK_OR_RETURN(
        !plan.ok() && plan.status().code() == StatusCode::kInvalidArgument &&
            plan.status().message().find(*refusal) == 0,
        o.ToString() + ": expected '" + *refusal + "...', got " + got);
    return "";
  }
  CHECK_OR_RETURN(plan.ok(), o.ToString() + " gave " + got);
  CHECK_OR_RETURN(plan->requested_bytes == requested, "requested_bytes");

  for (const std::string& error :
       {CheckReads(*plan, seg, o), CheckMap(*plan, c.ranges)}) {
    if (!error.empty()) return error + " with " + o.ToString();
  }
  if (plan->physical_bytes <= kSimulateBytes) {
    std::string error = CheckBytes(*plan, c.ranges);
    if (!error.empty()) return error;
  }
  if (seg.size() <= kBruteForceSegments) {
    const auto [reads, bytes] = BruteForceMinimum(seg, o);
    CHECK_OR_RETURN(plan->reads.size() == reads,
                    std::to_string(reads) + " reads suffice, " + got);
    CHECK_OR_RETURN(plan->physical_bytes == bytes,
                    std::to_string(bytes) + " bytes suffice with " +
                        std::to_string(reads) + " reads");
  }
  // The ranges in reverse order: the same reads, locations reversed.
  const std::vector<ByteRange> reversed(c.ranges.rbegin(), c.ranges.rend());
  const Result<Plan> other = PlanReads(reversed, o);
  CHECK_OR_RETURN(other.ok() && other->reads == plan->reads,
                  "the plan depends on the order of the ranges");
  for (size_t i = 0; i < c.ranges.size(); ++i) {
    CHECK_OR_RETURN(
        other->locations[c.ranges.size() - 1 - i] == plan->locations[i],
        "location of range #" + std::to_string(i));
  }
  return "";
}

}  // namespace

// Empty when PlanReads passes every check on this input.
std::string CheckPlannerInput(const uint8_t* data, size_t size) {
  return CheckCase(Decode(data, size));
}

}  // namespace rangeio

#ifdef RANGEIO_FUZZ_CORPUS_TEST
// The gtest build: every corpus file, then seeded mutations of them, through
// the same checks.
#include <gtest/gtest.h>

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

namespace rangeio {
namespace {

std::vector<std::vector<uint8_t>> ReadCorpus() {
  std::vector<std::vector<uint8_t>> corpus;
  for (const auto& entry :
       std::filesystem::directory_iterator(RANGEIO_PLANNER_CORPUS_DIR)) {
    std::ifstream file(entry.path(), std::ios::binary);
    corpus.emplace_back(std::istreambuf_iterator<char>(file),
                        std::istreambuf_iterator<char>());
  }
  return corpus;
}

TEST(PlannerFuzzCorpus, EveryFileReplays) {
  size_t files = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(RANGEIO_PLANNER_CORPUS_DIR)) {
    std::ifstream file(entry.path(), std::ios::binary);
    const std::vector<uint8_t> data((std::istreambuf_iterator<char>(file)),
                                    std::istreambuf_iterator<char>());
    EXPECT_EQ(CheckPlannerInput(data.data(), data.size()), "") << entry.path();
    ++files;
  }
  EXPECT_GE(files, 5u) << "corpus in " << RANGEIO_PLANNER_CORPUS_DIR;
}

// 20,000 seeded mutations of the corpus (bytes replaced, inserted,
// erased; random ranges appended): a small, deterministic fuzz run for
// every build.
TEST(PlannerFuzzCorpus, SeededMutations) {
  const std::vector<std::vector<uint8_t>> corpus = ReadCorpus();
  ASSERT_FALSE(corpus.empty());
  std::mt19937_64 rng(1);
  auto below = [&](size_t n) {
    return std::uniform_int_distribution<size_t>(0, n - 1)(rng);
  };
  auto position = [&](size_t n) {  // an iterator offset in [0, n)
    return static_cast<std::ptrdiff_t>(below(n));
  };
  for (int iter = 0; iter < 20000; ++iter) {
    std::vector<uint8_t> data = corpus[below(corpus.size())];
    for (size_t m = 1 + below(4); m > 0; --m) {
      const auto byte = static_cast<uint8_t>(rng());
      switch (below(4)) {
        case 0:
          if (!data.empty()) data[below(data.size())] = byte;
          break;
        case 1:
          data.insert(data.begin() + position(data.size() + 1), byte);
          break;
        case 2:
          if (!data.empty()) data.erase(data.begin() + position(data.size()));
          break;
        default:  // a range relative to the base, of length < 128
          for (uint8_t b :
               {uint8_t{0}, byte, uint8_t(rng()), uint8_t(rng() % 128)}) {
            data.push_back(b);
          }
      }
    }
    ASSERT_EQ(CheckPlannerInput(data.data(), data.size()), "")
        << "iteration " << iter;
  }
}

}  // namespace
}  // namespace rangeio

#else
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string error = rangeio::CheckPlannerInput(data, size);
  if (!error.empty()) {
    std::fprintf(stderr, "planner_fuzz: %s\n", error.c_str());
    std::abort();
  }
  return 0;
}
#endif
