// cli_options.h — what the command lines share: the -o key=value list
// (routed to reader and source options by the library's ParseOpenOptions,
// so a user need not know which layer owns a key) and byte sizes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rangeio/open_source.h"
#include "rangeio/options.h"
#include "rangeio/status.h"

namespace rangeio::cli {

struct CliOptions {
  Options reader;
  SourceOptions source;
};

// Each item is "key=value", or several in Options::Parse's comma form
// ("hedge=1ms,hedge-budget=0.5"): a comma followed by a known key and '='
// starts the next, so a value may still hold commas and '='. A key given
// twice, an item without '=', an unknown key or a bad value is
// InvalidArgument naming it. `source` starts from `base`.
Result<CliOptions> ParseCliOptions(const std::vector<std::string>& given,
                                   SourceOptions base = {});

// "100KiB", "1M", "4096" (binary suffixes K, KiB, M, MiB, G, GiB, T, TiB)
// for the size flags; InvalidArgument naming `what` and the text otherwise.
Result<uint64_t> ParseByteSize(const std::string& what,
                               const std::string& text);

}  // namespace rangeio::cli
