// rangeio/open_source.h — a Source by URL or path, for every backend.
//
// The one place where names become backends: plain paths and file:// URLs
// are local files (rangeio/local_file.h), http:// and https:// URLs are read
// with ranged GETs and s3://bucket/key from S3 or an S3-compatible store
// (both rangeio/http.h). SourceOptions carries each backend's options;
// SourceOptions::Set applies them from key=value text (the CLI's -o, table
// options), every key documented in docs/options.md.
//
// Thread-safety: OpenSource is reentrant; SourceOptions is a value.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "rangeio/export.h"
#include "rangeio/http.h"
#include "rangeio/local_file.h"
#include "rangeio/options.h"
#include "rangeio/source.h"
#include "rangeio/status.h"

namespace rangeio {

// Options of every backend OpenSource may choose; each uses its own members.
struct RANGEIO_EXPORT SourceOptions {
  LocalFileOptions local;  // plain paths and file:// URLs
  HttpOptions http;        // http://, https:// and s3:// URLs
  S3Options s3;  // s3:// URLs: endpoint, region, addressing, credentials

  // Applies one option by key (the struct's field names with '-' and a unit
  // suffix: "connect-timeout-ms", "size-hint", "endpoint", "local-engine",
  // ...; docs/options.md lists them all). Durations are whole milliseconds,
  // sizes take a suffix (K, KiB, M, MiB, G, GiB, T, TiB), booleans are
  // true/false. InvalidArgument naming the key and the value (never the value
  // of a credential key) for an unknown key or a bad value.
  Status Set(std::string_view key, std::string_view value);
  // True when `key` is one Set accepts: lets a caller route a mixed list of
  // key=value pairs between SourceOptions and Options.
  static bool IsKey(std::string_view key);
};

// Reader and source options from one list of key=value pairs (the CLI's -o,
// a binding's keyword arguments), each key routed to its owner: the keys of
// SourceOptions::Set to `source` (applied over what it holds), the others
// to Options::Parse (into `options`). An unknown key or a bad value is
// InvalidArgument naming it (never the value of a credential).
RANGEIO_EXPORT Status
ParseOpenOptions(const std::map<std::string, std::string>& kv, Options* options,
                 SourceOptions* source);

// Opens a source by URL or path. No I/O happens for object stores (the size
// comes from the first ranged GET or from http.size_hint; never a HEAD):
// - a plain path ("data/a.bin", "/tmp/a.bin"): a local file;
// - "file:///abs/path" or "file://localhost/abs/path": a local file, with
//   %XX escapes decoded ("file:///a%20b" is "/a b");
// - "http://..." or "https://...": OpenHttpSource(url, options.http);
// - "s3://bucket/key": OpenS3Source(url, options.s3, options.http); the
//   key is taken as written (no %XX decoding: "s3://b/a%20b" names the key
//   "a%20b", as the AWS CLI does) and sent percent-encoded.
// Any other scheme is InvalidArgument naming it and listing the supported
// ones; so are a file:// URL naming another host, a relative or empty
// file:// path, and a bad escape. Errors name the URL without credentials.
RANGEIO_EXPORT Result<std::shared_ptr<Source>> OpenSource(
    std::string_view url_or_path, const SourceOptions& options = {});

}  // namespace rangeio
