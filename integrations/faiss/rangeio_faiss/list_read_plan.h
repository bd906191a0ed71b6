// rangeio_faiss/list_read_plan.h — how the posting lists one prefetch reads
// become byte-range reads (a pure function, tested without I/O).
//
// The lists are sorted by file offset and lists that touch, overlap (a
// list's range starts up to 7 bytes early to align its ids) or lie at most
// `max_gap` bytes apart share one read of at most `max_read` bytes; the
// reads are then ordered by the earliest scan position of any list they
// hold, so the first queries' lists still come first. A gap is lists the
// prefetch does not need (or an OnDiskInvertedLists file's unused
// capacity): reading it costs its bytes (and budget), while not reading it
// costs one more read, a request and a slot in the window for a round trip.
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
                                       uint64_t max_read, uint64_t max_gap);

}  // namespace rangeio::integrations
