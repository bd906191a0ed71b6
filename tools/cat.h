#pragma once

#include <string>
#include <vector>

#include "rangeio/options.h"
#include "rangeio/status.h"

namespace rangeio::cli {

// Reads each "OFFSET:LENGTH" of `path` and writes the bytes to stdout, in the
// order given. Validates every range before writing anything.
Status Cat(const std::string& path, const std::vector<std::string>& ranges,
           const Options& options);

}  // namespace rangeio::cli
