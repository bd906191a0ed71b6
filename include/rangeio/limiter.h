// rangeio/limiter.h — the one place where global bounds live.
//
// A Limiter holds io_concurrency I/O permits and a response budget counted in
// responses and in bytes (see Options). Every Reader and clone given the same
// Limiter shares these bounds: give one Limiter to all readers of a search,
// or of a whole process, to bound them together.
//
// Admission: a stream that wants to read waits in the limiter as ONE entry,
// whatever the number of its ranges. While several wait, each free permit
// goes, one read per turn, to the waiting stream with the fewest undelivered
// results (ties in turn): one huge request cannot monopolise the permits, a
// stream whose consumer keeps up is not starved by streams whose results pile
// up, and one thread merging k streams stays live with a response budget of
// at least 2k. A stream read with Priority::kHigh goes before all of those. A
// read is admitted when an I/O permit is free and the response budget can take
// one more response of its size; a single read larger than the byte budget is
// admitted once nothing else is retained.
//
// Thread-safety: all methods are thread-safe. Lifetime: held by shared_ptr;
// readers, streams and handed-out slices keep it alive.
#pragma once

#include <memory>

#include "rangeio/export.h"
#include "rangeio/options.h"
#include "rangeio/stats.h"
#include "rangeio/status.h"

namespace rangeio {

namespace detail {
class LimiterCore;
struct LimiterAccess;
}  // namespace detail

class RANGEIO_EXPORT Limiter {
 public:
  // Validates `options`. An automatic hedge reserve is sized for readers
  // hedging at most ReaderOptions::kDefaultHedgeBudget extra reads.
  static Result<std::shared_ptr<Limiter>> Make(const LimiterOptions& options);
  // The limiter of `options`, its automatic hedge reserve sized for
  // options.reader.hedge_budget (what Reader::Open makes for itself).
  static Result<std::shared_ptr<Limiter>> Make(const Options& options);

  Limiter(const Limiter&) = delete;
  Limiter& operator=(const Limiter&) = delete;
  ~Limiter();

  uint32_t io_concurrency() const;
  uint32_t response_budget_count() const;
  uint64_t response_budget_bytes() const;
  uint32_t hedge_reserve() const;

  // Aggregates over every reader of this limiter, and its occupancy now and
  // at its peak.
  Stats GetStats() const;

  // True when a stream waits for admission while no read is in flight: only
  // a release of responses already read can let it in. A caller that holds
  // results it could drop and read again (a cache, read-ahead) drops some
  // instead of waiting for the stream's response_stall_timeout.
  bool Stalled() const;

 private:
  friend struct detail::LimiterAccess;  // the library's scheduler (src/)
  explicit Limiter(std::shared_ptr<detail::LimiterCore> core);
  std::shared_ptr<detail::LimiterCore> core_;
};

}  // namespace rangeio
