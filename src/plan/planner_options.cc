// PlannerOptions: the presets (with where each number comes from),
// validation and text. The planner itself is planner.cc.
#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>

#include "rangeio/planner.h"
#include "util/redact.h"

namespace rangeio {
namespace {

Status Invalid(std::string_view key, std::string_view value,
               std::string_view valid) {
  // Escaped and bounded: keys and values come from a config (redact.h).
  return Status::InvalidArgument("option " + detail::ForeignText(key) + "='" +
                                 detail::ForeignText(value) +
                                 "' is invalid: " + std::string(valid));
}

// The shortest text that parses back to `v` (std::to_chars): ToString's
// output must round-trip through Options::Parse.
std::string FormatDouble(double v) {
  std::array<char, 64> buf{};
  const auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  if (ec != std::errc()) return "nan";
  return std::string(buf.data(), end);
}

}  // namespace

PlannerOptions PlannerOptions::None() {
  PlannerOptions o;
  o.coalesce = false;
  o.coalesce_gap = 0;
  o.max_overread_ratio = kNoOverreadLimit;
  o.max_merged_bytes = std::numeric_limits<uint64_t>::max();
  o.split_bytes = kNoSplit;
  return o;
}

PlannerOptions PlannerOptions::Local() {
  PlannerOptions o;
  // Lance's block size for local files: one page. A hole of at most a page
  // costs a copy of <= 4 KiB out of the page cache (well under a
  // microsecond), less than the pread and pool hand-off it saves.
  o.coalesce_gap = 4 << 10;
  // Lance puts no ratio on local reads: every hole is already at most one
  // page, and a local read has no per-request bill or throttle that would
  // make a long run of small holes worth bounding separately.
  o.max_overread_ratio = kNoOverreadLimit;
  // At NVMe speeds (2-7 GB/s) an 8 MiB pread takes 1-4 ms, so per-call costs
  // (microseconds) stay under 1%, while a 64 MiB range still spreads over 8
  // pool threads and the default 64 MiB response budget holds 8 such reads.
  o.max_merged_bytes = 8 << 20;
  o.split_bytes = 8 << 20;
  return o;
}

// The field defaults, reasoned:
//  - coalesce_gap 64 KiB (Lance's object-store block size). A ranged GET pays
//    ~10-30 ms to first byte and moves ~50-100 MB/s per connection, so a
//    64 KiB hole costs ~1 ms of transfer: far less than another request, and
//    S3 bills and throttles (5,500 GET/s per prefix) by request. Paimon's
//    16 KiB and Arrow's 8 KiB leave such savings unused; the object_store
//    crate's 1 MiB hole costs ~10-20 ms, as much as the request it saves, and
//    holds response budget for bytes nobody asked for.
//  - max_overread_ratio 2.0 (Paimon): whatever the gaps, at most half of a
//    read is holes, so physical bytes <= 2 x requested bytes overall.
//  - max_merged_bytes 16 MiB: the top of the S3 guidance of 8-16 MiB ranged
//    requests. Arrow merges up to 32 MiB, but the default 64 MiB response
//    budget would then hold only 2 reads; 16 MiB keeps 4.
//  - split_bytes 16 MiB, equal to max_merged_bytes so that no read exceeds
//    16 MiB. Equal parts of a longer range are in [8, 16] MiB: always inside
//    the S3 guidance (8 MiB would give parts of [4, 8] MiB).
PlannerOptions PlannerOptions::ObjectStore() { return PlannerOptions(); }

Result<PlannerOptions> PlannerOptions::FromPreset(std::string_view name) {
  if (name == "none") return None();
  if (name == "local") return Local();
  if (name == "object-store") return ObjectStore();
  return Status::InvalidArgument("planner preset '" +
                                 detail::ForeignText(name) +
                                 "' is unknown (known: none, local, "
                                 "object-store)");
}

Status PlannerOptions::Validate() const {
  const double r = max_overread_ratio;
  if (std::isnan(r) || r < 1.0 ||
      (r > kMaxFiniteOverreadRatio && r != kNoOverreadLimit)) {
    return Invalid("max-overread-ratio", FormatDouble(r),
                   "valid 1.0..1000000, or inf for no limit");
  }
  if (max_merged_bytes == 0) {
    return Invalid("max-merged-bytes", "0",
                   "valid 1..18446744073709551615 bytes");
  }
  if (split_bytes == 0 ||
      (split_bytes > max_merged_bytes && split_bytes != kNoSplit)) {
    return Invalid("split-bytes", std::to_string(split_bytes),
                   "valid 1..max-merged-bytes (" +
                       std::to_string(max_merged_bytes) +
                       ") bytes, or 18446744073709551615 to never split");
  }
  return Status::OK();
}

std::string PlannerOptions::ToString() const {
  std::ostringstream o;
  o << "coalesce=" << (coalesce ? "true" : "false")
    << ",coalesce-gap=" << coalesce_gap << ",max-overread-ratio="
    << (max_overread_ratio == kNoOverreadLimit
            ? std::string("none")
            : FormatDouble(max_overread_ratio))
    << ",max-merged-bytes=" << max_merged_bytes << ",split-bytes="
    << (split_bytes == kNoSplit ? std::string("none")
                                : std::to_string(split_bytes));
  return o.str();
}

std::string_view ReadKindName(ReadKind kind) {
  switch (kind) {
    case ReadKind::kWhole:
      return "whole";
    case ReadKind::kSplitPart:
      return "split part";
    case ReadKind::kOversize:
      return "oversize";
  }
  return "unknown";
}

}  // namespace rangeio
