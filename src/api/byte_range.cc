#include "rangeio/byte_range.h"

#include <string>

#include "util/parse_text.h"

namespace rangeio {

Result<ByteRange> ByteRange::Make(uint64_t offset, uint64_t length) {
  if (length > UINT64_MAX - offset) {
    return Status::InvalidArgument(
        "byte range offset " + std::to_string(offset) + " + length " +
        std::to_string(length) + " overflows 64 bits");
  }
  return ByteRange{offset, length};
}

Result<ByteRange> ByteRange::Parse(std::string_view text) {
  using detail::ParseU64;
  const size_t colon = text.find(':');
  uint64_t offset = 0;
  uint64_t length = 0;
  if (colon == std::string_view::npos ||
      !ParseU64(text.substr(0, colon), &offset) ||
      !ParseU64(text.substr(colon + 1), &length)) {
    return Status::InvalidArgument(
        "range '" + std::string(text) +
        "' is not OFFSET:LENGTH with two non-negative decimal integers");
  }
  return Make(offset, length);
}

Status ByteRange::CheckWithin(uint64_t size, std::string_view source) const {
  if (end() <= size) return Status::OK();
  return Status::OutOfRange("range " + ToString() + " of '" +
                            std::string(source) + "' ends past its size " +
                            std::to_string(size));
}

std::string ByteRange::ToString() const {
  return "[" + std::to_string(offset) + ", " + std::to_string(end()) + ")";
}

}  // namespace rangeio
