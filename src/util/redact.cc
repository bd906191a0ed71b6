// redact.cc — URL redaction and foreign-text escaping; see redact.h.
#include "util/redact.h"

#include <array>

#include "util/parse_text.h"

namespace rangeio::detail {
namespace {

// Query parameters of a presigned S3 URL that grant access or identify the
// key: the rest of the query (X-Amz-Date, X-Amz-Expires, ...) is harmless.
constexpr std::array<std::string_view, 3> kSecretParams = {
    "x-amz-signature", "x-amz-security-token", "x-amz-credential"};

bool IsSecretParam(std::string_view name) {
  for (std::string_view p : kSecretParams) {
    if (EqualsNoCase(name, p)) return true;
  }
  return false;
}

// The query with each secret parameter's value replaced.
std::string RedactQuery(std::string_view query) {
  std::string out;
  size_t i = 0;
  while (i <= query.size()) {
    const size_t amp = query.find('&', i);
    const size_t end = amp == std::string_view::npos ? query.size() : amp;
    const std::string_view param = query.substr(i, end - i);
    const size_t eq = param.find('=');
    if (eq != std::string_view::npos && IsSecretParam(param.substr(0, eq))) {
      out.append(param.substr(0, eq + 1)).append("REDACTED");
    } else {
      out.append(param);
    }
    if (amp == std::string_view::npos) break;
    out.push_back('&');
    i = amp + 1;
  }
  return out;
}

// Where the authority after the ':' at `colon` starts: past "/" or "//"
// (libcurl takes "https:/user:pw@host" as "https://user:pw@host").
size_t AuthorityStart(std::string_view text, size_t colon) {
  size_t i = colon + 1;
  while (i < text.size() && i < colon + 4 && text[i] == '/') ++i;
  return i;
}

// Every "scheme:/user:pw@host" (one to three slashes) in `text` without its
// "user:pw@": a URL may carry another one (a proxy's "?u=ftp://u:pw@h/"),
// whose password is as secret. Errs on the side of cutting: an odd path
// ("/a:/b@c") loses its "b@" too.
std::string DropUserinfo(std::string_view text) {
  std::string out;
  size_t from = 0;
  for (size_t colon = text.find(":/"); colon != std::string_view::npos;
       colon = text.find(":/", from)) {
    const size_t start = AuthorityStart(text, colon);
    size_t end = text.find_first_of("/?#", start);
    if (end == std::string_view::npos) end = text.size();
    // The last '@': a password may itself hold an unencoded '@'.
    const size_t at = text.substr(start, end - start).rfind('@');
    out.append(text.substr(from, start - from));
    from = at == std::string_view::npos ? start : start + at + 1;
  }
  out.append(text.substr(from));
  return out;
}

}  // namespace

std::string ForeignText(std::string_view text, size_t max) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  const std::string_view shown = text.substr(0, max);
  out.reserve(shown.size());
  for (const char ch : shown) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out.push_back(ch);
    } else {
      out.append("\\x").push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  if (text.size() > max) {
    out += "... (" + std::to_string(text.size()) + " bytes)";
  }
  return out;
}

namespace {

// One pass: every userinfo dropped (until none is left), then the signing
// query values hidden. Empty when the userinfo never settles.
std::string RedactOnce(std::string_view url) {
  // Dropping a userinfo can join what was around it into a new one
  // ("s3:/x@/k@" -> "s3://k@", found by url_fuzz): again until nothing
  // changes. Each pass eats a '/' of the joined prefix, so a few suffice.
  std::string plain = DropUserinfo(url);
  for (int pass = 0;; ++pass) {
    std::string again = DropUserinfo(plain);
    if (again == plain) break;
    if (pass == 8) return {};
    plain = std::move(again);
  }
  const std::string_view u = plain;
  const size_t q = u.find('?');
  if (q == std::string_view::npos) return plain;
  const size_t hash = u.find('#', q);
  const std::string_view query =
      u.substr(q + 1, hash == std::string_view::npos ? std::string_view::npos
                                                     : hash - q - 1);
  std::string out(u.substr(0, q + 1));
  out.append(RedactQuery(query));
  if (hash != std::string_view::npos) out.append(u.substr(hash));
  return out;
}

}  // namespace

std::string RedactUrl(std::string_view url) {
  if (url.find(":/") == std::string_view::npos) return ForeignText(url);
  // Hiding a query value can join text into a new userinfo too (url_fuzz):
  // passes until the text is stable; one that never is is not shown.
  std::string out(url);
  for (int pass = 0;; ++pass) {
    std::string again = RedactOnce(out);
    if (again.empty() && !out.empty()) pass = 8;
    if (again == out) break;
    if (pass >= 8) {
      return "(a URL of " + std::to_string(url.size()) +
             " bytes that could not be redacted)";
    }
    out = std::move(again);
  }
  // Escaped and bounded after redaction, so that no secret is cut in half.
  return ForeignText(out, kMaxForeignText * 4);
}

bool HasControlChars(std::string_view value) {
  for (const char ch : value) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f) return true;
  }
  return false;
}

}  // namespace rangeio::detail
