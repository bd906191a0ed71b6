// binding.h — what the pieces of the rangeio Python module share.
//
// The module (_rangeio) is a thin layer over the C++ API: every blocking
// call runs with the GIL released, no library thread ever touches a Python
// object (completions for Python go through the core's CompletionQueue that a
// Python-owned thread drains), and every non-OK Status becomes a Python
// exception of the type its code calls for (errors.cc).
#pragma once

#include <pybind11/pybind11.h>

#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "rangeio/rangeio.h"

namespace rangeio::python {

namespace py = pybind11;

// Releases the GIL for its scope, as py::gil_scoped_release, except that
// its destructor lets the forced unwind of pthread_exit through: a daemon
// thread taking the GIL back while Python finalizes is ended inside
// PyEval_RestoreThread, and a noexcept destructor would turn that into
// std::terminate (an abort at exit with reads in flight).
class GilRelease {
 public:
  GilRelease() : state_(PyEval_SaveThread()) {}
  GilRelease(const GilRelease&) = delete;
  GilRelease& operator=(const GilRelease&) = delete;
  ~GilRelease() noexcept(false) { PyEval_RestoreThread(state_); }

 private:
  PyThreadState* state_;
};

// Marks an iterator busy while one thread is inside it with the GIL
// released (a RangeStream is used by one thread at a time). Set and checked
// under the GIL, so a second thread sees it: ValueError, as Python's
// "generator already executing".
class BusyGuard {
 public:
  explicit BusyGuard(bool* busy);
  BusyGuard(const BusyGuard&) = delete;
  BusyGuard& operator=(const BusyGuard&) = delete;
  ~BusyGuard() { *busy_ = false; }

 private:
  bool* busy_;
};

// A non-OK Status thrown through pybind11; the translator registered by
// BindErrors turns it into the Python exception MakeException builds.
class StatusError : public std::exception {
 public:
  explicit StatusError(Status status)
      : status_(std::move(status)), what_(status_.ToString()) {}
  const Status& status() const { return status_; }
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  Status status_;
  std::string what_;
};

// Throws StatusError when `status` is not OK.
inline void ThrowIfError(const Status& status) {
  if (!status.ok()) throw StatusError(status);
}

inline BusyGuard::BusyGuard(bool* busy) : busy_(busy) {
  if (*busy) {
    throw StatusError(Status::InvalidArgument(
        "iterator already executing in another thread"));
  }
  *busy = true;
}
template <typename T>
T ValueOrThrow(Result<T> result) {
  ThrowIfError(result.status());
  return std::move(result).value();
}

// The exception instance for a non-OK status (GIL held): FileNotFoundError,
// PermissionError, ValueError (bad input, range past the end),
// rangeio.ReadError / CancelledError / BudgetError (OSError subclasses), or
// RuntimeError (a bug in rangeio).
py::object MakeException(const Status& status);

// A memoryview over `slice`, zero-copy: it keeps the Slice (and with it the
// response budget of its read) until Python drops the last view of it.
py::object MemoryViewOf(Slice slice);

// A ByteRange from two Python ints; ValueError (InvalidArgument) naming
// range `index` for a negative, non-int or overflowing value.
ByteRange RangeFromPython(py::handle offset, py::handle length, size_t index);
// Ranges from any iterable of (offset, length) pairs, as RangeFromPython.
std::vector<ByteRange> RangesFromPython(const py::iterable& ranges);

// Key=value pairs from Python ("read-thread-num" -> "64"), routed as the
// CLI routes -o: SourceOptions keys to the source, the rest to Options.
struct OpenOptions {
  Options reader;
  SourceOptions source;
};
OpenOptions ParseOpenOptions(const std::map<std::string, std::string>& kv);

// A Stats snapshot as a dict (latency percentiles in milliseconds).
py::dict StatsDict(const Stats& stats);

void BindErrors(py::module_& m);
void BindReader(py::module_& m);
void BindBatch(py::module_& m);
void BindCat(py::module_& m);

}  // namespace rangeio::python
