#include "rangeio/options.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string>

#include "util/parse_text.h"
#include "util/redact.h"

namespace rangeio {
namespace {

using detail::ForeignText;
using detail::ParseBytes;
using detail::ParseU64;

constexpr uint32_t kMaxIoConcurrency = 4096;
constexpr uint32_t kMaxResponseBudgetCount = 1u << 20;
constexpr uint64_t kMaxResponseBudgetBytes = 1ull << 40;
constexpr int64_t kMaxStallTimeoutMs = 86'400'000;

constexpr const char* kKeys =
    "io-concurrency (alias read-thread-num), response-budget-count, "
    "response-budget-bytes, hedge-reserve, response-stall-timeout-ms, "
    "planner, coalesce, coalesce-gap, max-overread-ratio, max-merged-bytes, "
    "split-bytes, hedge, hedge-budget";
constexpr uint32_t kMaxHedgeReserve = 4096;
// A fixed hedge delay: 1 us..60 s (a delay past a minute is a deadline).
constexpr int64_t kMaxHedgeAfterUs = 60'000'000;

Status Invalid(std::string_view key, std::string_view value,
               std::string_view valid) {
  // Keys and values come from a config or a command line: escaped and
  // bounded (redact.h), so that a stray newline cannot forge a log line.
  return Status::InvalidArgument("option " + ForeignText(key) + "='" +
                                 ForeignText(value) +
                                 "' is invalid: " + std::string(valid));
}

// `given` is the value as the user wrote it (quoted in the error), or empty
// to quote `v` itself (a struct field set in code).
Status CheckRange(std::string_view key, uint64_t v, uint64_t lo, uint64_t hi,
                  std::string_view unit = "", std::string_view given = "") {
  if (v >= lo && v <= hi) return Status::OK();
  return Invalid(key, given.empty() ? std::to_string(v) : std::string(given),
                 "valid " + std::to_string(lo) + ".." + std::to_string(hi) +
                     std::string(unit));
}

// Parses `value` with `parse` into `out` and checks it against lo..hi;
// `expected` describes the syntax when `value` does not parse.
Status ParseInRange(const std::string& key, const std::string& value,
                    bool (*parse)(std::string_view, uint64_t*),
                    std::string_view expected, uint64_t lo, uint64_t hi,
                    std::string_view unit, uint64_t* out) {
  if (!parse(value, out)) return Invalid(key, value, expected);
  return CheckRange(key, *out, lo, hi, unit, value);
}

// The planner keys other than "planner" itself, applied to `p`.
Status ParsePlannerField(const std::string& key, const std::string& value,
                         PlannerOptions* p) {
  constexpr std::string_view kBytes =
      "a byte size is expected, e.g. 65536, 64KiB, 16MiB";
  uint64_t n = 0;
  if (key == "coalesce") {
    if (value != "true" && value != "false") {
      return Invalid(key, value, "valid true, false");
    }
    p->coalesce = value == "true";
  } else if (key == "coalesce-gap") {
    if (!ParseBytes(value, &n)) return Invalid(key, value, kBytes);
    p->coalesce_gap = n;
  } else if (key == "max-merged-bytes") {
    if (!ParseBytes(value, &n)) return Invalid(key, value, kBytes);
    p->max_merged_bytes = n;
  } else if (key == "split-bytes") {
    if (value == "none") {
      p->split_bytes = PlannerOptions::kNoSplit;
    } else if (!ParseBytes(value, &n)) {
      return Invalid(key, value, std::string(kBytes) + ", or none");
    } else {
      p->split_bytes = n;
    }
  } else if (key == "max-overread-ratio") {
    if (value == "none") {
      p->max_overread_ratio = PlannerOptions::kNoOverreadLimit;
      return Status::OK();
    }
    char* end = nullptr;
    const double r = std::strtod(value.c_str(), &end);
    if (value.empty() || end != value.c_str() + value.size() ||
        !std::isfinite(r)) {
      return Invalid(key, value, "a number 1.0..1e6 is expected, or none");
    }
    p->max_overread_ratio = r;
  }
  return Status::OK();
}

// "50ms", "2.5ms", "250us", "1s" into microseconds; false if malformed.
bool ParseDuration(std::string_view s, int64_t* us) {
  size_t n = 0;
  while (n < s.size() && ((s[n] >= '0' && s[n] <= '9') || s[n] == '.')) ++n;
  const std::string number(s.substr(0, n));
  const std::string_view unit = s.substr(n);
  double scale = 0;
  if (unit == "us") {
    scale = 1;
  } else if (unit == "ms") {
    scale = 1e3;
  } else if (unit == "s") {
    scale = 1e6;
  } else {
    return false;
  }
  char* end = nullptr;
  const double v = std::strtod(number.c_str(), &end);
  if (number.empty() || end != number.c_str() + number.size() ||
      !std::isfinite(v) || v * scale > 1e15) {
    return false;
  }
  *us = std::llround(v * scale);
  return true;
}

Status ParseHedge(const std::string& value, ReaderOptions* o) {
  if (value == "off" || value == "auto") {
    o->hedge = value == "off" ? ReaderOptions::Hedge::kOff
                              : ReaderOptions::Hedge::kAuto;
    return Status::OK();
  }
  int64_t us = 0;
  if (!ParseDuration(value, &us)) {
    return Invalid("hedge", value,
                   "valid off, auto, or a duration such as 50ms, 250us, 1s");
  }
  if (us < 1 || us > kMaxHedgeAfterUs) {
    return Invalid("hedge", value, "a fixed hedge delay is valid 1us..60s");
  }
  o->hedge = ReaderOptions::Hedge::kFixed;
  o->hedge_after = std::chrono::microseconds(us);
  return Status::OK();
}

Status ParseHedgeBudget(const std::string& value, double* out) {
  char* end = nullptr;
  const double b = std::strtod(value.c_str(), &end);
  if (value.empty() || end != value.c_str() + value.size() ||
      !std::isfinite(b)) {
    return Invalid("hedge-budget", value, "a number 0..1 is expected");
  }
  if (!(b >= 0.0 && b <= 1.0))
    return Invalid("hedge-budget", value, "valid 0..1");
  *out = b;
  return Status::OK();
}

bool IsPlannerField(std::string_view key) {
  return key == "coalesce" || key == "coalesce-gap" ||
         key == "max-overread-ratio" || key == "max-merged-bytes" ||
         key == "split-bytes";
}

// The limiter's keys; false when `key` is not one of them.
bool ParseLimiterKey(const std::string& key, const std::string& value,
                     LimiterOptions* o, Status* st) {
  uint64_t n = 0;
  if (key == "io-concurrency" || key == "read-thread-num") {
    *st = ParseInRange(key, value, ParseU64, "an integer 1..4096 is expected",
                       1, kMaxIoConcurrency, "", &n);
    o->io_concurrency = static_cast<uint32_t>(n);
  } else if (key == "response-budget-count") {
    *st = ParseInRange(
        key, value, ParseU64,
        "an integer 0..1048576 is expected (0 = 2 x io-concurrency)", 0,
        kMaxResponseBudgetCount, " (0 = 2 x io-concurrency)", &n);
    o->response_budget_count = static_cast<uint32_t>(n);
  } else if (key == "response-budget-bytes") {
    *st = ParseInRange(key, value, ParseBytes,
                       "a byte size is expected, e.g. 67108864, 64MiB, 1G "
                       "(valid 1 B..1 TiB)",
                       1, kMaxResponseBudgetBytes, " bytes", &n);
    o->response_budget_bytes = n;
  } else if (key == "hedge-reserve") {
    *st = ParseInRange(key, value, ParseU64,
                       "an integer 0..4096 is expected (0 = automatic)", 0,
                       kMaxHedgeReserve, " (0 = automatic)", &n);
    o->hedge_reserve = static_cast<uint32_t>(n);
  } else {
    return false;
  }
  return true;
}

// The reader's keys other than the planner's; false when `key` is not one.
bool ParseReaderKey(const std::string& key, const std::string& value,
                    ReaderOptions* o, Status* st) {
  uint64_t n = 0;
  if (key == "response-stall-timeout-ms") {
    *st = ParseInRange(key, value, ParseU64,
                       "an integer 1..86400000 (ms) is expected", 1,
                       kMaxStallTimeoutMs, " ms", &n);
    o->response_stall_timeout = std::chrono::milliseconds(n);
  } else if (key == "hedge") {
    *st = ParseHedge(value, o);
  } else if (key == "hedge-budget") {
    *st = ParseHedgeBudget(value, &o->hedge_budget);
  } else {
    return false;
  }
  return true;
}

// The preset first, then the field keys that adjust it (the map is sorted,
// which would put "coalesce-gap" before "planner").
Status ParsePlanner(const std::map<std::string, std::string>& kv,
                    std::optional<PlannerOptions>* planner) {
  if (auto it = kv.find("planner"); it != kv.end()) {
    Result<PlannerOptions> preset = PlannerOptions::FromPreset(it->second);
    if (!preset.ok()) {
      return Invalid("planner", it->second, "valid none, local, object-store");
    }
    *planner = *preset;
  }
  for (const auto& [key, value] : kv) {
    if (!IsPlannerField(key)) continue;
    if (!*planner) *planner = PlannerOptions::ObjectStore();
    RANGEIO_RETURN_NOT_OK(ParsePlannerField(key, value, &**planner));
  }
  if (*planner) return (*planner)->Validate();
  return Status::OK();
}

}  // namespace

uint32_t LimiterOptions::EffectiveHedgeReserve(double hedge_budget) const {
  if (hedge_reserve != 0) return hedge_reserve;
  const double r = std::ceil(io_concurrency * hedge_budget);
  return std::max<uint32_t>(1, static_cast<uint32_t>(r));
}

Status LimiterOptions::Validate() const {
  RANGEIO_RETURN_NOT_OK(
      CheckRange("io-concurrency", io_concurrency, 1, kMaxIoConcurrency));
  RANGEIO_RETURN_NOT_OK(
      CheckRange("response-budget-count", response_budget_count, 0,
                 kMaxResponseBudgetCount, " (0 = 2 x io-concurrency)"));
  RANGEIO_RETURN_NOT_OK(CheckRange("response-budget-bytes",
                                   response_budget_bytes, 1,
                                   kMaxResponseBudgetBytes, " bytes"));
  return CheckRange("hedge-reserve", hedge_reserve, 0, kMaxHedgeReserve,
                    " (0 = automatic)");
}

Status ReaderOptions::Validate() const {
  if (response_stall_timeout.count() < 1 ||
      response_stall_timeout.count() > kMaxStallTimeoutMs) {
    return Invalid("response-stall-timeout-ms",
                   std::to_string(response_stall_timeout.count()),
                   "valid 1.." + std::to_string(kMaxStallTimeoutMs) + " ms");
  }
  if (hedge == Hedge::kFixed &&
      (hedge_after.count() < 1 || hedge_after.count() > kMaxHedgeAfterUs)) {
    return Invalid("hedge", std::to_string(hedge_after.count()) + "us",
                   "a fixed hedge delay is valid 1us..60s");
  }
  if (!(hedge_budget >= 0.0 && hedge_budget <= 1.0)) {
    return Invalid("hedge-budget", std::to_string(hedge_budget), "valid 0..1");
  }
  if (planner) return planner->Validate();
  return Status::OK();
}

LimiterOptions Options::ResolvedLimiter() const {
  LimiterOptions l = limiter;
  l.hedge_reserve = limiter.EffectiveHedgeReserve(reader.hedge_budget);
  return l;
}

Status Options::Validate() const {
  RANGEIO_RETURN_NOT_OK(limiter.Validate());
  return reader.Validate();
}

bool Options::IsLimiterKey(std::string_view key) {
  return key == "io-concurrency" || key == "read-thread-num" ||
         key == "response-budget-count" || key == "response-budget-bytes" ||
         key == "hedge-reserve";
}

bool Options::IsKey(std::string_view key) {
  static constexpr std::string_view kNames[] = {"io-concurrency",
                                                "read-thread-num",
                                                "response-budget-count",
                                                "response-budget-bytes",
                                                "hedge-reserve",
                                                "response-stall-timeout-ms",
                                                "planner",
                                                "hedge",
                                                "hedge-budget"};
  for (std::string_view k : kNames) {
    if (k == key) return true;
  }
  return IsPlannerField(key);
}

Result<Options> Options::Parse(const std::map<std::string, std::string>& kv) {
  if (kv.count("io-concurrency") != 0 && kv.count("read-thread-num") != 0) {
    return Status::InvalidArgument(
        "option io-concurrency is given twice: as io-concurrency and as its "
        "alias read-thread-num");
  }
  Options o;
  RANGEIO_RETURN_NOT_OK(ParsePlanner(kv, &o.reader.planner));
  for (const auto& [key, value] : kv) {
    if (key == "planner" || IsPlannerField(key)) continue;
    Status st;
    if (!ParseLimiterKey(key, value, &o.limiter, &st) &&
        !ParseReaderKey(key, value, &o.reader, &st)) {
      return Status::InvalidArgument("unknown option '" + ForeignText(key) +
                                     "' (known: " + kKeys + ")");
    }
    RANGEIO_RETURN_NOT_OK(st);
  }
  return o;
}

Result<Options> Options::Parse(std::string_view text) {
  std::map<std::string, std::string> kv;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view()
                                           : text.substr(comma + 1);
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      return Status::InvalidArgument("option '" + ForeignText(item) +
                                     "' is not key=value");
    }
    auto [it, inserted] = kv.emplace(std::string(item.substr(0, eq)),
                                     std::string(item.substr(eq + 1)));
    if (!inserted) {
      return Status::InvalidArgument("option " + ForeignText(it->first) +
                                     " is given more than once");
    }
  }
  return Parse(kv);
}

std::string Options::ToString() const {
  const ReaderOptions& r = reader;
  std::ostringstream o;
  o << "io-concurrency=" << limiter.io_concurrency
    << ",response-budget-count=" << limiter.response_budget_count
    << ",response-budget-bytes=" << limiter.response_budget_bytes
    << ",hedge-reserve=" << limiter.hedge_reserve
    << ",response-stall-timeout-ms=" << r.response_stall_timeout.count()
    << ",hedge="
    << (r.hedge == ReaderOptions::Hedge::kOff ? std::string("off")
        : r.hedge == ReaderOptions::Hedge::kAuto
            ? std::string("auto")
            : std::to_string(r.hedge_after.count()) + "us")
    << ",hedge-budget=" << r.hedge_budget;
  if (r.planner) o << "," << r.planner->ToString();
  return o.str();
}

}  // namespace rangeio
