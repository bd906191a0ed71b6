#pragma once

#include <string>
#include <vector>

#include "rangeio/open_source.h"
#include "rangeio/options.h"
#include "rangeio/source.h"
#include "rangeio/status.h"

namespace rangeio::cli {

// Reads each "OFFSET:LENGTH" of `url_or_path` (a path or a file:// URL, see
// OpenSource) and writes the bytes to stdout, in the order given. Validates
// every range before writing anything. Then writes one line to stderr
// saying which engine read the file (Source::Describe), so that a fallback
// is never silent. source_options.local.threads is set from `options`.
Status Cat(const std::string& url_or_path,
           const std::vector<std::string>& ranges, const Options& options,
           SourceOptions source_options);

}  // namespace rangeio::cli
