// rangeio/reader.h — many range reads from one source.
//
// A Reader is a handle on one Source plus the Limiter it draws permits from.
// Every read validates its ranges before any I/O (one message format:
// CheckRanges in byte_range.h) and plans them (coalescing, splitting;
// planner.h). The common case is one call:
//
//   auto reader = Reader::Open(source, options);
//   auto bytes = reader->ReadAll(ranges);  // every range's Slice, in order
//
// ReadInto copies into the caller's buffers instead, and ReadRanges streams
// results as they complete (rangeio/range_stream.h), by Next() or by
// callback, within memory bounded by the limiter's response budget: a
// stream holds O(1) admission state plus at most one slot per retained
// response, never one waiter per range.
//
// Thread-safety: Reader is thread-safe (every method may be called
// concurrently); see range_stream.h for a stream's.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "rangeio/byte_range.h"
#include "rangeio/export.h"
#include "rangeio/limiter.h"
#include "rangeio/open_source.h"
#include "rangeio/options.h"
#include "rangeio/range_stream.h"
#include "rangeio/slice.h"
#include "rangeio/source.h"
#include "rangeio/stats.h"
#include "rangeio/status.h"

namespace rangeio {

namespace detail {
class StatsRecorder;
class HedgePolicy;
struct ReaderAccess;
}  // namespace detail

class RANGEIO_EXPORT Reader {
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

  // Every range's bytes, in request order: the one call for the common
  // case. Fails before any I/O when the ranges' reads could not all be held
  // in the response budget at once (use ReadInto or ReadRanges, or raise
  // it); otherwise with the first failed range's error. The Slices hold
  // budget until released, as a stream's.
  Result<std::vector<Slice>> ReadAll(
      std::span<const ByteRange> ranges,
      Priority priority = Priority::kNormal) const;

  // Copies range i into buffers[i] (exactly ranges[i].length bytes, checked
  // before any I/O), as reads complete; the budget is released range by
  // range, so any number of ranges fits. The first failed range's error.
  Status ReadInto(std::span<const ByteRange> ranges,
                  std::span<const std::span<std::byte>> buffers,
                  Priority priority = Priority::kNormal) const;

  // One range's bytes.
  Result<Slice> Read(ByteRange range,
                     Priority priority = Priority::kNormal) const;

  // Validates every range before any I/O, then starts reading them. A
  // zero-length range yields empty bytes.
  Result<RangeStream> ReadRanges(std::span<const ByteRange> ranges,
                                 const ReadOptions& options) const;
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
