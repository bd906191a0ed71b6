// The Source base class's out-of-line default.
#include "rangeio/source.h"

namespace rangeio {

SourceInfo Source::Info() const { return {name(), PlannerOptions::None(), {}}; }

}  // namespace rangeio
