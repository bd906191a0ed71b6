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

using Completion = std::pair<uint64_t, Result<Slice>>;

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

  // Blocks until one result is there; the caller has released the GIL.
  Completion TakeOne() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !done_.empty(); });
    Completion c = std::move(done_.front());
    done_.pop_front();
    return c;
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

// BatchedReader.read_many: one thread's ranges through the shared
// BatchedReader with `window` requests in flight (rolling: taking a result
// submits the next), results as they complete. The consuming thread takes
// each result itself, GIL released while it waits: no completion thread and
// no Future between the read and the caller. Ends at the first error.
class BatchIterator {
 public:
  BatchIterator(std::shared_ptr<BatchedReader> batched, size_t source,
                std::vector<ByteRange> ranges, size_t window)
      : batched_(std::move(batched)),
        source_(source),
        ranges_(std::move(ranges)),
        window_(window) {}
  BatchIterator(const BatchIterator&) = delete;
  BatchIterator& operator=(const BatchIterator&) = delete;
  ~BatchIterator() {
    GilRelease release;  // may drop the last BatchedReader reference
    batched_.reset();
  }

  py::tuple Next() {
    if (failed_ || taken_ == ranges_.size()) throw py::stop_iteration();
    std::optional<Completion> c;
    {
      BusyGuard guard(&busy_);
      GilRelease release;
      Submit();
      c.emplace(queue_->TakeOne());
    }
    ++taken_;
    --in_flight_;
    if (!c->second.ok()) {
      failed_ = true;
      throw StatusError(c->second.status().WithContext(
          "request index " + std::to_string(c->first)));
    }
    return py::make_tuple(c->first, MemoryViewOf(std::move(c->second).value()));
  }

  size_t size() const { return ranges_.size(); }

 private:
  void Submit() {
    for (; in_flight_ < window_ && next_ < ranges_.size(); ++next_) {
      ++in_flight_;
      batched_->ReadAsync(source_, ranges_[next_],
                          [q = queue_, id = next_](Result<Slice> r) {
                            q->Push(id, std::move(r));
                          });
    }
  }

  std::shared_ptr<BatchedReader> batched_;
  const size_t source_;
  const std::vector<ByteRange> ranges_;
  const size_t window_;
  // Shared with the callbacks of reads still in flight when this is dropped.
  std::shared_ptr<Completions> queue_ = std::make_shared<Completions>();
  size_t next_ = 0;
  size_t in_flight_ = 0;
  size_t taken_ = 0;
  bool failed_ = false;
  bool busy_ = false;  // a thread is in Next(); GIL held to touch
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
               const std::shared_ptr<Completions>& queue) {
  const ByteRange range = RangeFromPython(offset, length, 0);
  GilRelease release;
  h.batched->ReadAsync(source, range, [queue, id](Result<Slice> result) {
    queue->Push(id, std::move(result));
  });
}

std::unique_ptr<BatchIterator> ReadMany(BatchedReaderHolder& h,
                                        const py::iterable& ranges,
                                        size_t window, size_t source) {
  BatchedReader& b = *h.batched;
  if (source >= b.source_count()) {
    throw StatusError(Status::InvalidArgument(
        "source " + std::to_string(source) + " is out of range (" +
        std::to_string(b.source_count()) + " sources)"));
  }
  std::vector<ByteRange> list = RangesFromPython(ranges);
  const std::string& name = b.reader(source).source()->name();
  for (size_t i = 0; i < list.size(); ++i) {
    const Status st = list[i].CheckWithin(b.size(source), name);
    if (!st.ok()) {
      throw StatusError(st.WithContext("request index " + std::to_string(i)));
    }
  }
  // 0: as many as the source's limiter lets run.
  if (window == 0) window = b.reader(source).limiter()->io_concurrency();
  return std::make_unique<BatchIterator>(h.batched, source, std::move(list),
                                         window);
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
  py::class_<Completions, std::shared_ptr<Completions>>(m, "_Completions")
      .def(py::init<>())
      .def("pop", &Completions::Pop)
      .def("close", &Completions::Close);

  py::class_<BatchIterator>(m, "BatchIterator")
      .def("__iter__", [](py::object self) { return self; })
      .def("__next__", &BatchIterator::Next)
      .def("__len__", &BatchIterator::size);

  py::class_<BatchedReaderHolder>(m, "_BatchedReader")
      .def("read_many", &ReadMany, py::arg("ranges"), py::arg("window"),
           py::arg("source"))
      .def(py::init(&OpenBatched), py::arg("readers"),
           py::arg("max_batches"), py::arg("max_batch_requests"))
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
