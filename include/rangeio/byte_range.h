// rangeio/byte_range.h — a half-open range [offset, offset + length) of bytes.
//
// The only way to get a ByteRange from untrusted numbers is ByteRange::Make,
// which rejects an end past 2^64 - 1. Validate it against a source's size with
// CheckWithin before any I/O.
//
// Thread-safety: a value type.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "rangeio/export.h"
#include "rangeio/status.h"

namespace rangeio {

struct RANGEIO_EXPORT ByteRange {
  uint64_t offset = 0;
  uint64_t length = 0;

  // Fails with InvalidArgument when offset + length overflows uint64_t.
  static Result<ByteRange> Make(uint64_t offset, uint64_t length);
  // Parses "OFFSET:LENGTH" (decimal, as the CLI takes it).
  static Result<ByteRange> Parse(std::string_view text);

  // Precondition: made by Make (end does not overflow).
  uint64_t end() const { return offset + length; }
  bool empty() const { return length == 0; }

  // OutOfRange naming `source` when the range ends past `size`.
  Status CheckWithin(uint64_t size, std::string_view source) const;

  // "[offset, end)" — used in every error message about a range.
  std::string ToString() const;

  friend bool operator==(const ByteRange&, const ByteRange&) = default;
};

// Checks a request against a source of `size` bytes named `source`, before
// any I/O: the first bad range fails, in one message format,
//   "range 3 [4096, 8192) of 'name': ends past its size 5000",
// InvalidArgument when offset + length overflows 64 bits, OutOfRange when
// the range ends past `size`, ResourceExhausted when it is longer than one
// buffer can hold on this machine. Every reader, batch and binding checks
// its ranges with it.
RANGEIO_EXPORT Status CheckRanges(std::span<const ByteRange> ranges,
                                  uint64_t size, std::string_view source);
// The same for one range, named without an index ("range [4096, 8192) of
// ...").
RANGEIO_EXPORT Status CheckRange(const ByteRange& range, uint64_t size,
                                 std::string_view source);

}  // namespace rangeio
