// rangeio/rangeio.h — the whole public API in one include.
#pragma once

#include "rangeio/batch.h"             // IWYU pragma: export
#include "rangeio/block_cache.h"       // IWYU pragma: export
#include "rangeio/byte_range.h"        // IWYU pragma: export
#include "rangeio/completion_queue.h"  // IWYU pragma: export
#include "rangeio/http.h"              // IWYU pragma: export
#include "rangeio/limiter.h"           // IWYU pragma: export
#include "rangeio/local_file.h"        // IWYU pragma: export
#include "rangeio/memory_source.h"     // IWYU pragma: export
#include "rangeio/open_source.h"       // IWYU pragma: export
#include "rangeio/options.h"           // IWYU pragma: export
#include "rangeio/planner.h"           // IWYU pragma: export
#include "rangeio/range_stream.h"      // IWYU pragma: export
#include "rangeio/reader.h"            // IWYU pragma: export
#include "rangeio/sim.h"               // IWYU pragma: export
#include "rangeio/slice.h"             // IWYU pragma: export
#include "rangeio/source.h"            // IWYU pragma: export
#include "rangeio/stats.h"             // IWYU pragma: export
#include "rangeio/status.h"            // IWYU pragma: export
