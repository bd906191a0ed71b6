#include "rangeio/status.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace rangeio {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kInvalidArgument:
      return "invalid argument";
    case StatusCode::kOutOfRange:
      return "out of range";
    case StatusCode::kNotFound:
      return "not found";
    case StatusCode::kPermissionDenied:
      return "permission denied";
    case StatusCode::kIoError:
      return "I/O error";
    case StatusCode::kCancelled:
      return "cancelled";
    case StatusCode::kResourceExhausted:
      return "resource exhausted";
    case StatusCode::kInternal:
      return "internal error";
  }
  return "unknown";
}

namespace {

// strerror is not thread-safe; strerror_r returns the text (GNU) or 0 (XSI).
[[maybe_unused]] const char* ErrnoText(const char* gnu, const char* /*buf*/) {
  return gnu;
}
[[maybe_unused]] const char* ErrnoText(int xsi, const char* buf) {
  return xsi == 0 ? buf : "unknown error";
}

}  // namespace

// The one place errno values become codes.
Status Status::FromErrno(int err, std::string_view context) {
  std::string msg(context);
  msg += ": ";
  char buf[256];
  msg += ErrnoText(strerror_r(err, buf, sizeof buf), buf);
  msg += " (errno ";
  msg += std::to_string(err);
  msg += ")";
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      return NotFound(std::move(msg));
    case EACCES:
    case EPERM:
      return PermissionDenied(std::move(msg));
    case EISDIR:
    case EINVAL:
      return InvalidArgument(std::move(msg));
    case ECANCELED:
      return Cancelled(std::move(msg));
    case ENOMEM:
      return ResourceExhausted(std::move(msg));
    default:
      return IoError(std::move(msg));
  }
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string s(StatusCodeName(code_));
  s += ": ";
  s += message_;
  return s;
}

Status Status::WithContext(std::string_view prefix) const {
  if (ok()) return *this;
  std::string m(prefix);
  m += ": ";
  m += message_;
  return Status(code_, std::move(m));
}

void Status::Abort(std::string_view context) const {
  const std::string text = ToString();
  std::fprintf(stderr, "rangeio: %.*s: %s\n", static_cast<int>(context.size()),
               context.data(), text.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace rangeio
