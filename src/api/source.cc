// The Source base class's out-of-line defaults.
#include "rangeio/source.h"

#include "rangeio/planner.h"

namespace rangeio {

PlannerOptions Source::DefaultPlannerOptions() const {
  return PlannerOptions::None();
}

}  // namespace rangeio
