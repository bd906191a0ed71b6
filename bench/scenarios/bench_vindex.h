// bench_vindex.h (internal to bench/scenarios) — bench vindex's rows'
// names and its verdicts on them (bench_vindex_verdicts.cc), apart from
// the FAISS runs that make the rows (bench_vindex.cc).
#pragma once

#include <string>

#include "report.h"

namespace rangeio::bench {

// A row's name: "<kind>-np<nprobe>-<name>", e.g. "flat-np16-rangeio-http".
std::string VindexRowName(const std::string& kind, int nprobe,
                          const std::string& name);

// The verdicts on index `kind`'s rows: rangeio local against FAISS mmap,
// and, when the HTTP rows ran, rangeio over HTTP against FAISS in memory
// and the chunked baseline, its one-query latency and hedging. `queries`:
// the batch's; rtt_ms: one round trip through the relay; slowest_ms: the
// slowest of 16 at once.
void VindexVerdicts(Report* rep, const std::string& kind, int queries,
                    double rtt_ms, double slowest_ms);

}  // namespace rangeio::bench
