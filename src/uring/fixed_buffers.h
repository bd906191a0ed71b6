// fixed_buffers.h (internal) — the io_uring engine's registered buffers for
// wide direct reads (uring_file.cc).
//
// Thread-safety: Take() on the ring thread only (it registers with the
// ring); slices of the buffers may be released on any thread.
#pragma once

#include <liburing.h>
#include <sys/mman.h>
#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "local/local_read.h"
#include "mutex.h"
#include "rangeio/slice.h"

namespace rangeio::detail {

// Registered buffers (see FixedBuffers): direct reads of this size range.
constexpr uint64_t kFixedMinBytes = uint64_t{64} << 10;
constexpr size_t kFixedSlotBytes = size_t{1} << 20;

// Registered ("fixed") buffers for direct reads of kFixedMinBytes to
// kFixedSlotBytes. A direct read into ordinary memory pins and unpins every
// page of its buffer (get_user_pages) on each call; a registered buffer is
// pinned once. That shows at 1 MiB as more bandwidth for less CPU (fio
// --fixedbufs, bench local 1 MiB O_DIRECT rows); at 4 KiB it is within the
// noise, hence the lower bound.
//
// Slots of kFixedSlotBytes are mapped and registered (into a sparse table
// of one entry per ring slot, kernel 5.19+) the first time they are needed,
// so a file that never does such reads pins nothing, and at most
// queue-depth slots ever exist (64 MiB at the default depth). A slot stays
// taken until the last Slice of it is released, which may be long after its
// read: a read that finds no free slot uses ordinary memory. The slots
// outlive the ring while callers hold slices of them.
//
// Thread-safety: Take() on the ring thread only (it registers); slices may
// be released on any thread.
class FixedBuffers : public std::enable_shared_from_this<FixedBuffers> {
 public:
  explicit FixedBuffers(uint32_t max_slots) : max_slots_(max_slots) {}
  FixedBuffers(const FixedBuffers&) = delete;
  FixedBuffers& operator=(const FixedBuffers&) = delete;
  ~FixedBuffers() {
    for (std::byte* p : memory_) ::munmap(p, kFixedSlotBytes);
  }

  static bool Fits(uint64_t bytes) {
    return bytes >= kFixedMinBytes && bytes <= kFixedSlotBytes;
  }

  // A free registered slot for `r` (r.want bytes): sets r.buffer and r.dst
  // and returns its index in the ring's buffer table; -1 when none is free
  // (or the kernel refused to register one).
  int Take(io_uring* ring, LocalRead& r) {
    uint32_t index = 0;
    std::byte* data = nullptr;
    {
      MutexLock lk(mu_);
      if (free_.empty() && !GrowLocked(ring)) return -1;
      index = free_.back();
      free_.pop_back();
      data = memory_[index];
    }
    std::shared_ptr<const void> owner(
        data,
        [self = shared_from_this(), index](const void*) { self->Give(index); });
    r.dst = data;
    r.buffer = Slice(std::move(owner), data, r.want);
    taken_.fetch_add(1, std::memory_order_relaxed);
    return static_cast<int>(index);
  }

  uint64_t taken() const { return taken_.load(std::memory_order_relaxed); }
  uint32_t max_slots() const { return max_slots_; }

 private:
  // Maps and registers one more slot, if allowed. Under mu_: growth is
  // rare (at most max_slots times) and Give() must not see a half-made slot.
  bool GrowLocked(io_uring* ring) REQUIRES(mu_) {
    if (refused_ || memory_.size() >= max_slots_) return false;
    void* p = ::mmap(nullptr, kFixedSlotBytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return false;
    const iovec iov{p, kFixedSlotBytes};
    const auto index = static_cast<unsigned>(memory_.size());
    // ENOMEM under a small RLIMIT_MEMLOCK: stay with ordinary memory.
    if (io_uring_register_buffers_update_tag(ring, index, &iov, nullptr, 1) !=
        1) {
      ::munmap(p, kFixedSlotBytes);
      refused_ = true;
      return false;
    }
    memory_.push_back(static_cast<std::byte*>(p));
    free_.push_back(index);
    return true;
  }

  void Give(uint32_t index) EXCLUDES(mu_) {
    MutexLock lk(mu_);
    free_.push_back(index);
  }

  const uint32_t max_slots_;
  std::atomic<uint64_t> taken_{0};
  Mutex mu_;
  std::vector<std::byte*> memory_ GUARDED_BY(mu_);  // slot -> its memory
  std::vector<uint32_t> free_ GUARDED_BY(mu_);
  bool refused_ GUARDED_BY(mu_) = false;
};

}  // namespace rangeio::detail
