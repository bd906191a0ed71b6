// bench vindex without FAISS: the scenario needs integrations/faiss, which
// is built only when libfaiss-dev is installed.
#include "bench_scenarios.h"

namespace rangeio::bench {

Result<Report> RunVindex(const BenchOptions&) {
  return Status::InvalidArgument(
      "bench vindex needs FAISS: install libfaiss-dev (and "
      "libopenblas0-pthread) and configure rangeio again");
}

}  // namespace rangeio::bench
