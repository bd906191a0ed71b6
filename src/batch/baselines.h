// batch/baselines.h (internal, not installed) — the scheduling a
// BatchedReader replaced, kept as a benchmark hook.
//
// `rangeio bench blob` compares BatchedReader against the scheduler Lance
// had before its fix (each drained batch waits for the previous batch's I/O),
// and tests/batched_reader_test.cc pins that baseline down. Nothing in the
// public API reaches it.
//
// Thread-safety: as rangeio/batch.h.
#pragma once

#include <memory>
#include <vector>

#include "rangeio/batch.h"
#include "rangeio/reader.h"
#include "rangeio/status.h"

namespace rangeio::detail {

enum class BatchMode {
  // Each drained batch is dispatched at once, whatever is in flight: what
  // BatchedReader::Open gives.
  kDispatched,
  // The baseline: a drained batch waits until the previous batch's reads
  // (on every source) have all completed before its own start; the requests
  // that arrive meanwhile form the next batch. Closed-loop callers settle
  // into two cohorts whose batches alternate.
  kSerialized,
};

// BatchedReader::Open with the dispatch mode chosen; kDispatched is exactly
// BatchedReader::Open.
Result<std::shared_ptr<BatchedReader>> OpenBatchedReader(
    std::vector<Reader> readers, const BatchOptions& options, BatchMode mode);

}  // namespace rangeio::detail
