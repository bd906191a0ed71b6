// stream_base.h (internal) — what a RangeStream drives, how a stream tells
// whoever consumes it that something changed, and the lease a delivered
// result holds on its share of the response budget.
//
// Thread-safety: a StreamBase is consumed by one thread at a time (its
// RangeStream's, or the push driver's); a Lease may be released on any
// thread; a StreamListener is called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "limiter/limiter_core.h"
#include "rangeio/reader.h"
#include "rangeio/slice.h"

namespace rangeio::detail {

// Told of every change a consumer may be waiting for (a read completed, the
// stream failed or was cancelled), never under a stream's lock: a Waker
// wakes a thread that polls several streams, a PushStream delivers.
class StreamListener {
 public:
  virtual void OnStreamChange() = 0;

 protected:
  ~StreamListener() = default;
};

// A Scheduler (ranges read as requested) or a PlannedStream (ranges read
// through a Plan), or a PushStream that hands one of them to callbacks.
class StreamBase {
 public:
  virtual ~StreamBase() = default;
  // The next result, std::nullopt at the end, or the error that ended the
  // stream. With `pending` set, never waits: sets *pending and returns
  // std::nullopt when nothing is ready yet.
  virtual Result<std::optional<RangeResult>> Poll(bool* pending) = 0;
  Result<std::optional<RangeResult>> Next() { return Poll(nullptr); }
  // Every later change also goes to `listener` (null: none). A stream with a
  // listener never runs the source's work on the polling thread (Assist).
  virtual void SetListener(std::shared_ptr<StreamListener> listener) = 0;
  // When a stream that polled pending must be polled again even if nothing
  // changes (a stall's deadline; a look for a stall that began with no
  // event of its own), in NowNanos; 0: only on a change.
  virtual uint64_t RecheckAt() const = 0;
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
// index and its lease (bytes plus budget), or, with per-range errors, its
// error (and a lease of no bytes that still holds the read's budget).
struct RawResult {
  uint64_t index = 0;
  std::shared_ptr<Lease> lease;
  Status status;
};

}  // namespace rangeio::detail
