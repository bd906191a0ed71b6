// rangeio/open_source.h — a Source by URL or path.
//
// The one place where names become backends. Today that is local files
// (plain paths and file:// URLs); HTTP and S3 sources are opened through
// rangeio/http.h.
//
// Thread-safety: OpenSource is reentrant; SourceOptions is a value.
#pragma once

#include <memory>
#include <string_view>

#include "rangeio/local_file.h"
#include "rangeio/source.h"
#include "rangeio/status.h"

namespace rangeio {

// Options of every backend OpenSource may choose; each uses its own member.
struct SourceOptions {
  LocalFileOptions local;  // plain paths and file:// URLs
};

// Opens a source by URL or path:
// - a plain path ("data/a.bin", "/tmp/a.bin"): a local file;
// - "file:///abs/path" or "file://localhost/abs/path": a local file, with
//   %XX escapes decoded ("file:///a%20b" is "/a b").
// Any other scheme, a file:// URL naming another host, a relative or empty
// file:// path, or a bad escape is InvalidArgument naming the URL.
Result<std::shared_ptr<Source>> OpenSource(std::string_view url_or_path,
                                           const SourceOptions& options = {});

}  // namespace rangeio
