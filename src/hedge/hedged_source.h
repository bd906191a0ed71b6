// hedged_source.h (internal) — hedged reads (Options::hedge): a Source in
// front of another that re-issues a read still outstanding after a delay
// and hands on whichever copy answers first.
//
// The rule. `hedge=DURATION` hedges after that delay; `hedge=auto` after
// the 98th percentile of the source's recent read latency (LatencyTracker),
// never below kFloor, and not before kMinSamples reads have been seen. A
// read is hedged at most once, and only while the hedges issued stay within
// hedge-budget x the reads issued (per source handle) and the limiter's
// hedge reserve has a permit (LimiterCore::TryAcquireHedge); otherwise it
// is tried again a quarter of the delay later while still outstanding.
//
// First answer wins: the first successful copy is delivered, exactly once,
// to the caller's sink; an error is delivered only when no other copy is
// still out (a hedge may mask a failed primary). The loser is cancelled in
// the backend (Source::Cancel) and, if it still completes with bytes, they
// are freed at once. The reserve permit is held until both copies are out
// of the backend, so limiter occupancy covers every read on the wire.
//
// Thread-safety: as Source. Lifetime: the state behind the source lives
// until its last backend read has completed, even once the source is gone.
#pragma once

#include <memory>

#include "limiter/limiter_core.h"
#include "rangeio/options.h"
#include "rangeio/source.h"
#include "util/stats_recorder.h"

namespace rangeio::detail {

// `inner` read with hedges per `options` (hedge must not be off); hedges
// take permits of `limiter`'s reserve and are counted in `stats` and the
// limiter's stats.
std::shared_ptr<Source> MakeHedgedSource(std::shared_ptr<Source> inner,
                                         const ReaderOptions& options,
                                         std::shared_ptr<LimiterCore> limiter,
                                         std::shared_ptr<StatsRecorder> stats);

}  // namespace rangeio::detail
