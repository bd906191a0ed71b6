// rangeio/slice.h — a ref-counted, immutable view of bytes.
//
// A Slice points into a buffer that it keeps alive through a shared owner.
// Copying a Slice shares the buffer (no byte is copied); sub-slices share it
// too. The bytes a RangeStream hands out are Slices of the physical read's
// buffer, and the reader's response budget stays charged until the last Slice
// of that buffer is destroyed or Reset(): releasing the Slice is how a caller
// returns budget.
//
// Thread-safety: like std::shared_ptr. Distinct Slice objects sharing one
// buffer may be used and destroyed concurrently from any threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "rangeio/export.h"

namespace rangeio {

class RANGEIO_EXPORT Slice {
 public:
  Slice() = default;
  // A view of [data, data + size) kept alive by `owner`.
  Slice(std::shared_ptr<const void> owner, const std::byte* data, size_t size)
      : owner_(std::move(owner)), data_(data), size_(size) {}

  // A new buffer of `size` bytes, uninitialised, that the caller fills
  // through the returned pointer before sharing the Slice.
  static Slice Allocate(size_t size, std::byte** writable);
  // A copy of `bytes` in a new buffer.
  static Slice CopyOf(std::span<const std::byte> bytes);

  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::span<const std::byte> span() const { return {data_, size_}; }
  std::string_view AsStringView() const {
    return {reinterpret_cast<const char*>(data_), size_};
  }

  // Bytes [offset, offset + length) of this slice, sharing the buffer.
  // Precondition: offset + length <= size().
  Slice Sub(size_t offset, size_t length) const {
    return Slice(owner_, data_ + offset, length);
  }
  // Same view, kept alive by `owner` (which must keep this slice's buffer
  // alive): how the scheduler attaches a budget lease to a backend buffer.
  Slice WithOwner(std::shared_ptr<const void> owner) const {
    return Slice(std::move(owner), data_, size_);
  }

  // Drops this reference now (returns budget if it was the last one).
  void Reset() { *this = Slice(); }

 private:
  std::shared_ptr<const void> owner_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace rangeio
