// rangeio/planner.h — turns requested byte ranges into physical reads.
//
// PlanReads is a pure function (no I/O, no threads, no global state). It takes
// the ranges a caller asked for and returns the reads to issue plus a map that
// says, for each requested range, where its bytes are in those reads:
//   - bytes that several ranges share are read once: ranges that share at
//     least one byte (duplicates, containment, overlap) always land in the same
//     read, or the same split range;
//   - neighbouring ranges are coalesced into one read when the rules of
//     PlannerOptions allow, choosing among all plans that obey them one with
//     the fewest reads and, among those, the fewest bytes (see PlanReads);
//   - a range longer than split_bytes is read as equal parts, in parallel, and
//     assembled with one copy;
//   - a zero-length range needs no read.
// A range inside one read is handed out as a zero-copy slice of that read's
// buffer; a range that spans parts of a split is copied together once.
//
// Thread-safety: PlanReads is reentrant; PlannerOptions and Plan are values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rangeio/byte_range.h"
#include "rangeio/export.h"
#include "rangeio/status.h"

namespace rangeio {

// The rules a plan obeys. Each field is named in errors by the key after it.
// The field defaults are the ObjectStore() preset; where each preset's numbers
// come from is written in planner.cc, above the preset.
struct RANGEIO_EXPORT PlannerOptions {
  // split_bytes value that never splits (no range is longer than 2^64 - 1).
  static constexpr uint64_t kNoSplit = std::numeric_limits<uint64_t>::max();
  // max_overread_ratio value that puts no bound on over-read.
  static constexpr double kNoOverreadLimit =
      std::numeric_limits<double>::infinity();
  // Largest finite max_overread_ratio (beyond it, use kNoOverreadLimit).
  static constexpr double kMaxFiniteOverreadRatio = 1e6;

  // Key "coalesce". false: no two ranges that share no byte are ever merged
  // into one read (the non-coalescing baseline); coalesce_gap and
  // max_overread_ratio are then not used.
  bool coalesce = true;

  // Key "coalesce-gap". Two ranges may share a read only when the hole
  // between them is at most this many bytes (0: only touching ranges). Any
  // value is valid. Default 64 KiB (Lance's object-store block size).
  uint64_t coalesce_gap = 64 << 10;

  // Key "max-overread-ratio". A read made of several ranges spans at most
  // this many times the bytes requested in it (the Paimon rule, where it is
  // 2.0): read length <= ratio x requested bytes, so half of a read can be
  // holes at 2.0. Valid 1.0..1e6, or kNoOverreadLimit. Applied exactly for
  // multiples of 2^-32 (2.0, 1.5, 1.25, ...); others are rounded down by less
  // than 2.4e-10.
  double max_overread_ratio = 2.0;

  // Key "max-merged-bytes". No read made of several ranges, and no part of a
  // split range, is longer than this. One range (or union of overlapping
  // ranges) longer than this is still read whole when splitting is off, and
  // its read says so (ReadKind::kOversize). Valid 1..2^64 - 1. Default 16 MiB.
  uint64_t max_merged_bytes = 16 << 20;

  // Key "split-bytes". A range (or union of overlapping ranges) longer than
  // this is read as ceil(length / split_bytes) parts of equal length (+-1
  // byte), each at most split_bytes and at least half of it. Valid
  // 1..max_merged_bytes, or kNoSplit: a larger value would leave a range
  // between the two that is neither split nor within max_merged_bytes.
  // Default 16 MiB.
  uint64_t split_bytes = 16 << 20;

  // No coalescing and no splitting: one read per distinct requested range.
  // The benchmarks' non-coalescing case.
  static PlannerOptions None();
  // Local files: 4 KiB gaps (Lance), no ratio, 8 MiB reads.
  static PlannerOptions Local();
  // Object stores (S3 and compatibles): 64 KiB gaps, ratio 2.0, 16 MiB reads
  // and parts. The field defaults.
  static PlannerOptions ObjectStore();
  // "none", "local" or "object-store"; InvalidArgument naming the known ones.
  static Result<PlannerOptions> FromPreset(std::string_view name);

  // InvalidArgument naming the field (by its key), its value and valid range.
  Status Validate() const;

  // "coalesce=true,coalesce-gap=65536,..." (for logs and test failures).
  std::string ToString() const;
};

// Why a physical read has the extent it has.
enum class ReadKind : uint8_t {
  // Whole requested ranges: one, or several coalesced under the rules.
  kWhole,
  // One of the equal parts of a range longer than split_bytes.
  kSplitPart,
  // One range (or union of overlapping ranges) longer than max_merged_bytes,
  // read whole because split_bytes is kNoSplit: the one case where a read
  // exceeds max_merged_bytes.
  kOversize,
};

// "whole", "split part" or "oversize".
RANGEIO_EXPORT std::string_view ReadKindName(ReadKind kind);

// One read to issue against the source.
struct PhysicalRead {
  uint64_t offset = 0;
  uint64_t length = 0;  // > 0
  ReadKind kind = ReadKind::kWhole;

  uint64_t end() const { return offset + length; }
  ByteRange range() const { return {offset, length}; }
  friend bool operator==(const PhysicalRead&, const PhysicalRead&) = default;
};

// Where a requested range's bytes are in the plan's reads.
struct RangeLocation {
  size_t read = 0;      // index of the first read holding the range's bytes
  uint64_t offset = 0;  // where the range starts within that read
  uint64_t length = 0;  // the range's length, as requested
  // 0: an empty range, no read (read and offset are 0).
  // 1: the bytes are [offset, offset + length) of reads[read]: hand out a
  //    zero-copy slice of that read's buffer.
  // n > 1: the range spans the n consecutive parts reads[read..read + n) of a
  //    split range (contiguous in the file); Plan::Parts lists the copies.
  size_t read_count = 0;

  friend bool operator==(const RangeLocation&, const RangeLocation&) = default;
};

// One copy that assembles a range spanning several reads.
struct RangePart {
  size_t read = 0;               // index into Plan::reads
  uint64_t offset_in_read = 0;   // first byte to copy, within that read
  uint64_t length = 0;           // bytes to copy
  uint64_t offset_in_range = 0;  // where they go, within the range

  friend bool operator==(const RangePart&, const RangePart&) = default;
};

struct RANGEIO_EXPORT Plan {
  // Sorted by offset; disjoint (each byte is read at most once).
  std::vector<PhysicalRead> reads;
  // locations[i] is where ranges[i] is: the map keeps request order.
  std::vector<RangeLocation> locations;
  // Distinct bytes requested (the size of the union of the ranges) and bytes
  // read (the sum of the reads' lengths); their difference is the over-read.
  uint64_t requested_bytes = 0;
  uint64_t physical_bytes = 0;

  // The copies that assemble range `index` (precondition: < locations.size()),
  // in range order: none for an empty range, one for a zero-copy range.
  // Derived from locations[index] because the parts of a split range are
  // consecutive reads without holes; this keeps the map at one fixed-size
  // entry per range, however many duplicates of a split range there are.
  std::vector<RangePart> Parts(size_t index) const;
};

// Most parts that splitting may add to one plan: 1,048,576 parts are 16 TiB
// at the default split_bytes; a plan that would need more (a huge range with
// a tiny split_bytes) is refused rather than allocated.
inline constexpr uint64_t kMaxSplitParts = 1 << 20;

// Plans the reads of `ranges` under `options`.
//
// Fails with InvalidArgument, checked in this order, when the options are
// invalid (naming the option, its value and valid range), when a range's
// offset + length overflows 64 bits (naming the first such range by its
// index), or when splitting would need more than kMaxSplitParts parts.
//
// The plan's reads: ranges sharing a byte are first joined into their union,
// a "segment" (ranges that only touch stay separate segments). A segment
// longer than split_bytes becomes its own equal parts; one longer than
// max_merged_bytes with splitting off becomes its own kOversize read. The
// other segments are partitioned into runs of neighbours, one read per run,
// where a run of several segments must satisfy all of: every hole <=
// coalesce_gap, length <= max_merged_bytes, and length <=
// max_overread_ratio x requested bytes in it. The plan has the fewest reads of
// all such partitions and, among those, the fewest bytes. Left-to-right greedy
// merging is not enough for that: the ratio rule can admit a run while
// rejecting a shorter one (a big range makes two small ones far apart worth
// reading together), so PlanReads solves it as a shortest path over segments.
//
// Cost, for n ranges making s segments: a sort by offset (skipped when
// already sorted; above 4,096 ranges a radix sort, one O(n) pass per byte in
// which offsets differ), then a dynamic program over the segments: O(s) when
// runs are short or there is no ratio, O(s log s) (a segment tree) where long
// runs of small ranges could all share a read; plus O(1) per part of a split
// range. Memory O(n + reads). About half the time of a large plan goes to
// first-touching the plan's memory.
RANGEIO_EXPORT Result<Plan> PlanReads(std::span<const ByteRange> ranges,
                                      const PlannerOptions& options);

}  // namespace rangeio
