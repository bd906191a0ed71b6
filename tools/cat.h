#pragma once

#include <string>
#include <vector>

#include "cli_options.h"
#include "rangeio/status.h"

namespace rangeio::cli {

// Reads each "OFFSET:LENGTH" of `url_or_path` (a path, or a file://,
// http(s):// or s3:// URL, see OpenSource) and writes the bytes to stdout,
// in the order given. Validates every range and option before any I/O, and
// checks the ranges against the object's size before writing anything. Then
// writes one line to stderr saying what read the object (Source::Info),
// so that a fallback is never silent.
Status Cat(const std::string& url_or_path,
           const std::vector<std::string>& ranges, const CliOptions& options);

}  // namespace rangeio::cli
