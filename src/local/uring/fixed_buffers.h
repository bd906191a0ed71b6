// fixed_buffers.h (internal) — the io_uring engine's registered buffers for
// direct reads (ring.cc): 1 MiB slots for wide reads (FixedBuffers),
// one arena of 4 KiB slots for small ones (SmallBuffers).
//
// Thread-safety: Take() under the ring's drive lock only (it registers with
// the ring); slices of the buffers may be released on any thread.
#pragma once

#include <liburing.h>
#include <sys/mman.h>
#include <sys/uio.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <vector>

#include "local/local_read.h"
#include "rangeio/slice.h"
#include "util/mutex.h"

namespace rangeio::detail {

// Registered buffers (see FixedBuffers): direct reads of this size range.
constexpr uint64_t kFixedMinBytes = uint64_t{64} << 10;
constexpr size_t kFixedSlotBytes = size_t{1} << 20;

// Registered ("fixed") buffers for direct reads of kFixedMinBytes to
// kFixedSlotBytes. A direct read into ordinary memory pins and unpins every
// page of its buffer (get_user_pages) on each call; a registered buffer is
// pinned once. That shows at 1 MiB as more bandwidth for less CPU (fio
// --fixedbufs, bench local 1 MiB O_DIRECT rows). The lower bound: a 1 MiB
// slot per small read would pin 256 times the memory it needs; reads of up
// to 4 KiB have SmallBuffers, and those between go to ordinary memory.
//
// Slots of kFixedSlotBytes are mapped and registered (into a sparse table
// of one entry per ring slot, kernel 5.19+) the first time they are needed,
// so a file that never does such reads pins nothing, and at most
// queue-depth slots ever exist (64 MiB at the default depth). A slot stays
// taken until the last Slice of it is released, which may be long after its
// read: a read that finds no free slot uses ordinary memory. The slots
// outlive the ring while callers hold slices of them.
//
// Thread-safety: Take() under the ring's drive lock only (it registers);
// slices may be released on any thread.
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
      MutexLock lk(mu_, MutexLock::Spin::kYes);
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
    MutexLock lk(mu_, MutexLock::Spin::kYes);
    free_.push_back(index);
  }

  const uint32_t max_slots_;
  std::atomic<uint64_t> taken_{0};
  Mutex mu_;
  std::vector<std::byte*> memory_ GUARDED_BY(mu_);  // slot -> its memory
  std::vector<uint32_t> free_ GUARDED_BY(mu_);
  bool refused_ GUARDED_BY(mu_) = false;
};

// Registered memory for direct reads of at most kSmallSlotBytes (random
// 4 KiB reads): one arena of small slots, registered as one entry of the
// ring's buffer table (a read_fixed may target any address inside an
// entry), mapped and registered on the first such read. A direct read into
// ordinary memory pins its page on every call: gup_fast_fallback and
// bio_iov_iter_get_pages were ~6% of the ring thread's CPU in perf (bench url
// --block 4KiB, direct, uring); into the arena it pins nothing.
//
// A slot stays taken until the last Slice of it is released; when every
// slot is taken, a read uses ordinary memory. Slots: see kSmallSlotsPerRead.
//
// Each slot has the memory for its Slice's shared_ptr control block beside
// it (SlotAllocator), so taking a slot allocates nothing, and the slot is
// given back when that block is freed, the last thing a shared_ptr does.
// No lock is taken per read: Take() pops from a free list only the drive
// lock's holder touches, and a released slot is pushed with one CAS onto a
// shared stack that Take() empties into that list, all at once, when the
// list runs dry. The arena owns itself: the ring gives it up with Orphan(),
// and it is deleted once it is orphaned and every slot is back (slices
// outlive the ring), without a reference count touched per read.
//
// Thread-safety: Take() and Orphan() under the ring's drive lock only (they
// own the free list; Take registers); slices may be released on any thread.
constexpr size_t kSmallSlotBytes = 4096;
// Slots per unit of queue depth: the reads in flight (1x) plus the results
// a consumer may hold (the default response budget is 2C), with room to
// spare; at most kMaxSmallSlots (4 MiB pinned per open file).
constexpr uint32_t kSmallSlotsPerRead = 4;
constexpr uint32_t kMaxSmallSlots = 1024;

class SmallBuffers {
 public:
  // `table_index`: the ring's buffer-table entry the arena is registered at.
  SmallBuffers(uint32_t depth, unsigned table_index)
      : slots_(std::min(depth * kSmallSlotsPerRead, kMaxSmallSlots)),
        table_index_(table_index) {}
  SmallBuffers(const SmallBuffers&) = delete;
  SmallBuffers& operator=(const SmallBuffers&) = delete;

  // The ring's handle: Orphan() in place of delete.
  struct Orphaner {
    void operator()(SmallBuffers* p) const { p->Orphan(); }
  };
  using Handle = std::unique_ptr<SmallBuffers, Orphaner>;

  // A slot holds the read when its aligned length fits and the slot's
  // address satisfies the file's memory alignment.
  static bool Fits(uint64_t bytes, uint32_t memory_align) {
    return bytes <= kSmallSlotBytes && kSmallSlotBytes % memory_align == 0;
  }

  // As FixedBuffers::Take: sets r.buffer and r.dst to a free slot and
  // returns the arena's table index; -1 when no slot is free (or the kernel
  // refused to register the arena).
  int Take(io_uring* ring, LocalRead& r) {
    if (free_.empty() && !Refill(ring)) return -1;
    const uint32_t slot = free_.back();
    free_.pop_back();
    std::byte* data = arena_ + size_t{slot} * kSmallSlotBytes;
    // The deleter does nothing: the block's deallocation gives the slot back.
    std::shared_ptr<const void> owner(
        data, [](const void*) {}, SlotAllocator<char>(this, slot));
    r.dst = data;
    r.buffer = Slice(std::move(owner), data, r.want);
    // Only the drive lock's holder writes it: no read-modify-write needed.
    taken_.store(taken_.load(std::memory_order_relaxed) + 1,
                 std::memory_order_relaxed);
    return static_cast<int>(table_index_);
  }

  uint64_t taken() const { return taken_.load(std::memory_order_relaxed); }
  uint32_t slots() const { return slots_; }

 private:
  // A slot's control block: one cache line, as slices of different slots
  // are released on different threads.
  struct alignas(64) Block {
    std::byte bytes[64];
  };

  // Allocates the control block of slot `slot`'s shared_ptr in the slot's
  // Block; its deallocation gives the slot back.
  template <class T>
  struct SlotAllocator {
    using value_type = T;
    SlotAllocator(SmallBuffers* p, uint32_t s) : pool(p), slot(s) {}
    template <class U>
    explicit SlotAllocator(const SlotAllocator<U>& o) noexcept
        : pool(o.pool), slot(o.slot) {}
    T* allocate(size_t n) {
      static_assert(sizeof(T) <= sizeof(Block),
                    "a shared_ptr control block must fit a slot's Block");
      static_assert(alignof(T) <= alignof(Block));
      if (n != 1) throw std::bad_alloc();  // shared_ptr asks for one
      return reinterpret_cast<T*>(&pool->blocks_[slot]);
    }
    void deallocate(T* /*p*/, size_t /*n*/) noexcept { pool->Give(slot); }
    bool operator==(const SlotAllocator& o) const {
      return pool == o.pool && slot == o.slot;
    }
    SmallBuffers* pool;
    uint32_t slot;
  };

  // The shared stack's head, one word: the top slot + 1 (0: empty), how
  // many slots the stack holds, and whether the ring has let go.
  static constexpr uint64_t kCountUnit = uint64_t{1} << 32;
  static constexpr uint64_t kOrphaned = uint64_t{1} << 63;
  static uint32_t Top(uint64_t h) { return static_cast<uint32_t>(h); }
  static uint64_t Count(uint64_t h) { return (h & ~kOrphaned) >> 32; }

  ~SmallBuffers() {
    if (arena_ != nullptr) ::munmap(arena_, size_t{slots_} * kSmallSlotBytes);
  }

  // Fills the empty free list: the first time by mapping and registering
  // the arena, later with every slot released since the last refill; false
  // when there is none (or the arena cannot be had).
  bool Refill(io_uring* ring) {
    if (arena_ == nullptr) return Map(ring);
    uint64_t h = returned_.exchange(0, std::memory_order_acquire);
    for (uint32_t top = Top(h); top != 0; top = next_[top - 1]) {
      free_.push_back(top - 1);
    }
    return !free_.empty();
  }

  bool Map(io_uring* ring) {
    if (refused_) return false;
    const size_t bytes = size_t{slots_} * kSmallSlotBytes;
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      refused_ = true;
      return false;
    }
    const iovec iov{p, bytes};
    // ENOMEM under a small RLIMIT_MEMLOCK: stay with ordinary memory.
    if (io_uring_register_buffers_update_tag(ring, table_index_, &iov, nullptr,
                                             1) != 1) {
      ::munmap(p, bytes);
      refused_ = true;
      return false;
    }
    arena_ = static_cast<std::byte*>(p);
    blocks_ = std::make_unique<Block[]>(slots_);
    next_ = std::make_unique<uint32_t[]>(slots_);
    free_.reserve(slots_);
    for (uint32_t s = slots_; s > 0; --s) free_.push_back(s - 1);
    return true;
  }

  // Pushes n >= 1 slots, first..last (linked through next_ already);
  // deletes the arena when that brings every slot of an orphaned one back.
  void Push(uint32_t first, uint32_t last, uint64_t n, uint64_t orphan) {
    uint64_t h = returned_.load(std::memory_order_relaxed);
    uint64_t nh = 0;
    do {
      next_[last] = Top(h);
      nh = ((h >> 32 << 32) | orphan) + n * kCountUnit + first + 1;
    } while (!returned_.compare_exchange_weak(h, nh, std::memory_order_acq_rel,
                                              std::memory_order_relaxed));
    DeleteIfLast(nh);
  }

  // Deletes the arena when `h`, the stack's head after a change, says it
  // is orphaned and holds every slot.
  void DeleteIfLast(uint64_t h) {
    if ((h & kOrphaned) != 0 && Count(h) == slots_) delete this;
  }

  void Give(uint32_t slot) { Push(slot, slot, 1, 0); }

  // The free list joins the stack, marked orphaned; the arena goes when the
  // last slice of it does.
  void Orphan() {
    if (arena_ == nullptr) {
      delete this;
      return;
    }
    if (free_.empty()) {
      DeleteIfLast(returned_.fetch_or(kOrphaned, std::memory_order_acq_rel) |
                   kOrphaned);
      return;
    }
    for (size_t i = 0; i + 1 < free_.size(); ++i)
      next_[free_[i]] = free_[i + 1];
    Push(free_.front(), free_.back(), free_.size(), kOrphaned);
  }

  const uint32_t slots_;
  const unsigned table_index_;
  std::atomic<uint64_t> taken_{0};
  // Drive lock's holder only (see the class comment).
  std::byte* arena_ = nullptr;
  std::unique_ptr<Block[]> blocks_;   // set with arena_, then read-only
  std::unique_ptr<uint32_t[]> next_;  // a stacked slot's next slot + 1
  std::vector<uint32_t> free_;
  bool refused_ = false;
  // Released slots (see Top, Count): written before each CAS that
  // publishes them, read after the exchange that takes them.
  std::atomic<uint64_t> returned_{0};
};

}  // namespace rangeio::detail
