// rangeio_testing.cc — the rangeio_testing module: sources for the Python
// tests, built beside the package and never installed with it.
//
// BarrierSource proves that Python threads overlap their reads: it holds
// every read until `width` reads are outstanding together, then completes
// them all and lets later reads through. If the binding held the GIL while
// a read waits, the second thread could never submit its read: the barrier
// would time out and fail the held reads with an IoError naming how many
// arrived, so a serialising binding fails the test instead of hanging it.
#include <pybind11/pybind11.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "rangeio/rangeio.h"

namespace rangeio::python {
namespace {

namespace py = pybind11;

class BarrierSource final : public Source {
 public:
  BarrierSource(uint64_t size, size_t width, std::chrono::milliseconds timeout)
      : name_("barrier(" + std::to_string(width) + ")"),
        size_(size),
        width_(width),
        watchdog_([this, timeout] { Watch(timeout); }) {}
  ~BarrierSource() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    watchdog_.join();
  }

  const std::string& name() const override { return name_; }
  Result<uint64_t> Size() override { return size_; }

  void Read(ByteRange range, ReadSink* sink, uint64_t tag) override {
    std::vector<Held> release;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!open_) {
        held_.push_back({range, sink, tag});
        peak_ = std::max(peak_, held_.size());
        if (held_.size() < width_) return;
        open_ = true;
        release.swap(held_);
      } else {
        release.push_back({range, sink, tag});
      }
    }
    cv_.notify_all();
    for (const Held& h : release) Complete(h, Status::OK());
  }

  size_t peak_held() const {
    std::lock_guard<std::mutex> lock(mu_);
    return peak_;
  }

 private:
  struct Held {
    ByteRange range;
    ReadSink* sink;
    uint64_t tag;
  };

  static void Complete(const Held& h, const Status& status) {
    if (!status.ok()) {
      h.sink->OnReadDone(h.tag, status);
      return;
    }
    std::byte* out = nullptr;
    Slice bytes = Slice::Allocate(h.range.length, &out);
    FillSimulatedBytes(h.range.offset, {out, h.range.length});
    h.sink->OnReadDone(h.tag, std::move(bytes));
  }

  void Watch(std::chrono::milliseconds timeout) {
    std::vector<Held> fail;
    size_t arrived = 0;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (cv_.wait_for(lock, timeout, [&] { return open_ || stopping_; })) {
        return;
      }
      open_ = true;
      arrived = held_.size();
      fail.swap(held_);
    }
    const Status status = Status::IoError(
        "barrier: only " + std::to_string(arrived) + " of " +
        std::to_string(width_) + " reads were outstanding together");
    for (const Held& h : fail) Complete(h, status);
  }

  const std::string name_;
  const uint64_t size_;
  const size_t width_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Held> held_;
  size_t peak_ = 0;
  bool open_ = false;
  bool stopping_ = false;
  std::thread watchdog_;  // last: starts after the fields it reads
};

}  // namespace

void BindTesting(py::module_& t) {
  // The Source type these derive from is registered by rangeio's module.
  py::module_::import("rangeio._rangeio");
  py::class_<BarrierSource, Source, std::shared_ptr<BarrierSource>>(
      t, "BarrierSource")
      .def(py::init([](uint64_t size, size_t width, double timeout_s) {
             return std::make_shared<BarrierSource>(
                 size, width,
                 std::chrono::milliseconds(
                     static_cast<int64_t>(timeout_s * 1000)));
           }),
           py::arg("size"), py::arg("width"), py::arg("timeout_s") = 30.0)
      .def_property_readonly("peak_held", &BarrierSource::peak_held);
  t.def(
      "simulated_source",
      [](uint64_t size, double latency_ms) {
        auto source =
            MakeSimulatedSource("sim", size,
                                LatencyModel::Fixed(std::chrono::microseconds(
                                    static_cast<int64_t>(latency_ms * 1000))));
        if (!source.ok()) throw py::value_error(source.status().ToString());
        return *source;
      },
      py::arg("size"), py::arg("latency_ms") = 1.0,
      "The simulated object store of rangeio/sim.h: bytes "
      "rangeio_testing.expected(offset, length), fixed latency.");
  t.def("expected", [](uint64_t offset, uint64_t length) {
    std::string out(length, '\0');
    FillSimulatedBytes(offset, {reinterpret_cast<std::byte*>(out.data()),
                                static_cast<size_t>(length)});
    return py::bytes(out);
  });
}

}  // namespace rangeio::python

PYBIND11_MODULE(rangeio_testing, m) {
  m.doc() = "Sources for rangeio's Python tests (not installed).";
  rangeio::python::BindTesting(m);
}
