// examples/usage.cc — the README's usage example, built and run by ctest.
// Reads a few ranges of an in-memory source and checks every byte.
#include <algorithm>
#include <cstdio>
#include <vector>

#include "rangeio/rangeio.h"

static int Fail(const rangeio::Status& status) {
  std::fprintf(stderr, "usage: %s\n", status.ToString().c_str());
  return 1;
}

int main() {
  std::vector<std::byte> data(1 << 20);  // 1 MiB, byte i is i % 251
  for (size_t i = 0; i < data.size(); ++i) data[i] = std::byte(i % 251);
  auto source =
      rangeio::MakeMemorySource("example", rangeio::Slice::CopyOf(data));

  auto options = rangeio::Options::Parse("read-thread-num=8");
  if (!options.ok()) return Fail(options.status());
  auto reader = rangeio::Reader::Open(source, *options);
  if (!reader.ok()) return Fail(reader.status());

  const std::vector<rangeio::ByteRange> ranges = {
      {0, 4096}, {65536, 100}, {1'000'000, 48'576}, {7, 0}};
  auto stream = reader->ReadRanges(ranges, rangeio::Delivery::kAsCompleted);
  if (!stream.ok()) return Fail(stream.status());

  size_t delivered = 0;
  while (true) {
    auto next = stream->Next();  // blocks until the next completed range
    if (!next.ok()) return Fail(next.status());  // names the failed range
    if (!*next) break;                           // every range delivered
    const rangeio::ByteRange& range = ranges[(*next)->index];
    auto bytes = (*next)->bytes.span();  // zero-copy; budget held until freed
    if (bytes.size() != range.length ||
        !std::equal(bytes.begin(), bytes.end(), data.begin() + range.offset)) {
      return Fail(
          rangeio::Status::Internal("wrong bytes for " + range.ToString()));
    }
    ++delivered;
  }
  std::printf("usage: %zu of %zu ranges read, every byte checked\n", delivered,
              ranges.size());
  return delivered == ranges.size() ? 0 : 1;
}
