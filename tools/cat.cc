// rangeio cat — writes ranges of an object to stdout in the order given.
#include "cat.h"

#include <cstdio>
#include <vector>

#include "rangeio/rangeio.h"

namespace rangeio::cli {

Status Cat(const std::string& url_or_path,
           const std::vector<std::string>& range_args,
           const CliOptions& options) {
  std::vector<ByteRange> ranges;
  ranges.reserve(range_args.size());
  for (const std::string& a : range_args) {
    RANGEIO_ASSIGN_OR_RETURN(ByteRange r, ByteRange::Parse(a));
    ranges.push_back(r);
  }
  RANGEIO_ASSIGN_OR_RETURN(
      Reader reader,
      Reader::OpenUrl(url_or_path, options.reader, options.source));
  RANGEIO_ASSIGN_OR_RETURN(RangeStream stream,
                           reader.ReadRanges(ranges, Delivery::kOrdered));
  // Each range goes to stdout as it arrives: memory stays within the
  // response budget however many ranges are asked for.
  for (;;) {
    RANGEIO_ASSIGN_OR_RETURN(std::optional<RangeResult> r, stream.Next());
    if (!r) break;
    if (!r->bytes.empty() && std::fwrite(r->bytes.data(), 1, r->bytes.size(),
                                         stdout) != r->bytes.size()) {
      return Status::FromErrno(errno, "writing to stdout");
    }
  }
  if (std::fflush(stdout) != 0)
    return Status::FromErrno(errno, "writing to stdout");
  std::fprintf(stderr, "rangeio cat: read '%s' with %s\n",
               reader.source()->name().c_str(),
               reader.source()->Info().description.c_str());
  return Status::OK();
}

}  // namespace rangeio::cli
