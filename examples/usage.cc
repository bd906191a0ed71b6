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

  auto options = rangeio::Options::Parse("io-concurrency=8");
  if (!options.ok()) return Fail(options.status());
  auto reader = rangeio::Reader::Open(source, *options);
  if (!reader.ok()) return Fail(reader.status());

  const std::vector<rangeio::ByteRange> ranges = {
      {0, 4096}, {65536, 100}, {1'000'000, 48'576}, {7, 0}};
  auto all = reader->ReadAll(ranges);        // every range, in request order
  if (!all.ok()) return Fail(all.status());  // names the failed range
  for (size_t i = 0; i < ranges.size(); ++i) {
    auto bytes = (*all)[i].span();  // zero-copy; budget held until freed
    if (!std::equal(bytes.begin(), bytes.end(), data.begin() + ranges[i].offset,
                    data.begin() + ranges[i].end())) {
      return Fail(
          rangeio::Status::Internal("wrong bytes for " + ranges[i].ToString()));
    }
  }
  std::printf("usage: %zu ranges read, every byte checked\n", ranges.size());
  return 0;
}
