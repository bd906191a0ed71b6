// stream_builder.h (internal) — one ReadRanges call made into a stream:
// validation, planning, the Scheduler (and PlannedStream) that reads it,
// and push delivery when asked.
//
// Thread-safety: reentrant.
#pragma once

#include <memory>
#include <span>

#include "limiter/limiter_core.h"
#include "rangeio/byte_range.h"
#include "rangeio/options.h"
#include "rangeio/range_stream.h"
#include "rangeio/source.h"
#include "stream/hedge_policy.h"
#include "stream/stream_base.h"
#include "util/stats_recorder.h"

namespace rangeio::detail {

// What a stream takes from its Reader.
struct ReaderParts {
  std::shared_ptr<Source> source;
  std::shared_ptr<LimiterCore> limiter;
  std::shared_ptr<StatsRecorder> stats;
  const ReaderOptions* options;
  std::shared_ptr<HedgePolicy> hedge;
};

// Checks `ranges` (CheckRanges), plans them and starts reading. With
// `whole`, the reads must all fit in the response budget at once (every
// result is held until the last arrives: Reader::ReadAll), or the call
// fails with ResourceExhausted before any I/O.
Result<std::shared_ptr<StreamBase>> StartStream(
    const ReaderParts& reader, std::span<const ByteRange> ranges,
    const ReadOptions& options, bool whole = false);

}  // namespace rangeio::detail
