// OpenSource: the one place where a URL or a path becomes a backend.
//
// A name is a URL when it starts with an RFC 3986 scheme followed by "://"
// (or is "file:/path", RFC 8089's short form); anything else is a path, so
// that a local name with a colon ("a:b.bin") stays a path.
#include "rangeio/open_source.h"

#include <cctype>
#include <string>
#include <string_view>

#include "rangeio/http.h"
#include "rangeio/source.h"
#include "util/redact.h"

namespace rangeio {
namespace {

bool IsScheme(std::string_view s) {
  if (s.empty() || !std::isalpha(static_cast<unsigned char>(s[0]))) {
    return false;
  }
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '-' &&
        c != '.') {
      return false;
    }
  }
  return true;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(c));
  return out;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The path of a file URL with every %XX decoded.
Result<std::string> PercentDecode(std::string_view path, std::string_view url) {
  std::string out;
  out.reserve(path.size());
  for (size_t i = 0; i < path.size(); ++i) {
    if (path[i] != '%') {
      out += path[i];
      continue;
    }
    const int hi = i + 2 < path.size() ? HexValue(path[i + 1]) : -1;
    const int lo = hi >= 0 ? HexValue(path[i + 2]) : -1;
    if (lo < 0) {
      return Status::InvalidArgument(
          "URL '" + detail::RedactUrl(url) + "' has a bad escape at '" +
          std::string(path.substr(i, 3)) + "': want %XX with two hex digits");
    }
    if (hi == 0 && lo == 0) {
      return Status::InvalidArgument("URL '" + detail::RedactUrl(url) +
                                     "' decodes to a path with a NUL byte");
    }
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

// The local path a file URL names. `rest` is what follows "file:".
Result<std::string> FilePath(std::string_view rest, std::string_view url) {
  const std::string u = detail::RedactUrl(url);
  if (rest.find_first_of("?#") != std::string_view::npos) {
    return Status::InvalidArgument(
        "file URL '" + u +
        "' has a query or fragment; write '?' as %3F and '#' as %23");
  }
  std::string_view path = rest;
  if (rest.starts_with("//")) {
    const size_t slash = rest.find('/', 2);
    const std::string_view host =
        rest.substr(2, slash == std::string_view::npos ? std::string_view::npos
                                                       : slash - 2);
    if (!host.empty() && Lower(host) != "localhost") {
      return Status::InvalidArgument(
          "file URL '" + u + "' names host '" + std::string(host) +
          "': only local files (an empty host or localhost) can be read");
    }
    path = slash == std::string_view::npos ? std::string_view()
                                           : rest.substr(slash);
  }
  if (path.empty()) {
    return Status::InvalidArgument("file URL '" + u + "' has no path");
  }
  return PercentDecode(path, url);
}

Result<std::shared_ptr<Source>> OpenS3(std::string_view rest,
                                       const SourceOptions& options) {
  // The scheme is matched ignoring case; OpenS3Source wants it lower case.
  return OpenS3Source("s3:" + std::string(rest), options.s3, options.http);
}

}  // namespace

Result<std::shared_ptr<Source>> OpenSource(std::string_view url_or_path,
                                           const SourceOptions& options) {
  if (url_or_path.empty()) {
    return Status::InvalidArgument("source path or URL is empty");
  }
  const size_t colon = url_or_path.find(':');
  const std::string_view scheme = colon == std::string_view::npos
                                      ? std::string_view()
                                      : url_or_path.substr(0, colon);
  const std::string_view rest = colon == std::string_view::npos
                                    ? std::string_view()
                                    : url_or_path.substr(colon + 1);
  const bool is_file_scheme = Lower(scheme) == "file";
  const bool is_url =
      IsScheme(scheme) &&
      (rest.starts_with("//") || (is_file_scheme && rest.starts_with("/")));
  if (!is_url) return OpenLocalFile(std::string(url_or_path), options.local);
  const std::string lower = Lower(scheme);
  if (lower == "http" || lower == "https") {
    return OpenHttpSource(std::string(url_or_path), options.http);
  }
  if (lower == "s3") return OpenS3(rest, options);
  if (!is_file_scheme) {
    return Status::InvalidArgument(
        "unsupported scheme '" + std::string(scheme) + "' in '" +
        detail::RedactUrl(url_or_path) +
        "': supported are s3://, http://, https://, file:// and plain paths");
  }
  RANGEIO_ASSIGN_OR_RETURN(std::string path, FilePath(rest, url_or_path));
  return OpenLocalFile(path, options.local);
}

}  // namespace rangeio
