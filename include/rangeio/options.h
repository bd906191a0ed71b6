// rangeio/options.h — every tuning knob of a Reader and its Limiter.
//
// One struct, each field with its default, valid range and configuration key.
// Options arrive in real systems as string key/value pairs (table options,
// command-line flags); Options::Parse turns those into a validated struct and
// rejects any bad value with a message naming the key, the value and the
// valid range. Validate() checks a struct filled in by hand.
//
// Thread-safety: a value type.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "rangeio/planner.h"
#include "rangeio/status.h"

namespace rangeio {

struct Options {
  // Key "read-thread-num" (the Paimon option's name). In-flight backend reads
  // per Limiter, across all readers and clones sharing it. Valid 1..4096.
  // 64 is Paimon's default and the C of bench straggler.
  static constexpr uint32_t kDefaultIoConcurrency = 64;
  uint32_t io_concurrency = kDefaultIoConcurrency;

  // Key "response-budget-count". Responses retained at once: admitted reads
  // whose bytes the caller has not released yet (in flight, waiting to be
  // delivered, or delivered and still held). 0 means 2 x io_concurrency, the
  // ratio the Paimon fix chose so that completions can run ahead of an
  // in-order consumer by one full window. Valid 0..1,048,576.
  uint32_t response_budget_count = 0;

  // Key "response-budget-bytes". Retained response bytes at once. A single
  // read larger than this is still admitted, alone, so nothing deadlocks.
  // 64 MiB holds 2 x 64 windows of 512 KiB reads, or a few 8-16 MiB parts (the
  // S3 part size guidance); raise it for wide reads. Valid 1 B..1 TiB.
  static constexpr uint64_t kDefaultResponseBudgetBytes = 64ull << 20;
  uint64_t response_budget_bytes = kDefaultResponseBudgetBytes;

  // Key "planner" ("none", "local" or "object-store") and the planner's field
  // keys "coalesce", "coalesce-gap", "max-overread-ratio", "max-merged-bytes"
  // and "split-bytes" (planner.h documents each): how requested ranges become
  // backend reads. Unset (the default): the source's own preset,
  // Source::DefaultPlannerOptions() (local files "local", the simulated
  // object store "object-store", a cached source its inner source's; HTTP,
  // S3, memory and custom sources "none"). Field keys given
  // without "planner" start from the object-store preset. With "none" each
  // range is one read, exactly as requested, and nothing is planned.
  std::optional<PlannerOptions> planner;

  // Key "response-stall-timeout-ms". When a stream cannot admit its next read
  // while nothing is in flight on its limiter (results already read, held by
  // the caller or waiting in other streams, fill the response budget), Next()
  // waits this long for a consumer to release some, then fails with
  // ResourceExhausted instead of hanging.
  // Valid 1..86,400,000 ms. 10 s: far longer than any release a live consumer
  // makes, short enough that a consumer that keeps every slice sees its bug.
  std::chrono::milliseconds response_stall_timeout{10'000};

  // Key "hedge": re-issue a backend read still outstanding after a delay
  // and take whichever copy answers first (docs/options.md, "Hedged
  // reads"). "off" (the default: bench hedge shows the tail cut with
  // stragglers, but local files and caches gain nothing from a second copy
  // on the same device; docs/benchmarks.md), "auto" (after the 98th percentile
  // of the source's recent read latency, never below 1 ms), or a duration
  // ("50ms", "250us", "1s"; valid 1 us..60 s). A hedge takes one of the
  // limiter's hedge reserve permits (ceil(io_concurrency x hedge-budget), at
  // least 1), so peak in-flight reads and retained responses stay within the
  // budgets plus that reserve.
  enum class Hedge { kOff, kAuto, kFixed };
  Hedge hedge = Hedge::kOff;
  std::chrono::microseconds hedge_after{0};  // Hedge::kFixed only

  // Key "hedge-budget": the largest fraction of extra backend reads that
  // hedges may add, per source handle. Valid 0..1. 0.05: the 5% extra
  // reads that "The Tail at Scale" (Dean & Barroso) budgets for hedging.
  static constexpr double kDefaultHedgeBudget = 0.05;
  double hedge_budget = kDefaultHedgeBudget;

  // The limiter's reserve of hedge permits for these options.
  uint32_t HedgeReserve() const;

  // response_budget_count with 0 resolved to 2 x io_concurrency.
  uint32_t EffectiveResponseBudgetCount() const {
    return response_budget_count != 0 ? response_budget_count
                                      : 2 * io_concurrency;
  }

  // InvalidArgument naming the field (by its key) and valid range.
  Status Validate() const;

  // Starts from the defaults and applies each key=value; rejects unknown
  // keys and invalid values. Byte sizes take a suffix (K, KiB, M, MiB, G, GiB).
  static Result<Options> Parse(const std::map<std::string, std::string>& kv);
  // Same, from "key=value,key=value" (the CLI's --option form).
  static Result<Options> Parse(std::string_view text);

  // "key=value,..." for every key, parseable by Parse.
  std::string ToString() const;
};

}  // namespace rangeio
