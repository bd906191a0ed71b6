#include "rangeio/slice.h"

#include <cstring>
#include <memory>

#include "util/buffer_pool.h"

namespace rangeio {

Slice Slice::Allocate(size_t size, std::byte** writable) {
  // A recycled, cache-warm buffer (buffer_pool.h); no zero-fill.
  std::shared_ptr<std::byte> buf = detail::AllocatePooledBuffer(size);
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
