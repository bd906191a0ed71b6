// cat.cc — the ranges of many objects in one call (fsspec's cat_ranges):
// one push stream per object into one CompletionQueue, taken as they
// complete, so no object's results wait behind another's.
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <vector>

#include "binding.h"

namespace rangeio::python {
namespace {

// How long one wait lasts before Python's signal handlers get a turn.
constexpr std::chrono::milliseconds kWaitSlice{100};

// Streams are cancelled without the GIL (Cancel takes the limiter's lock),
// also when a KeyboardInterrupt unwinds through CatRanges.
struct Streams {
  Streams() = default;
  Streams(const Streams&) = delete;
  Streams& operator=(const Streams&) = delete;
  ~Streams() noexcept(false) {
    if (v.empty() && !queue) return;
    GilRelease release;
    v.clear();
    if (queue) queue->Close();
  }
  std::vector<RangeStream> v;
  std::shared_ptr<CompletionQueue> queue;
};

// What one object asked for: its reader, its ranges, and where its results
// start in the flat output.
struct Object {
  const Reader* reader = nullptr;
  std::vector<ByteRange> ranges;
  size_t base = 0;
};

py::object BytesOf(const Slice& s) {
  PyObject* bytes =
      PyBytes_FromStringAndSize(reinterpret_cast<const char*>(s.data()),
                                static_cast<py::ssize_t>(s.size()));
  if (bytes == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(bytes);
}

// Every range of `o` without a result yet gets `error`; returns how many.
size_t FailRest(const Object& o, const Status& error, py::list& out) {
  size_t n = 0;
  for (size_t i = 0; i < o.ranges.size(); ++i) {
    if (!out[o.base + i].is_none()) continue;
    out[o.base + i] = MakeException(error);
    ++n;
  }
  return n;
}

// Sets the results of `done`; returns how many ranges they completed.
size_t Take(std::vector<CompletionQueue::Completion>& done,
            const std::vector<Object>& objects, size_t total, py::list& out) {
  size_t n = 0;
  for (CompletionQueue::Completion& c : done) {
    if (c.tag >= total) {  // a stream ended with an error
      const Object& o = objects[c.tag - total];
      n += FailRest(o, c.result.status(), out);
      continue;
    }
    if (!out[c.tag].is_none()) continue;
    out[c.tag] =
        c.result.ok() ? BytesOf(*c.result) : MakeException(c.result.status());
    c.result = Slice();  // its budget goes back now, not after the batch
    ++n;
  }
  return n;
}

// [(reader, [(offset, length), ...]), ...] -> a flat list, object by
// object: each range's bytes, or the exception of its own failure.
py::list CatRanges(const py::list& requests) {
  std::vector<Object> objects;
  size_t total = 0;
  for (py::handle item : requests) {
    auto pair = item.cast<py::tuple>();
    Object o;
    o.reader = &pair[0].cast<const Reader&>();
    o.ranges = RangesFromPython(pair[1].cast<py::iterable>());
    o.base = total;
    total += o.ranges.size();
    objects.push_back(std::move(o));
  }
  py::list out;  // None until a range's result is in
  for (size_t i = 0; i < total; ++i) out.append(py::none());
  Streams streams;
  streams.queue = CompletionQueue::Make();
  size_t left = total;
  for (size_t k = 0; k < objects.size(); ++k) {
    ReadOptions options;
    options.delivery = Delivery::kAsCompleted;
    options.per_range_errors = true;  // an error reaches its range alone
    std::optional<Result<RangeStream>> stream;
    {
      GilRelease release;
      stream.emplace(objects[k].reader->ReadRanges(
          objects[k].ranges,
          streams.queue->Options(objects[k].base, total + k, options)));
    }
    if (stream->ok()) {
      streams.v.push_back(std::move(**stream));
    } else {
      left -= FailRest(objects[k], stream->status(), out);
    }
  }
  while (left != 0) {
    std::vector<CompletionQueue::Completion> done;
    {
      GilRelease release;
      done = streams.queue->Wait(kWaitSlice);
    }
    left -= Take(done, objects, total, out);
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  }
  return out;
}

}  // namespace

void BindCat(py::module_& m) {
  m.def("_cat_ranges", &CatRanges, py::arg("requests"),
        "[(reader, [(offset, length), ...]), ...] -> every range's bytes (or "
        "its exception), object by object, read all at once on the readers' "
        "limiters and taken as they complete.");
}

}  // namespace rangeio::python
