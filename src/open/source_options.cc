// SourceOptions::Set: the backends' options from key=value text, one table.
//
// Each key checks its value's syntax and its own range here, so that a typo
// fails naming the key; rules between fields (retry-max-backoff-ms at least
// retry-base-backoff-ms) are checked by the backend's Validate when opening.
#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "rangeio/open_source.h"
#include "util/parse_text.h"
#include "util/redact.h"

namespace rangeio {
namespace {

using detail::ForeignText;
using detail::ParseBytes;
using detail::ParseU64;

constexpr uint64_t kDayMs = 86'400'000;

// Keys whose values are secrets or identities: never quoted in an error.
bool IsCredentialKey(std::string_view key) {
  return key == "access-key-id" || key == "secret-access-key" ||
         key == "session-token";
}

Status Invalid(std::string_view key, std::string_view value,
               std::string_view valid) {
  const std::string shown =
      IsCredentialKey(key) ? std::string() : "='" + ForeignText(value) + "'";
  return Status::InvalidArgument("option " + std::string(key) + shown +
                                 " is invalid: " + std::string(valid));
}

Status SetBool(std::string_view key, std::string_view value, bool* out) {
  if (value != "true" && value != "false") {
    return Invalid(key, value, "want true or false");
  }
  *out = value == "true";
  return Status::OK();
}

Status SetCount(std::string_view key, std::string_view value, uint64_t lo,
                uint64_t hi, uint64_t* out) {
  if (!ParseU64(value, out) || *out < lo || *out > hi) {
    return Invalid(key, value,
                   "want a whole number " + std::to_string(lo) + ".." +
                       std::to_string(hi));
  }
  return Status::OK();
}

Status SetMillis(std::string_view key, std::string_view value, uint64_t lo,
                 std::chrono::milliseconds* out) {
  uint64_t ms = 0;
  if (!ParseU64(value, &ms) || ms < lo || ms > kDayMs) {
    return Invalid(key, value,
                   "want whole milliseconds " + std::to_string(lo) + ".." +
                       std::to_string(kDayMs));
  }
  *out = std::chrono::milliseconds(ms);
  return Status::OK();
}

// The text fields: any value without control characters (a header or a
// path), empty meaning "not set".
Status SetText(std::string_view key, std::string_view value, std::string* out) {
  for (char c : value) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return Invalid(key, value, "holds a control character");
    }
  }
  *out = std::string(value);
  return Status::OK();
}

Status SetHttp(std::string_view key, std::string_view value, HttpOptions* h) {
  uint64_t n = 0;
  if (key == "connect-timeout-ms") {
    return SetMillis(key, value, 1, &h->connect_timeout);
  }
  if (key == "first-byte-timeout-ms") {
    return SetMillis(key, value, 1, &h->first_byte_timeout);
  }
  if (key == "stall-timeout-ms") {
    return SetMillis(key, value, 1, &h->stall_timeout);
  }
  if (key == "retry-base-backoff-ms") {
    return SetMillis(key, value, 0, &h->retry_base_backoff);
  }
  if (key == "retry-max-backoff-ms") {
    return SetMillis(key, value, 0, &h->retry_max_backoff);
  }
  if (key == "deadline-ms") return SetMillis(key, value, 1, &h->deadline);
  if (key == "max-attempts") {
    RANGEIO_RETURN_NOT_OK(SetCount(key, value, 1, 100, &n));
    h->max_attempts = static_cast<uint32_t>(n);
    return Status::OK();
  }
  if (key == "max-connections") {
    RANGEIO_RETURN_NOT_OK(SetCount(key, value, 1, 4096, &n));
    h->max_connections = static_cast<uint32_t>(n);
    return Status::OK();
  }
  if (key == "min-bytes-per-second") {
    return SetCount(key, value, 0, uint64_t{1} << 40, &h->min_bytes_per_second);
  }
  if (key == "verify-tls") return SetBool(key, value, &h->verify_tls);
  if (key == "adaptive") {
    if (value != "on" && value != "off") {
      return Invalid(key, value, "valid on, off");
    }
    h->adaptive = value == "on";
    return Status::OK();
  }
  if (key == "ca-file") return SetText(key, value, &h->ca_file);
  // key == "size-hint"
  if (!ParseBytes(value, &n)) {
    return Invalid(key, value,
                   "want the object's size in bytes (suffix K, KiB, M, MiB, "
                   "G, GiB, T, TiB allowed)");
  }
  h->size_hint = n;
  return Status::OK();
}

Status SetS3(std::string_view key, std::string_view value, S3Options* s3) {
  if (key == "endpoint") return SetText(key, value, &s3->endpoint);
  if (key == "region") return SetText(key, value, &s3->region);
  if (key == "profile") return SetText(key, value, &s3->profile);
  if (key == "anonymous") return SetBool(key, value, &s3->anonymous);
  if (key == "access-key-id") return SetText(key, value, &s3->access_key_id);
  if (key == "secret-access-key") {
    return SetText(key, value, &s3->secret_access_key);
  }
  if (key == "session-token") return SetText(key, value, &s3->session_token);
  // key == "addressing"
  if (value == "auto") {
    s3->addressing = S3Addressing::kAuto;
  } else if (value == "path") {
    s3->addressing = S3Addressing::kPath;
  } else if (value == "virtual-hosted") {
    s3->addressing = S3Addressing::kVirtualHosted;
  } else {
    return Invalid(key, value, "valid auto, path, virtual-hosted");
  }
  return Status::OK();
}

Status SetLocal(std::string_view key, std::string_view value,
                LocalFileOptions* local) {
  uint64_t n = 0;
  if (key == "local-engine") {
    auto engine = ParseLocalEngine(value);
    if (!engine.ok()) return Invalid(key, value, "valid auto, pread, uring");
    local->engine = *engine;
    return Status::OK();
  }
  if (key == "direct") return SetBool(key, value, &local->direct);
  if (key == "try-inline") return SetBool(key, value, &local->try_inline);
  if (key == "local-threads") {
    RANGEIO_RETURN_NOT_OK(SetCount(key, value, 1, 4096, &n));
    local->threads = static_cast<uint32_t>(n);
    return Status::OK();
  }
  // key == "hit-threads"
  RANGEIO_RETURN_NOT_OK(SetCount(key, value, 0, 4096, &n));
  local->hit_threads = static_cast<uint32_t>(n);
  return Status::OK();
}

constexpr std::array<std::string_view, 13> kHttpKeys = {"min-bytes-per-second",
                                                        "connect-timeout-ms",
                                                        "first-byte-timeout-ms",
                                                        "stall-timeout-ms",
                                                        "retry-base-backoff-ms",
                                                        "retry-max-backoff-ms",
                                                        "deadline-ms",
                                                        "max-attempts",
                                                        "max-connections",
                                                        "verify-tls",
                                                        "ca-file",
                                                        "adaptive",
                                                        "size-hint"};
constexpr std::array<std::string_view, 8> kS3Keys = {
    "endpoint",      "region",        "profile",
    "anonymous",     "access-key-id", "secret-access-key",
    "session-token", "addressing"};
constexpr std::array<std::string_view, 5> kLocalKeys = {
    "local-engine", "direct", "try-inline", "local-threads", "hit-threads"};

template <size_t N>
bool In(const std::array<std::string_view, N>& keys, std::string_view key) {
  for (std::string_view k : keys) {
    if (k == key) return true;
  }
  return false;
}

}  // namespace

Status ParseOpenOptions(const std::map<std::string, std::string>& kv,
                        Options* options, SourceOptions* source) {
  std::map<std::string, std::string> reader_kv;
  for (const auto& [key, value] : kv) {
    if (SourceOptions::IsKey(key)) {
      RANGEIO_RETURN_NOT_OK(source->Set(key, value));
    } else {
      reader_kv.emplace(key, value);
    }
  }
  Result<Options> parsed = Options::Parse(reader_kv);
  if (!parsed.ok() && parsed.status().message().starts_with("unknown option")) {
    return Status::InvalidArgument(
        parsed.status().message() +
        "; or a source option: see docs/options.md, \"Source options\"");
  }
  RANGEIO_ASSIGN_OR_RETURN(*options, std::move(parsed));
  return Status::OK();
}

bool SourceOptions::IsKey(std::string_view key) {
  return In(kHttpKeys, key) || In(kS3Keys, key) || In(kLocalKeys, key);
}

Status SourceOptions::Set(std::string_view key, std::string_view value) {
  if (In(kHttpKeys, key)) return SetHttp(key, value, &http);
  if (In(kS3Keys, key)) return SetS3(key, value, &s3);
  if (In(kLocalKeys, key)) return SetLocal(key, value, &local);
  return Status::InvalidArgument(
      "unknown source option '" + ForeignText(key) +
      "': see docs/options.md for the keys of local files, HTTP and S3");
}

}  // namespace rangeio
