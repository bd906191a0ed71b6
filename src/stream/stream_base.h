// stream_base.h (internal) — what a RangeStream drives, and the lease a
// delivered result holds on its share of the response budget.
//
// Thread-safety: a StreamBase is used by one consumer thread at a time (its
// RangeStream's); a Lease may be released on any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "limiter/limiter_core.h"
#include "rangeio/reader.h"
#include "rangeio/slice.h"
#include "stream/waker.h"

namespace rangeio::detail {

// A Scheduler (ranges read as requested) or a PlannedStream (ranges read
// through a Plan).
class StreamBase {
 public:
  virtual ~StreamBase() = default;
  virtual Result<std::optional<RangeResult>> Next() = 0;
  // Next() that returns std::nullopt with *pending set instead of waiting.
  virtual Result<std::optional<RangeResult>> Poll(bool* pending) = 0;
  // Every later change a consumer may wait for also notifies `waker`.
  virtual void SetWaker(std::shared_ptr<Waker> waker) = 0;
  // Cancels what is not yet delivered; idempotent.
  virtual void Finish() = 0;
  virtual size_t size() const = 0;
};

// Owns one admitted read's share of the response budget from completion until
// the last Slice of its buffer is gone. The limiter keeps itself alive while
// any response is retained, so a raw pointer is enough here.
struct Lease {
  Lease(LimiterCore* l, uint64_t c, Slice b)
      : limiter(l), cost(c), bytes(std::move(b)) {}
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  ~Lease() { limiter->ReleaseResponse(cost); }
  LimiterCore* limiter;
  uint64_t cost;
  Slice bytes;
};

// A physical result as a Scheduler hands it to a PlannedStream: the read's
// index and its lease (bytes plus budget).
struct RawResult {
  uint64_t index = 0;
  std::shared_ptr<Lease> lease;
};

}  // namespace rangeio::detail
