// redact.h (internal) — the one place where text from a URL, a server or a
// config becomes fit for an error message, a log line or Source::name().
//
// RedactUrl drops a URL's user:password and hides the values of the query
// parameters that sign a presigned S3 URL (X-Amz-Signature,
// X-Amz-Security-Token, X-Amz-Credential): whatever the scheme, so that an
// unsupported one (ftp://user:pw@...) is redacted too. ForeignText escapes
// and truncates text a server or a file chose (a Content-Range, an S3
// <Message>) so that it can neither forge lines nor grow a message without
// bound. Every path that shows a URL or foreign text goes through these.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace rangeio::detail {

// The most bytes of foreign text an error shows. 200: a Content-Range or an
// S3 <Message> is well under 100 bytes; more is a hostile or broken peer,
// and the first 200 bytes say what it is.
inline constexpr size_t kMaxForeignText = 200;

// `url` with its userinfo (everything up to the last '@' of the authority)
// removed and the values of the signing query parameters replaced by
// "REDACTED". Text that is not a URL comes back as ForeignText of itself
// (so it is escaped and bounded as well).
std::string RedactUrl(std::string_view url);

// `text` with every byte outside printable ASCII (and '\\') written as
// \xHH, cut after `max` input bytes with "... (N bytes)" appended.
std::string ForeignText(std::string_view text, size_t max = kMaxForeignText);

// True when `value` holds a byte that must not go into an HTTP header: any
// control character (CR, LF, NUL, ... and DEL).
bool HasControlChars(std::string_view value);

}  // namespace rangeio::detail
