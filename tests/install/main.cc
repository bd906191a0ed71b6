// tests/install/main.cc — a program outside the tree, built against the
// installed package (find_package and pkg-config; .ci/run's install stage):
// reads ranges of a memory source in request order, checks every byte, and
// checks that a range past the end fails. Exits non-zero on any mismatch.
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

}  // namespace

int main() {
  std::vector<std::byte> data(256 * 1024);
  for (size_t i = 0; i < data.size(); ++i) data[i] = ByteAt(i);
  auto source =
      rangeio::MakeMemorySource("consumer", rangeio::Slice::CopyOf(data));
  auto reader = rangeio::Reader::Open(source, rangeio::Options());
  if (!reader.ok()) return Fail(reader.status().ToString());

  const std::vector<rangeio::ByteRange> ranges = {
      {100'000, 5000}, {0, 1}, {data.size() - 10, 10}, {4096, 4096}};
  auto stream = reader->ReadRanges(ranges, rangeio::Delivery::kOrdered);
  if (!stream.ok()) return Fail(stream.status().ToString());
  size_t want_index = 0;
  for (;;) {
    auto next = stream->Next();
    if (!next.ok()) return Fail(next.status().ToString());
    if (!*next) break;
    const rangeio::RangeResult& r = **next;
    if (r.index != want_index++) return Fail("ranges out of order");
    const rangeio::ByteRange& range = ranges[r.index];
    const auto bytes = r.bytes.span();
    if (bytes.size() != range.length) return Fail("wrong length");
    for (size_t i = 0; i < bytes.size(); ++i) {
      if (bytes[i] != ByteAt(range.offset + i)) {
        return Fail("wrong byte at " + std::to_string(range.offset + i));
      }
    }
  }
  if (want_index != ranges.size()) return Fail("ranges missing");

  const std::vector<rangeio::ByteRange> past_end = {{data.size() - 1, 2}};
  auto bad = reader->ReadRanges(past_end, rangeio::Delivery::kOrdered);
  if (bad.ok()) {
    auto next = bad->Next();
    if (next.ok() && *next) return Fail("a range past the end was read");
  }
  std::printf("consumer: %zu ranges read, every byte checked\n", ranges.size());
  return 0;
}
