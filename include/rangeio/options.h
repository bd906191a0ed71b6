// rangeio/options.h — the knobs of a Limiter and of a Reader, by owner.
//
// LimiterOptions bound every reader that shares one Limiter; ReaderOptions
// say how one reader (and its clones) reads. Options holds both, as they
// arrive together in real systems: string key/value pairs (table options,
// the CLI's -o) that Options::Parse turns into a validated struct, rejecting
// any bad value with a message naming the key, the value and the valid
// range. Each field's comment gives its key, default and range in a line or
// two; docs/options.md has the details and the reasons for each default.
//
// Thread-safety: value types.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "rangeio/export.h"
#include "rangeio/planner.h"
#include "rangeio/status.h"

namespace rangeio {

// The global bounds a Limiter enforces (rangeio/limiter.h).
struct RANGEIO_EXPORT LimiterOptions {
  // --- What most users set ---

  // Key "io-concurrency" (alias "read-thread-num", Apache Paimon's name):
  // backend reads in flight at once across every reader sharing the
  // limiter. Valid 1..4096. 64: Paimon's default.
  static constexpr uint32_t kDefaultIoConcurrency = 64;
  uint32_t io_concurrency = kDefaultIoConcurrency;

  // Key "response-budget-bytes": bytes of results retained at once (read
  // and not yet released by the caller). A single larger read is admitted
  // alone. Valid 1 B..1 TiB. 64 MiB: two windows of 64 reads of 512 KiB.
  static constexpr uint64_t kDefaultResponseBudgetBytes = 64ull << 20;
  uint64_t response_budget_bytes = kDefaultResponseBudgetBytes;

  // --- Most users should leave these alone ---

  // Key "response-budget-count": results retained at once. 0 means
  // 2 x io_concurrency (Paimon's ratio: one full window of read-ahead).
  // Valid 0..1,048,576.
  uint32_t response_budget_count = 0;

  // Key "hedge-reserve": permits for hedged reads on top of io_concurrency
  // and the response budget (ReaderOptions::hedge). 0 means
  // ceil(io_concurrency x hedge-budget), at least 1. Valid 0..4096.
  uint32_t hedge_reserve = 0;

  // response_budget_count with 0 resolved.
  uint32_t EffectiveResponseBudgetCount() const {
    return response_budget_count != 0 ? response_budget_count
                                      : 2 * io_concurrency;
  }
  // hedge_reserve with 0 resolved for readers hedging at most
  // `hedge_budget` extra reads.
  uint32_t EffectiveHedgeReserve(double hedge_budget) const;

  // InvalidArgument naming the field (by its key) and its valid range.
  Status Validate() const;
  bool operator==(const LimiterOptions&) const = default;
};

// How one Reader reads (rangeio/reader.h).
struct RANGEIO_EXPORT ReaderOptions {
  // --- What most users set ---

  // Key "planner" ("none", "local", "object-store"), adjusted by the keys
  // "coalesce", "coalesce-gap", "max-overread-ratio", "max-merged-bytes"
  // and "split-bytes" (planner.h): how requested ranges become backend
  // reads. Unset: the source's preset (SourceInfo::planner).
  std::optional<PlannerOptions> planner;

  // Key "hedge": re-issue a late backend read and take the first answer
  // (not for a source that joins concurrent reads: SourceInfo). "off"
  // (default), "auto" (recent p98 latency, >= 1 ms) or "50ms" (1us..60s).
  enum class Hedge { kOff, kAuto, kFixed };
  Hedge hedge = Hedge::kOff;
  std::chrono::microseconds hedge_after{0};  // Hedge::kFixed only

  // --- Most users should leave these alone ---

  // Key "hedge-budget": the largest fraction of extra backend reads hedges
  // may add, per reader and its clones. Valid 0..1. 0.05: the 5% of "The
  // Tail at Scale" (Dean & Barroso).
  static constexpr double kDefaultHedgeBudget = 0.05;
  double hedge_budget = kDefaultHedgeBudget;

  // Key "response-stall-timeout-ms": how long a stream that cannot be
  // admitted while nothing is in flight on its limiter waits for the
  // caller to release results before failing with ResourceExhausted.
  // Valid 1..86,400,000 ms. 10 s: far past any live consumer's release.
  std::chrono::milliseconds response_stall_timeout{10'000};

  // InvalidArgument naming the field (by its key) and its valid range.
  Status Validate() const;
};

// Both groups, for a reader with a limiter of its own, or as parsed from
// key=value text.
struct RANGEIO_EXPORT Options {
  LimiterOptions limiter;
  ReaderOptions reader;

  // The limiter options with hedge_reserve resolved for reader.hedge_budget.
  LimiterOptions ResolvedLimiter() const;

  Status Validate() const;

  // Starts from the defaults and applies each key=value; rejects unknown
  // keys, a key given twice (by its name and its alias) and invalid values.
  // Byte sizes take a suffix (K, KiB, M, MiB, G, GiB, T, TiB).
  static Result<Options> Parse(const std::map<std::string, std::string>& kv);
  // Same, from "key=value,key=value" (the CLI's -o form).
  static Result<Options> Parse(std::string_view text);
  // True when `key` is one Parse takes (aliases included), and when it sets
  // a LimiterOptions field (which a reader sharing a limiter must not set).
  static bool IsKey(std::string_view key);
  static bool IsLimiterKey(std::string_view key);

  // "key=value,..." for every key, parseable by Parse.
  std::string ToString() const;
};

}  // namespace rangeio
