// batch.cc — BatchedReader for many Python threads, and the core's
// CompletionQueue through which read_async results reach Python.
//
// read_async's callback runs on a library thread, which must not take the
// GIL: rangeio::CompletionQueue holds the result until the resolver thread
// (rangeio/__init__.py) takes it, with the GIL released while it waits,
// and resolves the concurrent.futures.Future of each id.
#include <pybind11/stl.h>

#include <chrono>
#include <optional>
#include <utility>
#include <vector>

#include "binding.h"

namespace rangeio::python {
namespace {

// How long the resolver waits at a time; it loops until the queue closes.
constexpr std::chrono::seconds kWaitSlice{1};

// Takes what completed (GIL released while it waits): [(id, memoryview or
// exception instance)], an empty list after a quiet second, None once closed
// and empty. Nothing is held between calls: a dropped result's budget goes
// back when Python drops it.
py::object Pop(CompletionQueue& queue) {
  std::vector<CompletionQueue::Completion> done;
  {
    GilRelease release;
    done = queue.Wait(kWaitSlice);
  }
  if (done.empty() && queue.closed()) return py::none();
  py::list out;
  for (CompletionQueue::Completion& c : done) {
    py::object value = c.result.ok() ? MemoryViewOf(std::move(c.result).value())
                                     : MakeException(c.result.status());
    out.append(py::make_tuple(c.tag, std::move(value)));
  }
  return out;
}

// Releasing the last reference waits for the requests in progress: do that
// without the GIL, which their callbacks' owners may need.
struct BatchedReaderHolder {
  explicit BatchedReaderHolder(std::shared_ptr<BatchedReader> b)
      : batched(std::move(b)) {}
  BatchedReaderHolder(BatchedReaderHolder&&) = default;
  BatchedReaderHolder& operator=(BatchedReaderHolder&&) = delete;
  ~BatchedReaderHolder() {
    if (!batched) return;
    GilRelease release;
    batched.reset();
  }
  std::shared_ptr<BatchedReader> batched;
};

BatchedReaderHolder OpenBatched(std::vector<Reader> readers,
                                uint32_t max_batches,
                                uint32_t max_batch_requests) {
  BatchOptions o;
  o.max_batches = max_batches;
  o.max_batch_requests = max_batch_requests;
  std::optional<Result<std::shared_ptr<BatchedReader>>> batched;
  {
    GilRelease release;
    batched.emplace(BatchedReader::Open(std::move(readers), o));
  }
  return BatchedReaderHolder{ValueOrThrow(std::move(*batched))};
}

py::object Read(BatchedReaderHolder& h, py::handle offset, py::handle length,
                size_t source) {
  const ByteRange range = RangeFromPython(offset, length, 0);
  std::optional<Result<Slice>> bytes;
  {
    GilRelease release;
    bytes.emplace(h.batched->Read(source, range));
  }
  return MemoryViewOf(ValueOrThrow(std::move(*bytes)));
}

void ReadAsync(BatchedReaderHolder& h, uint64_t id, py::handle offset,
               py::handle length, size_t source,
               const std::shared_ptr<CompletionQueue>& queue) {
  const ByteRange range = RangeFromPython(offset, length, 0);
  GilRelease release;
  h.batched->ReadAsync(source, range, queue->Callback(id));
}

const Reader& ReaderOf(const BatchedReaderHolder& h, size_t source) {
  if (source >= h.batched->source_count()) {
    throw StatusError(Status::InvalidArgument(
        "source " + std::to_string(source) + " is out of range (" +
        std::to_string(h.batched->source_count()) + " sources)"));
  }
  return h.batched->reader(source);
}

py::dict BatchStatsDict(const BatchStats& s) {
  py::dict d;
  d["requests"] = s.requests;
  d["batches"] = s.batches;
  d["largest_batch"] = s.largest_batch;
  d["most_sources"] = s.most_sources;
  d["rejected"] = s.rejected;
  return d;
}

}  // namespace

void BindBatch(py::module_& m) {
  py::class_<CompletionQueue, std::shared_ptr<CompletionQueue>>(
      m, "_CompletionQueue")
      .def(py::init(&CompletionQueue::Make))
      .def("pop", &Pop)
      .def("close", &CompletionQueue::Close);

  py::class_<BatchedReaderHolder>(m, "_BatchedReader")
      .def(py::init(&OpenBatched), py::arg("readers"), py::arg("max_batches"),
           py::arg("max_batch_requests"))
      .def("read", &Read, py::arg("offset"), py::arg("length"),
           py::arg("source"))
      .def("read_async", &ReadAsync, py::arg("id"), py::arg("offset"),
           py::arg("length"), py::arg("source"), py::arg("queue"))
      .def("reader", &ReaderOf, py::arg("source"))
      .def("stats",
           [](const BatchedReaderHolder& h) {
             return BatchStatsDict(h.batched->GetStats());
           })
      .def("source_count",
           [](const BatchedReaderHolder& h) {
             return h.batched->source_count();
           })
      .def("size", [](const BatchedReaderHolder& h, size_t source) {
        ReaderOf(h, source);
        return h.batched->size(source);
      });
}

}  // namespace rangeio::python
