#include "rangeio/planner.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace rangeio {
namespace {

// Signed 128-bit integers make the over-read rule exact: its terms are
// products of a 52-bit fixed-point ratio and 64-bit byte counts. GCC and
// Clang both have the type; __extension__ keeps -Wpedantic quiet about it.
__extension__ typedef __int128 Int128;

// The ratio is applied as floor(ratio * 2^32) / 2^32.
constexpr int kRatioFractionBits = 32;

// A non-empty requested range: its offset and its index in the request.
struct Entry {
  uint64_t offset;
  size_t index;
};

// Sorts by offset. Above a few thousand entries, a least-significant-digit
// radix sort (one byte per pass, skipping a byte that all offsets share, as
// the high bytes of offsets into one file do) is O(n) per pass, a few times
// faster than std::sort on 100,000 random offsets.
void SortByOffset(std::vector<Entry>& entries) {
  auto by_offset = [](const Entry& a, const Entry& b) {
    return a.offset < b.offset;
  };
  if (std::is_sorted(entries.begin(), entries.end(), by_offset)) return;
  if (entries.size() < 4096) {
    std::sort(entries.begin(), entries.end(), by_offset);
    return;
  }
  constexpr int kBytes = 8;
  std::array<std::array<size_t, 256>, kBytes> counts{};
  for (const Entry& e : entries) {
    for (int d = 0; d < kBytes; ++d) ++counts[d][(e.offset >> (8 * d)) & 0xff];
  }
  std::vector<Entry> buffer(entries.size());
  for (int d = 0; d < kBytes; ++d) {
    std::array<size_t, 256>& next = counts[d];
    if (next[(entries[0].offset >> (8 * d)) & 0xff] == entries.size()) {
      continue;
    }
    size_t sum = 0;
    for (size_t& c : next) sum += std::exchange(c, sum);
    for (const Entry& e : entries) {
      buffer[next[(e.offset >> (8 * d)) & 0xff]++] = e;
    }
    entries.swap(buffer);
  }
}

// Ranges that share a byte, joined: the unit a plan reads or splits.
struct Segment {
  uint64_t start = 0;
  uint64_t end = 0;
  uint64_t parts = 1;  // > 1 when split into this many equal parts
  bool alone = false;  // split, or oversize: never shares a read

  uint64_t length() const { return end - start; }
};

// Equal parts of a split segment: the first `rem` parts have base + 1 bytes,
// the others `base` (>= 1, since parts <= length).
struct SplitGeometry {
  uint64_t base = 0;
  uint64_t rem = 0;

  SplitGeometry(uint64_t length, uint64_t parts)
      : base(length / parts), rem(length % parts) {}
  uint64_t Start(uint64_t part) const {
    return part * base + std::min(part, rem);
  }
  uint64_t Length(uint64_t part) const { return base + (part < rem ? 1 : 0); }
  // The part holding byte `x` of the segment.
  uint64_t PartOf(uint64_t x) const {
    const uint64_t long_bytes = rem * (base + 1);
    return x < long_bytes ? x / (base + 1) : rem + (x - long_bytes) / base;
  }
};

// A way to end the plan of segments [0, start) and begin a run at `start`:
// `reads` and `skipped` = start's offset minus the bytes read before it.
// A run [start, j] then costs reads + 1 reads and end(j) - skipped bytes, so
// the best start has the fewest reads, then the most skipped bytes (ties:
// the later start, for a deterministic plan).
struct RunStart {
  uint64_t reads = std::numeric_limits<uint64_t>::max();  // max: none
  uint64_t skipped = 0;
  size_t start = 0;
};

bool Better(const RunStart& a, const RunStart& b) {
  if (a.reads != b.reads) return a.reads < b.reads;
  if (a.skipped != b.skipped) return a.skipped > b.skipped;
  return a.start > b.start;
}

// Point updates and prefix minima (by Better) over slots [0, n).
class RunStartTree {
 public:
  explicit RunStartTree(size_t n) {
    while (width_ < n) width_ *= 2;
    nodes_.resize(2 * width_);
  }
  void Set(size_t slot, const RunStart& value) {
    size_t i = slot + width_;
    nodes_[i] = value;
    for (i /= 2; i > 0; i /= 2)
      nodes_[i] = Min(nodes_[2 * i], nodes_[2 * i + 1]);
  }
  // Best of slots [0, end).
  RunStart PrefixMin(size_t end) const {
    RunStart best;
    for (size_t l = width_, r = end + width_; l < r; l /= 2, r /= 2) {
      if (l & 1) best = Min(best, nodes_[l++]);
      if (r & 1) best = Min(best, nodes_[--r]);
    }
    return best;
  }

 private:
  static const RunStart& Min(const RunStart& a, const RunStart& b) {
    return Better(b, a) ? b : a;
  }
  size_t width_ = 1;
  std::vector<RunStart> nodes_;
};

// The over-read rule of a run [i, j]: with P[k] the requested bytes of
// segments [0, k) and q = floor(ratio * 2^32),
//   2^32 * (end_j - start_i) <= q * (P[j+1] - P[i])
//   <=>  Key(i) = q * P[i] - 2^32 * start_i
//        <= Threshold(j) = q * P[j+1] - 2^32 * end_j,
// a key of the run's start against a threshold of its end. Unlike the other
// rules it is not monotone in i: a long segment can make a run allowed whose
// shorter suffix is not.
class OverreadRule {
 public:
  OverreadRule(const std::vector<Segment>& segments, double ratio)
      : q_(static_cast<uint64_t>(std::ldexp(ratio, kRatioFractionBits))),
        segments_(segments),
        prefix_(segments.size() + 1) {
    for (size_t k = 0; k < segments.size(); ++k) {
      prefix_[k + 1] = prefix_[k] + segments[k].length();
    }
  }
  Int128 Key(size_t i) const {
    return static_cast<Int128>(q_) * prefix_[i] -
           (static_cast<Int128>(segments_[i].start) << kRatioFractionBits);
  }
  Int128 Threshold(size_t j) const {
    return static_cast<Int128>(q_) * prefix_[j + 1] -
           (static_cast<Int128>(segments_[j].end) << kRatioFractionBits);
  }

 private:
  uint64_t q_;
  const std::vector<Segment>& segments_;
  std::vector<uint64_t> prefix_;  // P
};

// Chooses the runs of a plan with the fewest reads, then the fewest bytes.
//
// A shortest path over segments: best[j + 1] (reads, bytes of the best plan
// of segments [0, j]) is the best over allowed starts i of best[i] plus the
// run [i, j]. No run crosses a segment that must be alone or a hole longer
// than coalesce_gap, so the segments between those ("chains") are solved
// one after the other. Within a chain, the starts allowed by the length rule
// form a window [left(j), j] that only moves right; the over-read rule then
// keeps an arbitrary subset of it. Small windows are scanned (O(window) per
// segment, the usual case: O(1)); a chain whose windows add up to more is
// solved with a segment tree over starts ranked by Key, where the allowed
// starts are a prefix of ranks (O(log m) per segment).
class RunChooser {
 public:
  RunChooser(const std::vector<Segment>& segments,
             const PlannerOptions& options)
      : segments_(segments),
        options_(options),
        run_start_(segments.size()),
        reads_(segments.size() + 1),
        bytes_(segments.size() + 1) {
    if (options.max_overread_ratio != PlannerOptions::kNoOverreadLimit) {
      rule_.emplace(segments, options.max_overread_ratio);
    }
  }

  // run_start[j], for each segment j that ends a run: its first segment.
  std::vector<size_t> Choose() && {
    const size_t n = segments_.size();
    for (size_t j = 0; j < n;) {
      if (!options_.coalesce || segments_[j].alone) {
        reads_[j + 1] = reads_[j] + segments_[j].parts;
        bytes_[j + 1] = bytes_[j] + segments_[j].length();
        run_start_[j] = j;
        ++j;
        continue;
      }
      size_t end = j + 1;
      while (end < n && !segments_[end].alone &&
             segments_[end].start - segments_[end - 1].end <=
                 options_.coalesce_gap) {
        ++end;
      }
      Chain(j, end);
      j = end;
    }
    return std::move(run_start_);
  }

 private:
  // Window sums beyond this many per segment switch a chain to the tree.
  static constexpr size_t kScanPerSegment = 16;

  // Segments [a, b): no alone segment, no hole beyond coalesce_gap.
  void Chain(size_t a, size_t b) {
    left_.resize(b - a);
    size_t window_sum = 0;
    for (size_t j = a, left = a; j < b; ++j) {
      while (segments_[j].end - segments_[left].start >
             options_.max_merged_bytes) {
        ++left;  // stops at j: a segment alone is <= max_merged_bytes
      }
      left_[j - a] = left;
      window_sum += j - left + 1;
    }
    if (!rule_) {
      SlidingMin(a, b);
    } else if (window_sum <= kScanPerSegment * (b - a)) {
      Scan(a, b);
    } else {
      Tree(a, b);
    }
  }

  RunStart StartAt(size_t i) const {
    return RunStart{reads_[i], segments_[i].start - bytes_[i], i};
  }
  void End(size_t j, const RunStart& best) {
    reads_[j + 1] = best.reads + 1;
    bytes_[j + 1] = segments_[j].end - best.skipped;
    run_start_[j] = best.start;
  }

  // Without the over-read rule every start in the window is allowed: the
  // best one is a sliding-window minimum: a queue of starts where each is
  // better than every newer one behind it, so the oldest is the best.
  void SlidingMin(size_t a, size_t b) {
    std::vector<size_t>& queue = queue_;
    queue.resize(b - a);
    size_t head = 0;
    size_t tail = 0;
    for (size_t j = a; j < b; ++j) {
      const size_t left = left_[j - a];
      const RunStart start = StartAt(j);
      while (tail > head && Better(start, StartAt(queue[tail - 1]))) --tail;
      while (head < tail && queue[head] < left) ++head;
      queue[tail++] = j;
      End(j, StartAt(queue[head]));
    }
  }

  void Scan(size_t a, size_t b) {
    for (size_t j = a; j < b; ++j) {
      const Int128 threshold = rule_->Threshold(j);
      RunStart best;
      for (size_t i = left_[j - a]; i <= j; ++i) {
        if (rule_->Key(i) > threshold) continue;
        const RunStart candidate = StartAt(i);
        if (Better(candidate, best)) best = candidate;
      }
      End(j, best);
    }
  }

  void Tree(size_t a, size_t b) {
    const size_t m = b - a;
    std::vector<Int128> keys(m);
    std::vector<size_t> by_key(m);
    for (size_t k = 0; k < m; ++k) {
      keys[k] = rule_->Key(a + k);
      by_key[k] = k;
    }
    std::sort(by_key.begin(), by_key.end(), [&](size_t x, size_t y) {
      return keys[x] != keys[y] ? keys[x] < keys[y] : x < y;
    });
    std::vector<size_t> rank(m);
    std::vector<Int128> sorted_keys(m);
    for (size_t r = 0; r < m; ++r) {
      rank[by_key[r]] = r;
      sorted_keys[r] = keys[by_key[r]];
    }
    RunStartTree tree(m);
    size_t cleared = a;  // starts [a, cleared) are out of the tree
    for (size_t j = a; j < b; ++j) {
      for (; cleared < left_[j - a]; ++cleared) {
        tree.Set(rank[cleared - a], RunStart());
      }
      tree.Set(rank[j - a], StartAt(j));
      const size_t allowed =
          std::upper_bound(sorted_keys.begin(), sorted_keys.end(),
                           rule_->Threshold(j)) -
          sorted_keys.begin();
      End(j, tree.PrefixMin(allowed));
    }
  }

  const std::vector<Segment>& segments_;
  const PlannerOptions& options_;
  std::optional<OverreadRule> rule_;
  std::vector<size_t> run_start_;
  std::vector<uint64_t> reads_;  // reads_[k], bytes_[k]: best plan of [0, k)
  std::vector<uint64_t> bytes_;
  std::vector<size_t> left_;   // left(j) of the current chain
  std::vector<size_t> queue_;  // of SlidingMin
};

}  // namespace

std::vector<RangePart> Plan::Parts(size_t index) const {
  const RangeLocation& loc = locations[index];
  std::vector<RangePart> parts;
  parts.reserve(loc.read_count);
  uint64_t done = 0;
  uint64_t offset = loc.offset;
  for (size_t k = 0; k < loc.read_count; ++k) {
    const PhysicalRead& read = reads[loc.read + k];
    const uint64_t n = std::min(loc.length - done, read.length - offset);
    parts.push_back({loc.read + k, offset, n, done});
    done += n;
    offset = 0;
  }
  return parts;
}

namespace {

// The non-empty ranges by offset (an empty one needs no read); an error for
// the first range whose end overflows.
Result<std::vector<Entry>> ByOffset(std::span<const ByteRange> ranges) {
  std::vector<Entry> order;
  order.reserve(ranges.size());
  for (size_t i = 0; i < ranges.size(); ++i) {
    const ByteRange& r = ranges[i];
    if (r.length > std::numeric_limits<uint64_t>::max() - r.offset) {
      return Status::InvalidArgument("range " + std::to_string(i) +
                                     " (offset " + std::to_string(r.offset) +
                                     ", length " + std::to_string(r.length) +
                                     "): offset + length overflows 64 bits");
    }
    if (r.length != 0) order.push_back({r.offset, i});
  }
  SortByOffset(order);
  return order;
}

// Ranges sharing a byte joined into their union, in offset order.
std::vector<Segment> Segments(std::span<const ByteRange> ranges,
                              const std::vector<Entry>& order) {
  std::vector<Segment> segments;
  segments.reserve(order.size());
  for (const Entry& e : order) {
    const ByteRange& r = ranges[e.index];
    if (segments.empty() || r.offset >= segments.back().end) {
      segments.push_back({r.offset, r.end()});
    } else {
      segments.back().end = std::max(segments.back().end, r.end());
    }
  }
  return segments;
}

// Marks the segments read alone (split into parts, or longer than a merged
// read may be) and counts the requested bytes; returns the split parts.
Result<uint64_t> MarkAlone(std::vector<Segment>& segments,
                           const PlannerOptions& options, Plan* plan) {
  uint64_t split_parts = 0;
  for (Segment& seg : segments) {
    const uint64_t length = seg.length();
    plan->requested_bytes += length;
    if (length > options.split_bytes) {
      seg.parts = length / options.split_bytes +
                  (length % options.split_bytes != 0 ? 1 : 0);
      seg.alone = true;
      split_parts += seg.parts;
      if (split_parts > kMaxSplitParts) {
        return Status::InvalidArgument(
            "splitting the ranges at " +
            ByteRange{seg.start, length}.ToString() +
            " into parts of split-bytes=" +
            std::to_string(options.split_bytes) +
            " brings the plan past its limit of " +
            std::to_string(kMaxSplitParts) +
            " split parts (raise split-bytes or plan fewer bytes at once)");
      }
    } else if (length > options.max_merged_bytes) {
      seg.alone = true;
    }
  }
  return split_parts;
}

// The reads, run by run; returns the first read of every segment.
std::vector<size_t> EmitReads(const std::vector<Segment>& segments,
                              const PlannerOptions& options,
                              uint64_t split_parts, Plan* plan) {
  const size_t n = segments.size();
  std::vector<bool> starts_run(n);
  size_t run_count = 0;
  {
    const std::vector<size_t> run_start =
        RunChooser(segments, options).Choose();
    for (size_t j = n; j > 0; j = run_start[j - 1], ++run_count) {
      starts_run[run_start[j - 1]] = true;
    }
  }
  std::vector<size_t> first_read(n);
  plan->reads.reserve(run_count + split_parts);
  for (size_t first = 0, last = 0; first < n; first = ++last) {
    while (last + 1 < n && !starts_run[last + 1]) ++last;
    const Segment& seg = segments[first];
    for (size_t k = first; k <= last; ++k) first_read[k] = plan->reads.size();
    if (seg.parts > 1) {
      const SplitGeometry split(seg.length(), seg.parts);
      for (uint64_t p = 0; p < seg.parts; ++p) {
        plan->reads.push_back({seg.start + split.Start(p), split.Length(p),
                               ReadKind::kSplitPart});
      }
    } else {
      const uint64_t length = segments[last].end - seg.start;
      plan->reads.push_back({seg.start, length,
                             length > options.max_merged_bytes
                                 ? ReadKind::kOversize
                                 : ReadKind::kWhole});
    }
  }
  for (const PhysicalRead& read : plan->reads) {
    plan->physical_bytes += read.length;
  }
  return first_read;
}

// The map: ranges by offset meet their segments in order.
void Locate(std::span<const ByteRange> ranges, const std::vector<Entry>& order,
            const std::vector<Segment>& segments,
            const std::vector<size_t>& first_read, Plan* plan) {
  plan->locations.resize(ranges.size());
  size_t k = 0;
  for (const Entry& e : order) {
    const ByteRange& r = ranges[e.index];
    while (r.offset >= segments[k].end) ++k;
    const Segment& seg = segments[k];
    RangeLocation& loc = plan->locations[e.index];
    loc.length = r.length;
    if (seg.parts > 1) {
      const SplitGeometry split(seg.length(), seg.parts);
      const uint64_t x = r.offset - seg.start;
      const uint64_t part = split.PartOf(x);
      loc.read = first_read[k] + part;
      loc.offset = x - split.Start(part);
      loc.read_count = split.PartOf(x + r.length - 1) - part + 1;
    } else {
      loc.read = first_read[k];
      loc.offset = r.offset - plan->reads[loc.read].offset;
      loc.read_count = 1;
    }
  }
}

}  // namespace

Result<Plan> PlanReads(std::span<const ByteRange> ranges,
                       const PlannerOptions& options) {
  RANGEIO_RETURN_NOT_OK(options.Validate());
  RANGEIO_ASSIGN_OR_RETURN(const std::vector<Entry> order, ByOffset(ranges));
  std::vector<Segment> segments = Segments(ranges, order);
  Plan plan;
  RANGEIO_ASSIGN_OR_RETURN(const uint64_t split_parts,
                           MarkAlone(segments, options, &plan));
  const std::vector<size_t> first_read =
      EmitReads(segments, options, split_parts, &plan);
  Locate(ranges, order, segments, first_read, &plan);
  return plan;
}

}  // namespace rangeio
