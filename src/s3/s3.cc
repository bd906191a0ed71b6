// s3.cc — the S3 rules that need no network: s3:// URLs, key encoding,
// endpoints and addressing, credentials, region, and XML error bodies.
// Stateless; see s3.h.
#include "s3/s3.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <utility>

#include "util/parse_text.h"
#include "util/redact.h"

namespace rangeio::detail {
namespace {

bool IsUnreserved(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
         (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' || c == '~';
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// Bucket names as S3 accepts them, legacy ones included (upper case and
// '_' existed before 2018 in us-east-1): 1..255 of [A-Za-z0-9._-].
bool ValidBucket(std::string_view b) {
  if (b.empty() || b.size() > 255) return false;
  for (unsigned char c : b) {
    if (!(std::isalnum(c) || c == '.' || c == '-' || c == '_')) return false;
  }
  return true;
}

// A DNS label of a virtual-hosted bucket: 3..63 of [a-z0-9-], starting and
// ending with a letter or digit. Dots are excluded: they break TLS
// wildcard certificates (*.s3.amazonaws.com covers one label).
bool DnsCompatibleBucket(std::string_view b) {
  if (b.size() < 3 || b.size() > 63) return false;
  for (unsigned char c : b) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) {
      return false;
    }
  }
  return b.front() != '-' && b.back() != '-';
}

// A credentials file is a few hundred bytes; 1 MiB bounds what a wrong path
// (a log, a disk image) makes us read.
constexpr off_t kMaxCredentialsFileBytes = off_t{1} << 20;

// The whole of a small regular file; nullopt when it cannot be opened.
// O_NONBLOCK: opening a FIFO (or a device) for reading must not block until
// a writer comes; anything but a regular file is refused before a read.
Result<std::optional<std::string>> ReadSmallFile(const std::string& path,
                                                 const std::string& what) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return std::optional<std::string>();
  struct stat st {};
  std::string text;
  Status error;
  if (::fstat(fd, &st) != 0) {
    error = Status::FromErrno(errno, "stat " + what);
  } else if (!S_ISREG(st.st_mode)) {
    error = Status::InvalidArgument(what + " is not a regular file");
  } else if (st.st_size > kMaxCredentialsFileBytes) {
    error =
        Status::InvalidArgument(what + " has " + std::to_string(st.st_size) +
                                " bytes, more than a credentials file's "
                                "1 MiB");
  } else {
    char buf[4096];
    ssize_t n = 0;
    while ((n = ::read(fd, buf, sizeof buf)) > 0 &&
           text.size() <= static_cast<size_t>(kMaxCredentialsFileBytes)) {
      text.append(buf, static_cast<size_t>(n));
    }
    if (n < 0) error = Status::FromErrno(errno, "reading " + what);
  }
  ::close(fd);
  if (!error.ok()) return error;
  return std::optional<std::string>(std::move(text));
}

// The `profile` section of an INI credentials file: key -> value.
Result<std::optional<S3Credentials>> ReadCredentialsFile(
    const std::string& path, const std::string& profile, bool must_exist) {
  const std::string what = "AWS shared credentials file '" + path + "'";
  RANGEIO_ASSIGN_OR_RETURN(std::optional<std::string> text,
                           ReadSmallFile(path, what));
  if (!text) {
    if (!must_exist) return std::optional<S3Credentials>();
    return Status::NotFound(what + " cannot be read");
  }
  std::istringstream in(*text);
  S3Credentials c;
  bool in_section = false;
  bool found = false;
  std::string line;
  while (std::getline(in, line)) {
    std::string_view l = TrimSpace(line);
    if (l.empty() || l.front() == '#' || l.front() == ';') continue;
    if (l.front() == '[') {
      if (l.back() != ']') {
        return Status::InvalidArgument("AWS shared credentials file '" + path +
                                       "': malformed section header");
      }
      in_section = TrimSpace(l.substr(1, l.size() - 2)) == profile;
      found = found || in_section;
      continue;
    }
    if (!in_section) continue;
    const size_t eq = l.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string k = Lower(TrimSpace(l.substr(0, eq)));
    const std::string v(TrimSpace(l.substr(eq + 1)));
    if (k == "aws_access_key_id") c.access_key_id = v;
    if (k == "aws_secret_access_key") c.secret_access_key = v;
    if (k == "aws_session_token") c.session_token = v;
  }
  if (!found || (c.access_key_id.empty() && c.secret_access_key.empty())) {
    if (!must_exist) return std::optional<S3Credentials>();
    return Status::NotFound("AWS shared credentials file '" + path +
                            "' has no credentials for profile '" + profile +
                            "'");
  }
  if (c.access_key_id.empty() || c.secret_access_key.empty()) {
    return Status::InvalidArgument(
        "AWS shared credentials file '" + path + "', profile '" + profile +
        "': aws_access_key_id and aws_secret_access_key must both be set");
  }
  c.source = "profile '" + profile + "' of '" + path + "'";
  return std::optional<S3Credentials>(std::move(c));
}

void AppendDecodedXmlText(std::string_view text, std::string* out) {
  size_t i = 0;
  while (i < text.size()) {
    if (text[i] != '&') {
      out->push_back(text[i++]);
      continue;
    }
    const size_t semi = text.find(';', i);
    if (semi == std::string_view::npos || semi - i > 8) {
      out->push_back(text[i++]);
      continue;
    }
    const std::string_view ent = text.substr(i + 1, semi - i - 1);
    char c = 0;
    if (ent == "amp") c = '&';
    if (ent == "lt") c = '<';
    if (ent == "gt") c = '>';
    if (ent == "quot") c = '"';
    if (ent == "apos") c = '\'';
    if (ent.size() > 1 && ent[0] == '#') {
      const bool hex = ent[1] == 'x' || ent[1] == 'X';
      const std::string digits(ent.substr(hex ? 2 : 1));
      char* end = nullptr;
      const long v = std::strtol(digits.c_str(), &end, hex ? 16 : 10);
      if (!digits.empty() && *end == '\0' && v > 0 && v < 128) {
        c = static_cast<char>(v);
      }
    }
    if (c == 0) {
      out->push_back(text[i++]);
      continue;
    }
    out->push_back(c);
    i = semi + 1;
  }
}

std::string ElementText(std::string_view body, std::string_view name) {
  const std::string open = "<" + std::string(name) + ">";
  const std::string close = "</" + std::string(name) + ">";
  const size_t b = body.find(open);
  if (b == std::string_view::npos) return {};
  const size_t start = b + open.size();
  const size_t e = body.find(close, start);
  if (e == std::string_view::npos) return {};
  std::string out;
  AppendDecodedXmlText(body.substr(start, e - start), &out);
  return out;
}

}  // namespace

std::optional<std::string> ProcessEnv(const char* name) {
  // Unsafe only against a concurrent setenv, which the library never calls.
  const char* v = std::getenv(name);  // NOLINT(concurrency-mt-unsafe)
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

Result<S3Location> ParseS3Url(std::string_view url) {
  constexpr std::string_view kScheme = "s3://";
  const std::string shown = RedactUrl(url);
  if (url.substr(0, kScheme.size()) != kScheme) {
    return Status::InvalidArgument("'" + shown + "' is not an s3:// URL");
  }
  const std::string_view rest = url.substr(kScheme.size());
  const size_t slash = rest.find('/');
  if (slash == std::string_view::npos || slash + 1 == rest.size()) {
    return Status::InvalidArgument("s3 URL '" + shown +
                                   "' names no key: want s3://bucket/key");
  }
  S3Location loc{std::string(rest.substr(0, slash)),
                 std::string(rest.substr(slash + 1))};
  if (!ValidBucket(loc.bucket)) {
    return Status::InvalidArgument(
        "s3 URL '" + shown + "': bucket '" + ForeignText(loc.bucket) +
        "' is invalid (1..255 of letters, digits, '.', '-', '_')");
  }
  if (loc.key.size() > 1024) {
    return Status::InvalidArgument("s3 URL '" + shown +
                                   "': the key is longer than S3's 1024 bytes");
  }
  return loc;
}

std::string EncodeS3Key(std::string_view key) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(key.size() * 3);
  for (unsigned char c : key) {
    if (IsUnreserved(c) || c == '/') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

Result<S3Endpoint> ParseS3Endpoint(std::string_view endpoint) {
  S3Endpoint ep;
  // What errors show: a config's endpoint may carry user:password.
  const std::string shown = RedactUrl(endpoint);
  const size_t sep = endpoint.find("://");
  if (sep == std::string_view::npos) {
    return Status::InvalidArgument(
        "S3 endpoint '" + shown +
        "' has no scheme: want http(s)://host[:port]");
  }
  ep.scheme = Lower(endpoint.substr(0, sep));
  if (ep.scheme != "http" && ep.scheme != "https") {
    return Status::InvalidArgument("S3 endpoint '" + shown +
                                   "': scheme must be http or https");
  }
  std::string_view rest = endpoint.substr(sep + 3);
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.empty() || rest.find_first_of("/?#@ ") != std::string_view::npos) {
    return Status::InvalidArgument(
        "S3 endpoint '" + shown +
        "' must be scheme://host[:port] with no path, query or user");
  }
  ep.authority = std::string(rest);
  if (rest.front() == '[') {  // [v6]:port
    const size_t close = rest.find(']');
    if (close == std::string_view::npos) {
      return Status::InvalidArgument("S3 endpoint '" + shown +
                                     "': unterminated IPv6 address");
    }
    ep.host = std::string(rest.substr(0, close + 1));
  } else {
    ep.host = std::string(rest.substr(0, rest.find(':')));
  }
  const std::string host = Lower(ep.host);
  constexpr std::string_view kAws = ".amazonaws.com";
  ep.aws = host.size() > kAws.size() &&
           host.compare(host.size() - kAws.size(), kAws.size(), kAws) == 0;
  return ep;
}

bool UseVirtualHosted(S3Addressing style, const S3Endpoint& endpoint,
                      std::string_view bucket) {
  switch (style) {
    case S3Addressing::kPath:
      return false;
    case S3Addressing::kVirtualHosted:
      return true;
    case S3Addressing::kAuto:
      break;
  }
  return endpoint.aws && DnsCompatibleBucket(bucket);
}

std::string S3ObjectUrl(const S3Endpoint& endpoint, const S3Location& loc,
                        bool virtual_hosted) {
  if (virtual_hosted) {
    return endpoint.scheme + "://" + loc.bucket + "." + endpoint.authority +
           "/" + EncodeS3Key(loc.key);
  }
  return endpoint.scheme + "://" + endpoint.authority + "/" +
         EncodeS3Key(loc.bucket) + "/" + EncodeS3Key(loc.key);
}

namespace {

// What ResolveS3Credentials finds, before CheckCredentials.
Result<std::optional<S3Credentials>> FindS3Credentials(const S3Options& options,
                                                       const EnvLookup& env) {
  if (!options.access_key_id.empty() || !options.secret_access_key.empty()) {
    if (options.access_key_id.empty() || options.secret_access_key.empty()) {
      return Status::InvalidArgument(
          "S3Options: access_key_id and secret_access_key must be set "
          "together");
    }
    return std::optional<S3Credentials>(
        S3Credentials{options.access_key_id, options.secret_access_key,
                      options.session_token, "S3Options"});
  }
  if (options.profile.empty()) {
    auto id = env("AWS_ACCESS_KEY_ID");
    auto secret = env("AWS_SECRET_ACCESS_KEY");
    if (id && secret) {
      return std::optional<S3Credentials>(S3Credentials{
          *id, *secret, env("AWS_SESSION_TOKEN").value_or(""), "environment"});
    }
    if (id || secret) {
      return Status::InvalidArgument(
          "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set together");
    }
  }
  std::string path;
  if (auto f = env("AWS_SHARED_CREDENTIALS_FILE")) {
    path = *f;
  } else if (auto home = env("HOME")) {
    path = *home + "/.aws/credentials";
  } else {
    return std::optional<S3Credentials>();
  }
  const bool named = !options.profile.empty() || env("AWS_PROFILE");
  const std::string profile = !options.profile.empty() ? options.profile
                              : env("AWS_PROFILE")     ? *env("AWS_PROFILE")
                                                       : "default";
  // A profile asked for by name must exist; the default one may not.
  return ReadCredentialsFile(path, profile, named);
}

// A CR or LF in a value that becomes a header (the token, the key id in the
// Authorization header) would add a header of the value's choosing.
Status CheckCredentials(const S3Credentials& c) {
  const std::pair<const char*, const std::string*> fields[] = {
      {"access key id", &c.access_key_id},
      {"secret access key", &c.secret_access_key},
      {"session token", &c.session_token}};
  for (const auto& [what, value] : fields) {
    if (HasControlChars(*value)) {
      return Status::InvalidArgument(
          std::string("the AWS ") + what + " from " + c.source +
          " holds a control character (CR, LF, ...), which no credential "
          "has; the value is not shown");
    }
  }
  return Status::OK();
}

}  // namespace

Result<std::optional<S3Credentials>> ResolveS3Credentials(
    const S3Options& options, const EnvLookup& env) {
  RANGEIO_ASSIGN_OR_RETURN(std::optional<S3Credentials> c,
                           FindS3Credentials(options, env));
  if (c) RANGEIO_RETURN_NOT_OK(CheckCredentials(*c));
  return c;
}

std::string CacheIdentityOf(const S3Credentials* c) {
  if (c == nullptr) return "anonymous";
  return "key " + c->access_key_id + " " +
         std::to_string(std::hash<std::string>{}(c->secret_access_key + '\n' +
                                                 c->session_token));
}

std::string ResolveS3Region(const S3Options& options, const EnvLookup& env) {
  if (!options.region.empty()) return options.region;
  if (auto r = env("AWS_REGION")) return *r;
  if (auto r = env("AWS_DEFAULT_REGION")) return *r;
  return "us-east-1";
}

std::string ResolveS3EndpointUrl(const S3Options& options,
                                 const std::string& region,
                                 const EnvLookup& env) {
  if (!options.endpoint.empty()) return options.endpoint;
  if (auto e = env("AWS_ENDPOINT_URL_S3")) return *e;
  if (auto e = env("AWS_ENDPOINT_URL")) return *e;
  return "https://s3." + region + ".amazonaws.com";
}

S3ErrorBody ParseS3ErrorBody(std::string_view body) {
  return {ElementText(body, "Code"), ElementText(body, "Message"),
          ElementText(body, "ActualObjectSize")};
}

}  // namespace rangeio::detail
