// batch.cc — BatchedReader for many Python threads, and the completion
// queue that carries read_async results to Python.
//
// read_async's callback runs on a library dispatcher thread, which must not
// take the GIL: it only pushes (id, result) into a Completions queue. A
// Python thread (rangeio/__init__.py) pops them with the GIL released while
// it waits and resolves the concurrent.futures.Future of each id.
#include <pybind11/stl.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "binding.h"

namespace rangeio::python {
namespace {

class Completions {
 public:
  void Push(uint64_t id, Result<Slice> result) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_.emplace_back(id, std::move(result));
    }
    cv_.notify_one();
  }

  // Blocks (GIL released) until something completed or Close(); returns
  // [(id, memoryview or exception instance)], or None once closed and empty.
  py::object Pop() {
    std::deque<std::pair<uint64_t, Result<Slice>>> batch;
    {
      GilRelease release;
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return closed_ || !done_.empty(); });
      batch.swap(done_);
    }
    if (batch.empty()) return py::none();
    py::list out;
    for (auto& [id, result] : batch) {
      py::object value = result.ok() ? MemoryViewOf(std::move(result).value())
                                     : MakeException(result.status());
      out.append(py::make_tuple(id, std::move(value)));
    }
    return out;
  }

  void Close() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<uint64_t, Result<Slice>>> done_;
  bool closed_ = false;
};

// Releasing the last reference waits for the batches in progress: do that
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
                                uint32_t max_dispatchers,
                                uint32_t max_batch_requests) {
  BatchOptions o;
  o.max_dispatchers = max_dispatchers;
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
               const std::shared_ptr<Completions>& queue) {
  const ByteRange range = RangeFromPython(offset, length, 0);
  GilRelease release;
  h.batched->ReadAsync(source, range, [queue, id](Result<Slice> result) {
    queue->Push(id, std::move(result));
  });
}

py::dict BatchStatsDict(const BatchStats& s) {
  py::dict d;
  d["requests"] = s.requests;
  d["batches"] = s.batches;
  d["largest_batch"] = s.largest_batch;
  d["most_sources"] = s.most_sources;
  d["retried_singly"] = s.retried_singly;
  d["rejected"] = s.rejected;
  return d;
}

}  // namespace

void BindBatch(py::module_& m) {
  py::class_<Completions, std::shared_ptr<Completions>>(m, "_Completions")
      .def(py::init<>())
      .def("pop", &Completions::Pop)
      .def("close", &Completions::Close);

  py::class_<BatchedReaderHolder>(m, "_BatchedReader")
      .def(py::init(&OpenBatched), py::arg("readers"),
           py::arg("max_dispatchers"), py::arg("max_batch_requests"))
      .def("read", &Read, py::arg("offset"), py::arg("length"),
           py::arg("source"))
      .def("read_async", &ReadAsync, py::arg("id"), py::arg("offset"),
           py::arg("length"), py::arg("source"), py::arg("queue"))
      .def("stats",
           [](const BatchedReaderHolder& h) {
             return BatchStatsDict(h.batched->GetStats());
           })
      .def("source_count",
           [](const BatchedReaderHolder& h) {
             return h.batched->source_count();
           })
      .def("size", [](const BatchedReaderHolder& h, size_t source) {
        if (source >= h.batched->source_count()) {
          throw StatusError(Status::InvalidArgument(
              "source " + std::to_string(source) + " is out of range"));
        }
        return h.batched->size(source);
      });
}

}  // namespace rangeio::python
