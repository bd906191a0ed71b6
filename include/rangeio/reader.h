// rangeio/reader.h — many range reads from one source, streamed back.
//
// A Reader is a handle on one Source plus the Limiter it draws permits from.
// ReadRanges() validates every range before any I/O and returns a
// RangeStream; the stream admits reads as permits allow (a completion admits
// the next read at once: a rolling window, no barrier) and hands results back
// through Next(), in request order or in completion order.
//
// Memory is bounded by the limiter's response budget, which a result holds
// from the moment its read is admitted until the caller releases the Slice it
// was handed (and every copy of it). A stream holds O(1) admission state plus
// at most one slot per retained response: never one waiter per range.
//
//   auto reader = Reader::Open(source, options);
//   auto stream = reader->ReadRanges(ranges, Delivery::kAsCompleted);
//   while (true) {
//     auto next = stream->Next();          // Result<std::optional<...>>
//     if (!next.ok()) return next.status();  // names the failed range
//     if (!*next) break;                     // every range delivered
//     Use((*next)->index, (*next)->bytes);   // bytes released at scope end
//   }
//
// Thread-safety: Reader is thread-safe (const methods and ReadRanges may be
// called concurrently). A RangeStream is used by one thread at a time; the
// Slices it returns may go to any thread.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "rangeio/byte_range.h"
#include "rangeio/limiter.h"
#include "rangeio/open_source.h"
#include "rangeio/options.h"
#include "rangeio/slice.h"
#include "rangeio/source.h"
#include "rangeio/stats.h"
#include "rangeio/status.h"

namespace rangeio {

namespace detail {
class StreamBase;
class StatsRecorder;
class HedgePolicy;
struct ReaderAccess;
struct StreamAccess;
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

struct RangeResult {
  size_t index = 0;  // position of the range in the ReadRanges request
  Slice bytes;       // exactly the range's bytes; holds response budget
};

class RangeStream {
 public:
  RangeStream(RangeStream&&) noexcept;
  RangeStream& operator=(RangeStream&&) noexcept;
  RangeStream(const RangeStream&) = delete;
  RangeStream& operator=(const RangeStream&) = delete;
  // Cancels what is not yet delivered (see Cancel).
  ~RangeStream();

  // Blocks until the next result. Returns std::nullopt once every range has
  // been delivered. A failed read ends the stream: Next() returns its error
  // (naming source and range) in the position the result would have had,
  // the stream's other work is cancelled, and every later call returns the
  // same error. If this stream cannot be admitted while no read is in flight
  // anywhere on its limiter (the budget is all held by results already read:
  // slices the caller keeps, or undelivered results of other streams that
  // share the limiter, as when one thread merges many streams), only
  // consumers can unblock it: Next() waits response_stall_timeout for that
  // and then fails with ResourceExhausted rather than hang.
  Result<std::optional<RangeResult>> Next();

  // Drops queued reads, releases the budget of undelivered results and
  // returns every permit (reads already in flight return theirs when they
  // complete). Later Next() calls return Cancelled. Idempotent.
  void Cancel();

  // Number of ranges requested.
  size_t size() const;

 private:
  friend struct detail::ReaderAccess;  // Reader::ReadRanges (src/)
  friend struct detail::StreamAccess;  // polling, for batches (src/)
  explicit RangeStream(std::shared_ptr<detail::StreamBase> state);
  std::shared_ptr<detail::StreamBase> state_;
};

class Reader {
 public:
  // A reader on `source` with a limiter of its own built from `options`.
  // With `limiter` set, the reader shares it instead: its bounds apply, and
  // limiter fields of `options` that differ from their defaults are refused
  // (InvalidArgument naming them) rather than silently dropped.
  static Result<Reader> Open(std::shared_ptr<Source> source,
                             const Options& options = {},
                             std::shared_ptr<Limiter> limiter = nullptr);
  // A reader on `source` sharing `limiter` (not null).
  static Result<Reader> Open(std::shared_ptr<Source> source,
                             const ReaderOptions& options,
                             std::shared_ptr<Limiter> limiter);
  // OpenSource(url_or_path, source_options) and a reader on it, as Open
  // above. A local file's threads, unless set, match the limiter's
  // io_concurrency (one pread thread or ring slot per read in flight).
  static Result<Reader> OpenUrl(std::string_view url_or_path,
                                const Options& options = {},
                                SourceOptions source_options = {},
                                std::shared_ptr<Limiter> limiter = nullptr);

  // Another reader of the same source sharing the same limiter and stats.
  Reader Clone() const;

  // Validates every range (overflow, past the end of the source) before any
  // I/O, then starts reading. A zero-length range yields empty bytes.
  // `priority` orders this stream's admission against other waiting streams.
  Result<RangeStream> ReadRanges(std::span<const ByteRange> ranges,
                                 Delivery delivery = Delivery::kOrdered,
                                 Priority priority = Priority::kNormal) const;

  // Stats of this source handle (shared with clones). A stream adds its
  // figures here in batches: at least every 64 reads and 64 deliveries,
  // whenever its consumer waits in Next(), and when it ends or is dropped.
  // The limiter's stats count each backend read as it completes.
  Stats GetStats() const;
  const std::shared_ptr<Limiter>& limiter() const { return limiter_; }
  const std::shared_ptr<Source>& source() const { return source_; }
  const ReaderOptions& options() const { return options_; }

 private:
  friend struct detail::ReaderAccess;  // the stream builder (src/)
  Reader() = default;
  std::shared_ptr<Source> source_;
  // When reads are hedged (null: never); shared with clones.
  std::shared_ptr<detail::HedgePolicy> hedge_;
  std::shared_ptr<Limiter> limiter_;
  std::shared_ptr<detail::StatsRecorder> stats_;
  ReaderOptions options_;
};

}  // namespace rangeio
