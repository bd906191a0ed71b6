// baselines.h (internal, not installed) — scheduling baselines that only
// benchmarks and tests use, to show what the rolling window replaces.
//
// Thread-safety: as Reader::ReadRanges.
#pragma once

#include <span>

#include "rangeio/byte_range.h"
#include "rangeio/reader.h"
#include "rangeio/status.h"

namespace rangeio::detail {

// How a stream admits reads.
enum class Scheduling {
  // A completion admits the next read at once (no barrier): what
  // Reader::ReadRanges does.
  kRolling,
  // The chunk barrier the Paimon fix removed: C reads at a time, the next C
  // wait for the slowest of the previous C (bench straggler, "chunked").
  kChunked,
};

// Reader::ReadRanges with the given admission.
Result<RangeStream> ReadRangesScheduled(const Reader& reader,
                                        std::span<const ByteRange> ranges,
                                        Delivery delivery,
                                        Scheduling scheduling);

}  // namespace rangeio::detail
