// errors.cc — one mapping from StatusCode to Python exception types.
#include <cerrno>

#include "binding.h"

namespace rangeio::python {
namespace {

// The OSError subclasses of the module, created once by BindErrors (module
// objects live as long as the interpreter).
PyObject* g_read_error = nullptr;
PyObject* g_cancelled_error = nullptr;
PyObject* g_budget_error = nullptr;

py::object Call(PyObject* type, const py::tuple& args) {
  return py::reinterpret_borrow<py::object>(type)(*args);
}

}  // namespace

py::object MakeException(const Status& status) {
  const std::string& msg = status.message();
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
      return Call(PyExc_ValueError, py::make_tuple(msg));
    case StatusCode::kNotFound:
      // OSError(errno, text) sets .errno and picks the subclass itself.
      return Call(PyExc_FileNotFoundError, py::make_tuple(ENOENT, msg));
    case StatusCode::kPermissionDenied:
      return Call(PyExc_PermissionError, py::make_tuple(EACCES, msg));
    case StatusCode::kIoError:
      return Call(g_read_error, py::make_tuple(EIO, msg));
    case StatusCode::kCancelled:
      return Call(g_cancelled_error, py::make_tuple(ECANCELED, msg));
    case StatusCode::kResourceExhausted:
      return Call(g_budget_error, py::make_tuple(ENOBUFS, msg));
    case StatusCode::kOk:
    case StatusCode::kInternal:
      break;
  }
  return Call(PyExc_RuntimeError, py::make_tuple(status.ToString()));
}

void BindErrors(py::module_& m) {
  g_read_error = PyErr_NewExceptionWithDoc(
      "rangeio.ReadError",
      "A backend read failed (errno text, HTTP status, short read); the "
      "message names the source and the range.",
      PyExc_OSError, nullptr);
  g_cancelled_error = PyErr_NewExceptionWithDoc(
      "rangeio.CancelledError",
      "The read was dropped before it finished (its stream was cancelled).",
      PyExc_OSError, nullptr);
  g_budget_error = PyErr_NewExceptionWithDoc(
      "rangeio.BudgetError",
      "The response budget stayed full with nothing in flight for "
      "response_stall_timeout_ms: the caller holds too many results.",
      PyExc_OSError, nullptr);
  m.add_object("ReadError", py::handle(g_read_error));
  m.add_object("CancelledError", py::handle(g_cancelled_error));
  m.add_object("BudgetError", py::handle(g_budget_error));
  // pybind11 takes a translator of exactly void(std::exception_ptr).
  // NOLINTNEXTLINE(performance-unnecessary-value-param)
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      py::object exc = MakeException(e.status());
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())),
                      exc.ptr());
    }
  });
}

}  // namespace rangeio::python
