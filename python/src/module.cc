// module.cc — the rangeio._rangeio extension module (pybind11). The Python
// API around it is python/rangeio/__init__.py; docs/python.md describes it.
#include "binding.h"

PYBIND11_MODULE(_rangeio, m) {
  m.doc() = "rangeio: many byte-range reads with bounded memory (native part)";
  rangeio::python::BindErrors(m);
  rangeio::python::BindReader(m);
  rangeio::python::BindBatch(m);
  rangeio::python::BindCat(m);
}
