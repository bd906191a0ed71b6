// bench_soak_faiss.h (internal to bench/scenarios) — the FAISS part of
// `rangeio-bench soak`: an IVF index read through integrations/faiss on the
// soak's shared limiter, reconstruct_n over every vector and a search, again
// and again, checked against the same index in memory. Built only with
// FAISS (bench_soak_faiss.cc; bench_soak_faiss_missing.cc otherwise).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

namespace rangeio::bench {

struct FaissSoakTotals {
  std::atomic<uint64_t> rounds{0};      // reconstruct_n + search, both checked
  std::atomic<uint64_t> mismatches{0};  // a vector or label FAISS disagrees on
  std::atomic<uint64_t> errors{0};      // a FAISS exception or open failure
  std::string first_error;              // written by the one FAISS thread
};

// False when the bench was built without FAISS (RunFaissSoak does nothing).
bool FaissSoakAvailable();

// Until `until`: builds a small IVF-Flat index in `dir`, opens it with
// OpenIvfIndex on a limiter of its own whose byte budget is a tenth of the
// index, and loops; everything it opened is gone when it returns, and a
// limiter left with reads in flight or results retained is an error.
void RunFaissSoak(const std::string& dir,
                  std::chrono::steady_clock::time_point until,
                  FaissSoakTotals* totals);

}  // namespace rangeio::bench
