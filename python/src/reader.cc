// reader.cc — Limiter, Reader, the read_ranges iterator and zero-copy
// buffers.
#include <pybind11/stl.h>

#include <optional>
#include <vector>

#include "binding.h"

namespace rangeio::python {
namespace {

// Holds one Slice and exposes its bytes through the buffer protocol
// (read-only). A memoryview of it keeps it alive, and it keeps the Slice's
// response budget charged, until Python drops the last view.
struct SliceBuffer {
  Slice slice;
};

// An empty Slice may have no data pointer; the buffer protocol wants one.
const std::byte kEmpty{};

// The iterator read_ranges returns: one RangeStream, consumed with the GIL
// released. Dropping it (or close()) cancels what is undelivered and
// returns every permit and byte of budget.
class RangeIterator {
 public:
  explicit RangeIterator(RangeStream stream) : stream_(std::move(stream)) {}
  RangeIterator(const RangeIterator&) = delete;
  RangeIterator& operator=(const RangeIterator&) = delete;
  // Python frees it only once no thread is inside Next(): no BusyGuard.
  ~RangeIterator() {
    if (!stream_) return;
    GilRelease release;  // Cancel takes the limiter's lock
    stream_.reset();
  }

  py::tuple Next() {
    if (!stream_) throw py::stop_iteration();
    std::optional<Result<std::optional<RangeResult>>> next;
    {
      BusyGuard guard(&busy_);
      GilRelease release;
      next.emplace(stream_->Next());
    }
    if (!next->ok()) {
      const Status status = next->status();
      Close();
      throw StatusError(status);
    }
    if (!**next) {
      Close();
      throw py::stop_iteration();
    }
    RangeResult& r = ***next;
    return py::make_tuple(r.index, MemoryViewOf(std::move(r.bytes)));
  }

  void Close() {
    if (!stream_) return;
    BusyGuard guard(&busy_);  // not while another thread is in Next()
    // Cancel takes the limiter's lock, which library threads hold briefly;
    // never wait for it while holding the GIL.
    GilRelease release;
    stream_.reset();
  }

  size_t size() const { return size_; }
  bool running() const { return busy_; }

 private:
  std::optional<RangeStream> stream_;
  size_t size_ = stream_ ? stream_->size() : 0;
  bool busy_ = false;  // a thread is in Next() or Close(); GIL held to touch
};

// Any integer (int, bool, numpy.int64: whatever has __index__), so that
// rows of a numpy (n, 2) array are ranges too.
uint64_t ToU64(py::handle h, const char* what, size_t index) {
  const std::string where =
      "range " + std::to_string(index) + ": " + std::string(what) + " ";
  if (!PyIndex_Check(h.ptr())) {
    throw StatusError(Status::InvalidArgument(
        where + "must be an int, not " +
        std::string(py::str(h.get_type().attr("__name__")))));
  }
  const auto v = py::reinterpret_steal<py::object>(PyNumber_Index(h.ptr()));
  if (!v) throw py::error_already_set();
  if (v < py::int_(0)) {
    throw StatusError(Status::InvalidArgument(
        where + py::str(v).cast<std::string>() + " is negative"));
  }
  const unsigned long long u = PyLong_AsUnsignedLongLong(v.ptr());
  if (PyErr_Occurred()) {
    PyErr_Clear();
    throw StatusError(Status::InvalidArgument(
        where + py::str(v).cast<std::string>() + " exceeds 2^64 - 1"));
  }
  return u;
}

}  // namespace

ByteRange RangeFromPython(py::handle offset, py::handle length, size_t index) {
  auto r = ByteRange::Make(ToU64(offset, "offset", index),
                           ToU64(length, "length", index));
  if (!r.ok()) {
    throw StatusError(r.status().WithContext("range " + std::to_string(index)));
  }
  return *r;
}

std::vector<ByteRange> RangesFromPython(const py::iterable& ranges) {
  std::vector<ByteRange> out;
  if (py::hasattr(ranges, "__len__")) out.reserve(py::len(ranges));
  for (py::handle item : ranges) {
    const size_t i = out.size();
    py::sequence pair;
    if (!PySequence_Check(item.ptr()) || PySequence_Size(item.ptr()) != 2) {
      throw StatusError(Status::InvalidArgument(
          "range " + std::to_string(i) + " is not an (offset, length) pair"));
    }
    pair = py::reinterpret_borrow<py::sequence>(item);
    out.push_back(RangeFromPython(pair[0], pair[1], i));
  }
  return out;
}

namespace {

Delivery ToDelivery(const std::string& order) {
  if (order == "as-completed") return Delivery::kAsCompleted;
  if (order == "ordered") return Delivery::kOrdered;
  throw StatusError(Status::InvalidArgument(
      "order '" + order + "' is invalid: want 'as-completed' or 'ordered'"));
}

std::unique_ptr<RangeIterator> ReadRanges(const Reader& reader,
                                          const py::iterable& ranges,
                                          const std::string& order) {
  const Delivery delivery = ToDelivery(order);
  std::vector<ByteRange> list = RangesFromPython(ranges);
  std::optional<Result<RangeStream>> stream;
  {
    GilRelease release;
    stream.emplace(reader.ReadRanges(list, delivery));
  }
  return std::make_unique<RangeIterator>(ValueOrThrow(std::move(*stream)));
}

py::object ReadOne(const Reader& reader, py::handle offset, py::handle length) {
  const ByteRange range = RangeFromPython(offset, length, 0);
  std::optional<Result<Slice>> bytes;
  {
    GilRelease release;
    bytes.emplace(reader.Read(range));
  }
  return MemoryViewOf(ValueOrThrow(std::move(*bytes)));
}

Reader OpenReader(std::shared_ptr<Source> source, const Options& options,
                  std::shared_ptr<Limiter> limiter) {
  std::optional<Result<Reader>> reader;
  {
    // Reader::Open asks the source for its size: a stat or a first GET.
    GilRelease release;
    reader.emplace(
        Reader::Open(std::move(source), options, std::move(limiter)));
  }
  return ValueOrThrow(std::move(*reader));
}

Reader OpenUrl(const std::string& url,
               const std::map<std::string, std::string>& kv,
               std::shared_ptr<Limiter> limiter) {
  OpenOptions o = ParseOpenOptions(kv);
  std::optional<Result<Reader>> reader;
  {
    // Opening asks the source for its size: a stat or a first GET.
    GilRelease release;
    reader.emplace(Reader::OpenUrl(url, o.reader, std::move(o.source),
                                   std::move(limiter)));
  }
  return ValueOrThrow(std::move(*reader));
}

// Options for what is already a Source: a source key would do nothing.
Reader OpenOnSource(std::shared_ptr<Source> source,
                    const std::map<std::string, std::string>& kv,
                    std::shared_ptr<Limiter> limiter) {
  for (const auto& [key, value] : kv) {
    if (SourceOptions::IsKey(key)) {
      throw StatusError(
          Status::InvalidArgument("option " + key + " opens a source; '" +
                                  source->name() + "' is open already"));
    }
  }
  return OpenReader(std::move(source), ParseOpenOptions(kv).reader,
                    std::move(limiter));
}

// A Limiter takes its own keys only: any other would do nothing.
std::shared_ptr<Limiter> MakeLimiter(
    const std::map<std::string, std::string>& kv) {
  for (const auto& [key, value] : kv) {
    if (!Options::IsLimiterKey(key)) {
      throw StatusError(Status::InvalidArgument(
          "option " + key +
          " is not a limiter option (io-concurrency or read-thread-num, "
          "response-budget-count, response-budget-bytes, hedge-reserve): "
          "give it to rangeio.open"));
    }
  }
  return ValueOrThrow(Limiter::Make(ParseOpenOptions(kv).reader));
}

uint64_t SizeOf(const Reader& reader) {
  std::optional<Result<uint64_t>> size;
  {
    GilRelease release;
    size.emplace(reader.source()->Size());
  }
  return ValueOrThrow(std::move(*size));
}

}  // namespace

py::object MemoryViewOf(Slice slice) {
  py::object holder = py::cast(SliceBuffer{std::move(slice)});
  PyObject* view = PyMemoryView_FromObject(holder.ptr());
  if (view == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(view);
}

OpenOptions ParseOpenOptions(const std::map<std::string, std::string>& kv) {
  OpenOptions out;
  ThrowIfError(rangeio::ParseOpenOptions(kv, &out.reader, &out.source));
  return out;
}

py::dict StatsDict(const Stats& s) {
  py::dict d;
  d["physical_reads"] = s.physical_reads;
  d["physical_bytes"] = s.physical_bytes;
  d["read_errors"] = s.read_errors;
  d["ranges_delivered"] = s.ranges_delivered;
  d["logical_bytes"] = s.logical_bytes;
  d["reads_cancelled"] = s.reads_cancelled;
  d["in_flight"] = s.in_flight;
  d["peak_in_flight"] = s.peak_in_flight;
  d["retained_count"] = s.retained_count;
  d["peak_retained_count"] = s.peak_retained_count;
  d["retained_bytes"] = s.retained_bytes;
  d["peak_retained_bytes"] = s.peak_retained_bytes;
  d["waiting_streams"] = s.waiting_streams;
  const LatencyHistogram& h = s.read_latency;
  d["read_latency_count"] = h.count();
  d["read_latency_p50_ms"] = static_cast<double>(h.Percentile(0.5)) / 1e6;
  d["read_latency_p99_ms"] = static_cast<double>(h.Percentile(0.99)) / 1e6;
  d["read_latency_max_ms"] = static_cast<double>(h.max_nanos()) / 1e6;
  // [ms, quantile] points for latency CDF plots (python/bench/rangeio_plot.py).
  py::list cdf;
  if (h.count() != 0) {
    for (double q : {0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95,
                     0.99, 0.999, 1.0}) {
      cdf.append(py::make_tuple(static_cast<double>(h.Percentile(q)) / 1e6, q));
    }
  }
  d["read_latency_cdf"] = cdf;
  return d;
}

// HttpStats as a dict (names as in include/rangeio/http.h); None for a
// source that is not HTTP or S3.
py::object HttpStatsDict(const Reader& r) {
  Result<HttpStats> got = GetHttpStats(*r.source());
  if (!got.ok()) return py::none();
  const HttpStats& s = *got;
  py::dict d;
  d["gets"] = s.gets;
  d["heads"] = s.heads;
  d["size_probes"] = s.size_probes;
  d["reads_ok"] = s.reads_ok;
  d["reads_failed"] = s.reads_failed;
  d["bytes"] = s.bytes;
  d["http2_responses"] = s.http2_responses;
  d["retries"] = s.retries();
  d["retries_5xx"] = s.retries_5xx;
  d["retries_throttled"] = s.retries_throttled;
  d["retries_connection"] = s.retries_connection;
  d["retries_timeout"] = s.retries_timeout;
  d["throttled"] = s.throttled;
  d["endpoint_limit"] = s.endpoint_limit;
  d["endpoint_min_limit"] = s.endpoint_min_limit;
  d["endpoint_throttles"] = s.endpoint_throttles;
  d["endpoint_throttled_ms"] =
      static_cast<double>(s.endpoint_throttled_ns) / 1e6;
  d["time_to_first_byte_p50_ms"] =
      static_cast<double>(s.time_to_first_byte.Percentile(0.5)) / 1e6;
  d["time_to_first_byte_p99_ms"] =
      static_cast<double>(s.time_to_first_byte.Percentile(0.99)) / 1e6;
  d["latency_p50_ms"] = static_cast<double>(s.latency.Percentile(0.5)) / 1e6;
  d["latency_p99_ms"] = static_cast<double>(s.latency.Percentile(0.99)) / 1e6;
  return d;
}

void BindReader(py::module_& m) {
  py::class_<SliceBuffer>(m, "Buffer", py::buffer_protocol(),
                          "Bytes of one read result, exposed read-only "
                          "through the buffer protocol (zero-copy).")
      .def_buffer([](SliceBuffer& b) {
        const std::byte* data = b.slice.empty() ? &kEmpty : b.slice.data();
        return py::buffer_info(const_cast<std::byte*>(data), 1, "B", 1,
                               {static_cast<py::ssize_t>(b.slice.size())}, {1},
                               /*readonly=*/true);
      });

  py::class_<Source, std::shared_ptr<Source>>(m, "Source",
                                              "A backend source (opaque).")
      .def_property_readonly("name", &Source::name);

  py::class_<Limiter, std::shared_ptr<Limiter>>(m, "Limiter")
      .def(py::init(&MakeLimiter), py::arg("options"))
      .def_property_readonly("io_concurrency", &Limiter::io_concurrency)
      .def_property_readonly("response_budget_count",
                             &Limiter::response_budget_count)
      .def_property_readonly("response_budget_bytes",
                             &Limiter::response_budget_bytes)
      .def("stats", [](const Limiter& l) { return StatsDict(l.GetStats()); });

  py::class_<RangeIterator>(m, "RangeIterator")
      .def("__iter__", [](py::object self) { return self; })
      .def("__next__", &RangeIterator::Next)
      .def("__len__", &RangeIterator::size)
      .def_property_readonly("running", &RangeIterator::running,
                             "True while a thread is inside next() (as a "
                             "generator's gi_running).")
      .def("close", &RangeIterator::Close,
           "Cancels the undelivered reads and returns their permits.")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](RangeIterator& it, const py::args&) {
        it.Close();
        return false;
      });

  py::class_<Reader>(m, "Reader")
      .def("read_ranges", &ReadRanges, py::arg("ranges"),
           py::arg("order") = "as-completed")
      .def("read", &ReadOne, py::arg("offset"), py::arg("length"))
      .def("stats", [](const Reader& r) { return StatsDict(r.GetStats()); })
      .def("http_stats", &HttpStatsDict,
           "The HTTP/S3 backend's counters (GETs, retries by cause, "
           "throttled answers, the endpoint's adaptive limit), shared by "
           "every reader of the source; None for other sources.")
      .def("clone", &Reader::Clone)
      .def_property_readonly("size", &SizeOf)
      .def_property_readonly("name",
                             [](const Reader& r) { return r.source()->name(); })
      .def_property_readonly("limiter", &Reader::limiter);

  m.def("_open_url", &OpenUrl, py::arg("url"), py::arg("options"),
        py::arg("limiter"));
  m.def("_is_limiter_key",
        [](const std::string& key) { return Options::IsLimiterKey(key); });
  m.def("_open_source", &OpenOnSource, py::arg("source"), py::arg("options"),
        py::arg("limiter"));
}

}  // namespace rangeio::python
