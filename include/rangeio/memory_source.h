// rangeio/memory_source.h — a Source over bytes already in memory.
//
// The fastest backend and the reference the others are tested against: every
// read completes inline, on the calling thread, before Read() returns.
//
// Thread-safety: the source may be read from any number of threads at once.
#pragma once

#include <memory>
#include <string>

#include "rangeio/export.h"
#include "rangeio/slice.h"
#include "rangeio/source.h"

namespace rangeio {

// Bytes in memory. `data` is shared, never copied at construction. With
// zero_copy, reads complete inline with Slices of `data` itself; without it,
// each read copies its bytes into a new buffer (what a backend that owns its
// buffers costs, and the baseline for the zero-copy path).
RANGEIO_EXPORT std::shared_ptr<Source> MakeMemorySource(std::string name,
                                                        Slice data,
                                                        bool zero_copy = true);

}  // namespace rangeio
