// PlanListReads (rangeio_faiss/list_read_plan.h).
#include "rangeio_faiss/list_read_plan.h"

#include <algorithm>
#include <tuple>

namespace rangeio::integrations {

std::vector<PlannedRead> PlanListReads(std::vector<ListToRead> lists,
                                       uint64_t max_read, uint64_t max_gap) {
  std::sort(lists.begin(), lists.end(),
            [](const ListToRead& a, const ListToRead& b) {
              return std::tie(a.range.offset, a.list) <
                     std::tie(b.range.offset, b.list);
            });
  std::vector<PlannedRead> reads;
  for (const ListToRead& l : lists) {
    if (!reads.empty()) {
      PlannedRead& r = reads.back();
      const uint64_t end = std::max(r.range.end(), l.range.end());
      const bool near = l.range.offset <= r.range.end() ||
                        l.range.offset - r.range.end() <= max_gap;
      if (near && end - r.range.offset <= max_read) {
        r.range.length = end - r.range.offset;
        r.lists.push_back(l.list);
        r.first_use = std::min(r.first_use, l.first_use);
        continue;
      }
    }
    reads.push_back({l.range, {l.list}, l.first_use});
  }
  std::stable_sort(reads.begin(), reads.end(),
                   [](const PlannedRead& a, const PlannedRead& b) {
                     return a.first_use < b.first_use;
                   });
  return reads;
}

}  // namespace rangeio::integrations
