#include "stream/plan_map.h"

#include <algorithm>

namespace rangeio::detail {
namespace {

// Plans `ranges`. In completion order the whole request is planned at once.
// In request order it is planned run by run, a run being consecutive
// requests with non-decreasing offsets (one run for a sorted request), so
// that a read only ever serves consecutive requests: the ordered stream
// then holds at most the reads of its next range, never a growing backlog
// of reads whose other ranges come later.
Result<Plan> PlanInOrder(std::span<const ByteRange> ranges,
                         const PlannerOptions& o, Delivery delivery) {
  if (delivery == Delivery::kAsCompleted) return PlanReads(ranges, o);
  Plan out;
  out.locations.reserve(ranges.size());
  for (size_t a = 0; a < ranges.size();) {
    size_t b = a + 1;
    while (b < ranges.size() && ranges[b].offset >= ranges[b - 1].offset) ++b;
    const ByteRange& r = ranges[a];
    if (b == a + 1 && r.length <= o.max_merged_bytes &&
        r.length <= o.split_bytes) {
      // A run of one range that needs no split: its own read (or none).
      if (r.length == 0) {
        out.locations.push_back({});
      } else {
        out.locations.push_back({out.reads.size(), 0, r.length, 1});
        out.reads.push_back({r.offset, r.length, ReadKind::kWhole});
        out.requested_bytes += r.length;
        out.physical_bytes += r.length;
      }
      a = b;
      continue;
    }
    RANGEIO_ASSIGN_OR_RETURN(Plan run, PlanReads(ranges.subspan(a, b - a), o));
    const size_t base = out.reads.size();
    out.reads.insert(out.reads.end(), run.reads.begin(), run.reads.end());
    for (RangeLocation loc : run.locations) {
      if (loc.read_count != 0) loc.read += base;
      out.locations.push_back(loc);
    }
    out.requested_bytes += run.requested_bytes;
    out.physical_bytes += run.physical_bytes;
    a = b;
  }
  return out;
}

// The largest response budget one range's split parts need at once: they
// are all held until the range is assembled.
bool SplitsFit(const Plan& plan, uint64_t budget_count, uint64_t budget_bytes) {
  for (const RangeLocation& loc : plan.locations) {
    if (loc.read_count < 2) continue;
    uint64_t bytes = 0;
    for (size_t p = loc.read; p < loc.read + loc.read_count; ++p) {
      bytes += plan.reads[p].length;
    }
    if (loc.read_count > budget_count || bytes > budget_bytes) return false;
  }
  return true;
}

// Puts the reads in the order of the first range each serves. The parts of
// a split range are consecutive reads that Plan::Parts walks, so each run
// of parts linked by a range spanning them moves as one block.
void OrderByRequest(Plan* plan) {
  const size_t n = plan->reads.size();
  std::vector<uint64_t> first(n, UINT64_MAX);  // first range of each read
  std::vector<bool> linked(n, false);          // read p and p + 1: one block
  for (size_t i = 0; i < plan->locations.size(); ++i) {
    const RangeLocation& loc = plan->locations[i];
    for (size_t p = loc.read; p < loc.read + loc.read_count; ++p) {
      first[p] = std::min<uint64_t>(first[p], i);
      if (p + 1 < loc.read + loc.read_count) linked[p] = true;
    }
  }
  struct Block {
    uint64_t key;
    size_t begin, end;
  };
  std::vector<Block> blocks;
  for (size_t p = 0; p < n; ++p) {
    if (p == 0 || !linked[p - 1]) blocks.push_back({UINT64_MAX, p, p});
    blocks.back().key = std::min(blocks.back().key, first[p]);
    blocks.back().end = p + 1;
  }
  std::stable_sort(
      blocks.begin(), blocks.end(),
      [](const Block& a, const Block& b) { return a.key < b.key; });
  std::vector<PhysicalRead> reads;
  std::vector<size_t> moved_to(n);
  reads.reserve(n);
  for (const Block& b : blocks) {
    for (size_t p = b.begin; p < b.end; ++p) {
      moved_to[p] = reads.size();
      reads.push_back(plan->reads[p]);
    }
  }
  plan->reads = std::move(reads);
  for (RangeLocation& loc : plan->locations) {
    if (loc.read_count != 0) loc.read = moved_to[loc.read];
  }
}

}  // namespace

void PlanMap::Index() {
  user_begin.assign(plan.reads.size() + 1, 0);
  for (const RangeLocation& loc : plan.locations) {
    for (size_t p = loc.read; p < loc.read + loc.read_count; ++p) {
      ++user_begin[p + 1];
    }
  }
  for (size_t p = 0; p < plan.reads.size(); ++p) {
    user_begin[p + 1] += user_begin[p];
  }
  users.resize(user_begin.back());
  std::vector<uint64_t> fill(user_begin.begin(), user_begin.end() - 1);
  for (size_t i = 0; i < plan.locations.size(); ++i) {
    const RangeLocation& loc = plan.locations[i];
    for (size_t p = loc.read; p < loc.read + loc.read_count; ++p) {
      users[fill[p]++] = i;
    }
  }
}

std::string PlanMap::Describe(uint64_t p) const {
  const PhysicalRead& r = plan.reads[p];
  const uint64_t n = user_begin[p + 1] - user_begin[p];
  std::string s = "reading range " + r.range().ToString() + " of '" +
                  source_name + "' (" + std::string(ReadKindName(r.kind)) +
                  " read " + std::to_string(p) + " of the plan, for " +
                  (n == 1 ? "request index " : "request indexes ");
  constexpr uint64_t kNamed = 8;
  for (uint64_t k = 0; k < std::min(n, kNamed); ++k) {
    if (k) s += ", ";
    s += std::to_string(users[user_begin[p] + k]);
  }
  if (n > kNamed) s += " and " + std::to_string(n - kNamed) + " more";
  return s + ")";
}

Result<std::shared_ptr<const PlanMap>> MakePlanMap(
    std::span<const ByteRange> ranges,
    const std::vector<std::optional<Slice>>& hits, PlannerOptions o,
    Delivery delivery, IssueOrder order, uint64_t budget_count,
    uint64_t budget_bytes, const std::string& name) {
  // A coalesced read or a split part larger than the byte budget would be
  // admitted alone and exceed it; only a requested range may do that.
  o.max_merged_bytes = std::min(o.max_merged_bytes, budget_bytes);
  if (o.split_bytes != PlannerOptions::kNoSplit) {
    o.split_bytes = std::min(o.split_bytes, o.max_merged_bytes);
  }
  std::vector<ByteRange> misses;
  if (!hits.empty()) {
    for (size_t i = 0; i < ranges.size(); ++i) {
      if (!hits[i]) misses.push_back(ranges[i]);
    }
  }
  const std::span<const ByteRange> to_read =
      hits.empty() ? ranges : std::span<const ByteRange>(misses);
  auto map = std::make_shared<PlanMap>();
  RANGEIO_ASSIGN_OR_RETURN(map->plan, PlanInOrder(to_read, o, delivery));
  if (!SplitsFit(map->plan, budget_count, budget_bytes)) {
    // The parts of a split range are all held until it is assembled; when
    // they cannot all fit in the response budget, the range is read whole
    // instead (admitted alone when it exceeds the byte budget).
    o.split_bytes = PlannerOptions::kNoSplit;
    RANGEIO_ASSIGN_OR_RETURN(map->plan, PlanInOrder(to_read, o, delivery));
  }
  if (!hits.empty()) {
    // Back to one location per requested range; a hit has none.
    std::vector<RangeLocation> all(ranges.size());
    for (size_t i = 0, m = 0; i < ranges.size(); ++i) {
      if (!hits[i]) all[i] = map->plan.locations[m++];
    }
    map->plan.locations = std::move(all);
  }
  if (order == IssueOrder::kRequest) OrderByRequest(&map->plan);
  map->ranges.assign(ranges.begin(), ranges.end());
  map->source_name = name;
  map->Index();
  return std::shared_ptr<const PlanMap>(std::move(map));
}

}  // namespace rangeio::detail
