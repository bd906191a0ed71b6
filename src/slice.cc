#include "rangeio/slice.h"

#include <cstring>
#include <memory>

namespace rangeio {

Slice Slice::Allocate(size_t size, std::byte** writable) {
  // One allocation for control block and bytes; no zero-fill.
  std::shared_ptr<std::byte[]> buf =
      std::make_shared_for_overwrite<std::byte[]>(size);
  *writable = buf.get();
  const std::byte* data = buf.get();
  return Slice(std::move(buf), data, size);
}

Slice Slice::CopyOf(std::span<const std::byte> bytes) {
  std::byte* dst = nullptr;
  Slice s = Allocate(bytes.size(), &dst);
  if (!bytes.empty()) std::memcpy(dst, bytes.data(), bytes.size());
  return s;
}

}  // namespace rangeio
