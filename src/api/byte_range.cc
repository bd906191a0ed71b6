#include "rangeio/byte_range.h"

#include <optional>
#include <string>

#include "util/buffer_pool.h"
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

namespace {

// "range I [a, b) of 'x': " for a range that failed its check; only then
// built (the check runs for every range of every request).
std::string Context(const ByteRange& r, std::optional<size_t> index,
                    std::string_view source, bool with_bounds) {
  std::string s = "range ";
  if (index) s += std::to_string(*index) + " ";
  s += with_bounds ? r.ToString()
                   : "(offset " + std::to_string(r.offset) + ", length " +
                         std::to_string(r.length) + ")";
  return s + " of '" + std::string(source) + "': ";
}

// One range's check; `index` (when set) names it within its request.
Status CheckOne(const ByteRange& r, std::optional<size_t> index, uint64_t size,
                std::string_view source) {
  if (r.length > UINT64_MAX - r.offset) {
    return Status::InvalidArgument(Context(r, index, source, false) +
                                   "offset + length overflows 64 bits");
  }
  if (r.end() > size) {
    return Status::OutOfRange(Context(r, index, source, true) +
                              "ends past its size " + std::to_string(size));
  }
  const uint64_t max_bytes = detail::MaxBufferBytes();
  if (r.length > max_bytes) {
    return Status::ResourceExhausted(
        Context(r, index, source, true) + "is " + std::to_string(r.length) +
        " bytes, more than one buffer can hold on this machine (" +
        std::to_string(max_bytes) +
        " bytes, its physical memory): split it into smaller ranges");
  }
  return Status::OK();
}

}  // namespace

Status CheckRanges(std::span<const ByteRange> ranges, uint64_t size,
                   std::string_view source) {
  for (size_t i = 0; i < ranges.size(); ++i) {
    RANGEIO_RETURN_NOT_OK(CheckOne(ranges[i], i, size, source));
  }
  return Status::OK();
}

Status CheckRange(const ByteRange& range, uint64_t size,
                  std::string_view source) {
  return CheckOne(range, std::nullopt, size, source);
}

std::string ByteRange::ToString() const {
  return "[" + std::to_string(offset) + ", " + std::to_string(end()) + ")";
}

}  // namespace rangeio
