// tests/install/main.cc — a program outside the tree, built against the
// installed package (find_package and pkg-config, static and shared
// library; .ci/run's install stage). Reads ranges of a memory source through
// a decorator of its own on rangeio::SourceWrapper (so a shared library must
// export the base classes' vtables and type information), checks every
// byte, and checks that a range past the end fails before any I/O. Exits
// non-zero on any mismatch.
#include <atomic>
#include <cstdio>
#include <string>
#include <vector>

#include "rangeio/rangeio.h"

namespace {

int Fail(const std::string& what) {
  std::fprintf(stderr, "consumer: %s\n", what.c_str());
  return 1;
}

std::byte ByteAt(uint64_t offset) { return std::byte(offset * 7 % 256); }

// Counts the reads that reach the source below.
class CountingSource final : public rangeio::SourceWrapper {
 public:
  using SourceWrapper::SourceWrapper;
  void Read(rangeio::ByteRange range, rangeio::ReadSink* sink,
            uint64_t tag) override {
    ++reads;
    SourceWrapper::Read(range, sink, tag);
  }
  std::atomic<int> reads{0};
};

}  // namespace

int main() {
  std::vector<std::byte> data(256 * 1024);
  for (size_t i = 0; i < data.size(); ++i) data[i] = ByteAt(i);
  auto counting = std::make_shared<CountingSource>(
      rangeio::MakeMemorySource("consumer", rangeio::Slice::CopyOf(data)));
  auto reader = rangeio::Reader::Open(counting, rangeio::Options());
  if (!reader.ok()) return Fail(reader.status().ToString());

  const std::vector<rangeio::ByteRange> ranges = {
      {100'000, 5000}, {0, 1}, {data.size() - 10, 10}, {4096, 4096}};
  auto all = reader->ReadAll(ranges);
  if (!all.ok()) return Fail(all.status().ToString());
  for (size_t r = 0; r < ranges.size(); ++r) {
    const auto bytes = (*all)[r].span();
    if (bytes.size() != ranges[r].length) return Fail("wrong length");
    for (size_t i = 0; i < bytes.size(); ++i) {
      if (bytes[i] != ByteAt(ranges[r].offset + i)) {
        return Fail("wrong byte at " + std::to_string(ranges[r].offset + i));
      }
    }
  }
  if (counting->reads.load() != static_cast<int>(ranges.size())) {
    return Fail("the decorator saw " + std::to_string(counting->reads.load()) +
                " reads");
  }

  const rangeio::ByteRange past_end{data.size() - 1, 2};
  if (reader->Read(past_end).status().code() !=
      rangeio::StatusCode::kOutOfRange) {
    return Fail("a range past the end was not refused");
  }
  if (counting->reads.load() != static_cast<int>(ranges.size())) {
    return Fail("a range past the end reached the source");
  }
  std::printf(
      "consumer: %zu ranges read through a decorator, every byte "
      "checked\n",
      ranges.size());
  return 0;
}
