// redact.cc — URL redaction and foreign-text escaping; see redact.h.
#include "redact.h"

#include <array>

#include "parse_text.h"

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

std::string RedactUrl(std::string_view url) {
  const size_t sep = url.find("://");
  if (sep == std::string_view::npos) return ForeignText(url);
  const size_t auth_start = sep + 3;
  size_t auth_end = url.find_first_of("/?#", auth_start);
  if (auth_end == std::string_view::npos) auth_end = url.size();
  // The last '@': a password may itself hold an unencoded '@'.
  const std::string_view authority =
      url.substr(auth_start, auth_end - auth_start);
  const size_t at = authority.rfind('@');
  std::string out(url.substr(0, auth_start));
  out.append(at == std::string_view::npos ? authority
                                          : authority.substr(at + 1));
  std::string_view tail = url.substr(auth_end);
  const size_t q = tail.find('?');
  if (q != std::string_view::npos) {
    const size_t hash = tail.find('#', q);
    const std::string_view query = tail.substr(
        q + 1,
        hash == std::string_view::npos ? std::string_view::npos : hash - q - 1);
    out.append(tail.substr(0, q + 1)).append(RedactQuery(query));
    if (hash != std::string_view::npos) out.append(tail.substr(hash));
  } else {
    out.append(tail);
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
