// cli_options.cc — see cli_options.h.
#include "cli_options.h"

#include <map>
#include <set>
#include <string>

namespace rangeio::cli {

Result<CliOptions> ParseCliOptions(const std::vector<std::string>& items,
                                   SourceOptions base) {
  CliOptions out;
  out.source = std::move(base);
  std::map<std::string, std::string> reader_kv;
  std::set<std::string> seen;
  for (const std::string& item : items) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      return Status::InvalidArgument("option '" + item + "' is not key=value");
    }
    const std::string key = item.substr(0, eq);
    if (!seen.insert(key).second) {
      return Status::InvalidArgument("option " + key +
                                     " is given more than once");
    }
    if (SourceOptions::IsKey(key)) {
      RANGEIO_RETURN_NOT_OK(out.source.Set(key, item.substr(eq + 1)));
      out.local_threads_set |= key == "local-threads";
    } else {
      reader_kv.emplace(key, item.substr(eq + 1));
    }
  }
  auto reader = Options::Parse(reader_kv);
  if (!reader.ok() && reader.status().message().starts_with("unknown option")) {
    return Status::InvalidArgument(
        reader.status().message() +
        "; or a source option: see docs/options.md, \"Source options\"");
  }
  RANGEIO_ASSIGN_OR_RETURN(out.reader, std::move(reader));
  return out;
}

SourceOptions EffectiveSourceOptions(const CliOptions& o) {
  SourceOptions s = o.source;
  if (!o.local_threads_set) s.local.threads = o.reader.limiter.io_concurrency;
  return s;
}

}  // namespace rangeio::cli
