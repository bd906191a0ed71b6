// cli_options.h — the CLI's -o key=value list, routed to the reader's
// Options and to the backends' SourceOptions (one flag for both, so a user
// need not know which layer owns a key).
#pragma once

#include <string>
#include <vector>

#include "rangeio/open_source.h"
#include "rangeio/options.h"
#include "rangeio/status.h"

namespace rangeio::cli {

struct CliOptions {
  Options reader;
  SourceOptions source;
  bool local_threads_set = false;  // "local-threads" given explicitly
};

// Each item is one "key=value" (the value may hold commas and '='). Keys of
// SourceOptions::Set go to `source`, the rest to Options::Parse; a key given
// twice, an item without '=', an unknown key or a bad value is
// InvalidArgument naming it. `source` starts from `base`.
Result<CliOptions> ParseCliOptions(const std::vector<std::string>& items,
                                   SourceOptions base = {});

// Applies the reader's I/O concurrency to the local engines' threads unless
// "local-threads" was given (one pread thread or ring slot per read in
// flight, as Reader::OpenFile does).
SourceOptions EffectiveSourceOptions(const CliOptions& o);

}  // namespace rangeio::cli
