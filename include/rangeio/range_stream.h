// rangeio/range_stream.h — the results of one ReadRanges call, taken by
// pull (Next) or pushed to callbacks, and the options of that call.
//
// A stream admits its reads as its limiter's permits allow (a completion
// admits the next read at once: a rolling window, no barrier) and hands
// each requested range's bytes back once, in request order or in completion
// order. A result's bytes are a zero-copy Slice that holds the limiter's
// response budget until the caller releases it (and every copy of it).
//
// Thread-safety: a pulled RangeStream is used by one thread at a time; a
// pushed one may be cancelled from any thread, its callbacks included. The
// Slices it hands out may go to any thread.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>

#include "rangeio/export.h"
#include "rangeio/planner.h"
#include "rangeio/slice.h"
#include "rangeio/status.h"

namespace rangeio {

namespace detail {
class StreamBase;
struct ReaderAccess;
}  // namespace detail

enum class Delivery {
  kOrdered,      // results in the order of the requested ranges
  kAsCompleted,  // results as their reads complete
};

// How a stream's reads queue in its limiter against other streams'.
enum class Priority {
  kNormal,
  // Admitted before every waiting kNormal stream (still within the limiter's
  // permits and budgets): a read its caller blocks on now, such as a cache
  // miss, does not queue behind prefetches already waiting.
  kHigh,
};

// The order in which a stream issues its backend reads.
enum class IssueOrder {
  // By file offset (within each run of ascending ranges, with ordered
  // delivery): what a disk or a coalescing plan reads best.
  kOffset,
  // In the order of the first requested range each read serves: the caller's
  // order is its priority (a vector index's posting lists in scan order), and
  // the planner still coalesces across it.
  kRequest,
};

struct RangeResult {
  size_t index = 0;  // position of the range in the ReadRanges request
  Slice bytes;       // exactly the range's bytes; holds response budget
  // OK, except with ReadOptions::per_range_errors: then this range's own
  // error (naming the source, the range and the cause), and no bytes.
  Status status;
};

// The options of one ReadRanges call.
struct ReadOptions {
  Delivery delivery = Delivery::kOrdered;
  Priority priority = Priority::kNormal;
  IssueOrder issue_order = IssueOrder::kOffset;
  // Unset: the reader's planner (ReaderOptions::planner, else the source's).
  std::optional<PlannerOptions> planner;

  // false: the first failed range ends the stream (Next returns its error).
  // true: each range is delivered once, with its bytes or its own error in
  // RangeResult::status, and the stream goes on; the ranges of a coalesced
  // read that failed are read again one by one, so an error reaches only
  // the ranges it affects (Stats::ranges_retried counts them).
  bool per_range_errors = false;

  // Push delivery. With on_result set, every result goes to it and then the
  // end (OK, or the error that ended the stream) to on_end, instead of to
  // Next(): on a backend's thread as reads complete, or on the calling
  // thread, possibly before ReadRanges returns (a memory source, a cache
  // hit). Callbacks of one stream never overlap and come in delivery
  // order; they must not block (they delay other reads' completions) and
  // may call anything of rangeio, this stream's Cancel included. After the
  // stream's Cancel() returns (or its destruction), none runs any more:
  // one running on another thread is waited for, so do not cancel while
  // holding a lock a callback takes.
  using ResultCallback = std::function<void(RangeResult)>;
  using EndCallback = std::function<void(Status)>;
  ResultCallback on_result;
  EndCallback on_end;  // optional
};

class RANGEIO_EXPORT RangeStream {
 public:
  RangeStream(RangeStream&&) noexcept;
  RangeStream& operator=(RangeStream&&) noexcept;
  RangeStream(const RangeStream&) = delete;
  RangeStream& operator=(const RangeStream&) = delete;
  // Cancels what is not yet delivered (see Cancel).
  ~RangeStream();

  // Blocks until the next result. Returns std::nullopt once every range has
  // been delivered. A failed read ends the stream (unless per_range_errors):
  // Next() returns its error (naming source and range) in the position the
  // result would have had, the stream's other work is cancelled, and every
  // later call returns the same error. If this stream cannot be admitted
  // while no read is in flight anywhere on its limiter (the budget is all
  // held by results already read: slices the caller keeps, or undelivered
  // results of other streams that share the limiter), only consumers can
  // unblock it: Next() waits response_stall_timeout for that and then fails
  // with ResourceExhausted rather than hang. A pushed stream's Next() fails
  // with InvalidArgument.
  Result<std::optional<RangeResult>> Next();

  // Drops queued reads, cancels those in flight in the backend, releases
  // the budget of undelivered results and returns every permit (reads that
  // cannot be stopped return theirs when they complete). Later Next() calls
  // return Cancelled. Idempotent.
  void Cancel();

  // Number of ranges requested.
  size_t size() const;

 private:
  friend struct detail::ReaderAccess;  // Reader::ReadRanges (src/)
  explicit RangeStream(std::shared_ptr<detail::StreamBase> state);
  std::shared_ptr<detail::StreamBase> state_;
};

}  // namespace rangeio
