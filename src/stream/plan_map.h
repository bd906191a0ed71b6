// plan_map.h (internal) — the plan of a planned stream, with the index from
// its physical reads back to the requested ranges they serve.
//
// Thread-safety: a PlanMap is immutable once made (MakePlanMap); shared
// between a PlannedStream and its physical stream's error messages, which
// may be built after the PlannedStream is gone.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "rangeio/byte_range.h"
#include "rangeio/planner.h"
#include "rangeio/reader.h"
#include "rangeio/slice.h"
#include "rangeio/status.h"

namespace rangeio::detail {

struct PlanMap {
  Plan plan;
  std::vector<ByteRange> ranges;
  // The requested ranges that need read p: users[user_begin[p] ..
  // user_begin[p + 1]).
  std::vector<uint64_t> user_begin;
  std::vector<uint64_t> users;
  std::string source_name;

  // Fills user_begin and users from plan.
  void Index();
  // How an error of read p names what it was reading.
  std::string Describe(uint64_t p) const;
};

// Plans `ranges` for a stream on a limiter with the given response budget.
// `hits` (empty, or one entry per range) marks the ranges served from
// memory: they get no read, and the plan covers the others. `name` is the
// source's, for error messages. With IssueOrder::kRequest the plan's reads
// are put in the order of the first requested range each serves (the parts
// of a split range staying together, in file order).
Result<std::shared_ptr<const PlanMap>> MakePlanMap(
    std::span<const ByteRange> ranges,
    const std::vector<std::optional<Slice>>& hits, PlannerOptions o,
    Delivery delivery, IssueOrder order, uint64_t budget_count,
    uint64_t budget_bytes, const std::string& name);

}  // namespace rangeio::detail
