// The soak's FAISS part without FAISS: integrations/faiss is built only
// when libfaiss-dev is installed; the soak then says it skipped it.
#include "bench_soak_faiss.h"

namespace rangeio::bench {

bool FaissSoakAvailable() { return false; }

void RunFaissSoak(const std::string&, std::chrono::steady_clock::time_point,
                  FaissSoakTotals*) {}

}  // namespace rangeio::bench
