// rangeio/status.h — the error model of the whole library.
//
// No exception crosses the public API. A fallible call returns `Status`
// (success or a code plus a message) or `Result<T>` (a value or a non-OK
// Status). Both are [[nodiscard]]. Messages name what failed: the source, the
// range and the backend cause (errno text, HTTP status, ...).
//
// Thread-safety: values; copy freely, share const references across threads.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "rangeio/export.h"

namespace rangeio {

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument,    // bad option, malformed range or URL: caller's mistake
  kOutOfRange,         // range past the end of the source
  kNotFound,           // file or object does not exist
  kPermissionDenied,   // access refused by the backend
  kIoError,            // the backend failed (errno, HTTP status, short read)
  kCancelled,          // the work was dropped before it finished
  kResourceExhausted,  // a budget cannot be met (see RangeStream::Next)
  kInternal,           // a bug in rangeio
};

// Stable lower-case name of a code, e.g. "out of range".
RANGEIO_EXPORT std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] RANGEIO_EXPORT Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message)
      : code_(code), message_(std::move(message)) {}

  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string m) {
    return {StatusCode::kInvalidArgument, std::move(m)};
  }
  static Status OutOfRange(std::string m) {
    return {StatusCode::kOutOfRange, std::move(m)};
  }
  static Status NotFound(std::string m) {
    return {StatusCode::kNotFound, std::move(m)};
  }
  static Status PermissionDenied(std::string m) {
    return {StatusCode::kPermissionDenied, std::move(m)};
  }
  static Status IoError(std::string m) {
    return {StatusCode::kIoError, std::move(m)};
  }
  static Status Cancelled(std::string m) {
    return {StatusCode::kCancelled, std::move(m)};
  }
  static Status ResourceExhausted(std::string m) {
    return {StatusCode::kResourceExhausted, std::move(m)};
  }
  static Status Internal(std::string m) {
    return {StatusCode::kInternal, std::move(m)};
  }
  // Maps an errno value to a code and appends strerror's text to `context`.
  static Status FromErrno(int err, std::string_view context);

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "<code name>: <message>", or "OK".
  std::string ToString() const;

  // Returns a copy whose message is "<prefix>: <message>".
  Status WithContext(std::string_view prefix) const;

  // Prints "<context>: <ToString()>" to stderr and aborts the process: for
  // a broken precondition (see Result::value), never for an I/O error.
  [[noreturn]] void Abort(std::string_view context) const;

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// A value of type T or an error. Construct from a T (success) or from a
// non-OK Status (failure); constructing from an OK Status is a bug and turns
// into an Internal error. Reading the value of an error is a bug too: it
// aborts with the status message (as Arrow's ValueOrDie), it never throws.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    if (std::get_if<Status>(&v_)->ok()) {
      v_ = Status::Internal("Result constructed from an OK Status");
    }
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);  // cannot throw: !ok()
  }
  // Precondition: ok(); on an error, prints the status and aborts.
  T& value() & { return *CheckedValue(); }
  const T& value() const& { return *CheckedValue(); }
  T&& value() && { return std::move(*CheckedValue()); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  T* CheckedValue() {
    if (T* v = std::get_if<T>(&v_)) return v;
    std::get_if<Status>(&v_)->Abort("Result::value() on an error");
  }
  const T* CheckedValue() const {
    if (const T* v = std::get_if<T>(&v_)) return v;
    std::get_if<Status>(&v_)->Abort("Result::value() on an error");
  }

  std::variant<T, Status> v_;
};

}  // namespace rangeio

#define RANGEIO_CONCAT_INNER(a, b) a##b
#define RANGEIO_CONCAT(a, b) RANGEIO_CONCAT_INNER(a, b)

// Returns from the enclosing function if `expr` (a Status) is not OK.
#define RANGEIO_RETURN_NOT_OK(expr)            \
  do {                                         \
    ::rangeio::Status _rangeio_st = (expr);    \
    if (!_rangeio_st.ok()) return _rangeio_st; \
  } while (false)

// `lhs` is a declaration and `tmp` a name: neither can be parenthesised.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define RANGEIO_ASSIGN_OR_RETURN_IMPL(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                                  \
  if (!tmp.ok()) return tmp.status();                  \
  lhs = std::move(tmp).value()
// NOLINTEND(bugprone-macro-parentheses)

// `RANGEIO_ASSIGN_OR_RETURN(auto x, MakeX());` declares x or returns the error.
#define RANGEIO_ASSIGN_OR_RETURN(lhs, rexpr)                               \
  RANGEIO_ASSIGN_OR_RETURN_IMPL(RANGEIO_CONCAT(_rangeio_r, __LINE__), lhs, \
                                rexpr)
