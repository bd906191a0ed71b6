// rangeio_faiss/list_read_plan.h — how the posting lists one prefetch reads
// become byte-range reads (a pure function, tested without I/O).
//
// The lists are sorted by file offset and lists that touch (or overlap: a
// list's range starts up to 7 bytes early to align its ids) share one read
// of at most `max_read` bytes; the reads are then ordered by the earliest
// scan position of any list they hold, so the first queries' lists still
// come first. Lists separated by a gap are never merged: a normally saved
// index has none, and an OnDiskInvertedLists file's gaps are unused
// capacity, up to the size of the list itself, which would spend the
// response budget on bytes nobody scans.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "rangeio/byte_range.h"

namespace rangeio::integrations {

struct ListToRead {
  size_t list = 0;
  ByteRange range;         // the list's bytes (RangeInvertedLists::RangeOf)
  uint32_t first_use = 0;  // its first position in the prefetch's scan order
};

struct PlannedRead {
  ByteRange range;            // covers every list below
  std::vector<size_t> lists;  // by offset
  uint32_t first_use = 0;     // the earliest of its lists'
};

// The reads, in the order to issue them. A list larger than `max_read` is
// one read of its own.
std::vector<PlannedRead> PlanListReads(std::vector<ListToRead> lists,
                                       uint64_t max_read);

}  // namespace rangeio::integrations
