// RangeInvertedLists: posting lists as range reads (rangeio_faiss/
// range_inverted_lists.h). One mutex guards every thread's session; pump
// threads drain the prefetch streams into it.
#include "rangeio_faiss/range_inverted_lists.h"

#include <faiss/impl/FaissAssert.h>
#include <faiss/impl/FaissException.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <utility>

namespace rangeio::integrations {

namespace {

// How often a thread waiting for a list checks whether the limiter is
// stuck (nothing in flight, a stream waiting): 2 ms, well under a network
// round trip, so a stuck budget costs little, and rare enough not to load
// the limiter's lock.
constexpr auto kStuckCheck = std::chrono::milliseconds(2);
// Largest read of touching lists: 1 MiB, about ten lists of bench vindex's
// IVF-Flat, so that a batch still spreads over many reads in flight.
constexpr uint64_t kMaxMerged = 1 << 20;

// An 8-byte aligned empty list, for lists of size 0.
alignas(8) const uint8_t kEmpty[8] = {};

}  // namespace

// One list held by one thread's session.
struct Entry {
  enum class State { kPending, kReady, kFailed, kEvicted };
  State state = State::kEvicted;
  Slice bytes;  // the list's range: codes at codes_at, ids 8-aligned
  Status error;
  uint64_t pump = 0;  // the read that will deliver it
  uint32_t pins = 0;  // get_codes/get_ids not yet released
  // Scan positions of the get_codes calls the last prefetch announced,
  // from `used` on still to come: eviction drops the list needed last.
  std::vector<uint32_t> uses;
  size_t used = 0;
  bool InUse() const { return used < uses.size(); }
  uint32_t NextUse() const { return InUse() ? uses[used] : UINT32_MAX; }
};

// The lists one search thread prefetched (FAISS scans a thread's slice on
// the thread that prefetched it).
struct Session {
  std::unordered_map<size_t, Entry> lists;
};

struct RangeInvertedLists::Impl
    : public std::enable_shared_from_this<RangeInvertedLists::Impl> {
  size_t code_size = 0;
  std::vector<Extent> lists;
  Reader reader;
  ListReadFn read;

  std::mutex mu;
  std::condition_variable cv;
  std::unordered_map<std::thread::id, std::shared_ptr<Session>> sessions;
  uint64_t next_pump = 1;
  int active_pumps = 0;
  bool closing = false;
  ListStats stats;

  explicit Impl(Reader r) : reader(std::move(r)) {}

  // The bytes read for list i: its codes and ids, starting up to 7 bytes
  // early so that the ids sit 8-aligned when the buffer is.
  uint64_t PadOf(size_t i) const {
    const Extent& e = lists[i];
    const uint64_t pad = (8 - (e.ids_offset - e.codes_offset) % 8) % 8;
    return e.codes_offset >= pad ? pad : 0;
  }
  ByteRange RangeOf(size_t i) const {
    const Extent& e = lists[i];
    const uint64_t start = e.codes_offset - PadOf(i);
    return {start, e.ids_offset + e.size * 8 - start};
  }
  std::string Describe(size_t i) const {
    return "FAISS list " + std::to_string(i) + " (bytes " +
           RangeOf(i).ToString() + " of '" + reader.source()->name() + "')";
  }

  std::shared_ptr<Session> SessionLocked() {
    std::shared_ptr<Session>& s = sessions[std::this_thread::get_id()];
    if (!s) s = std::make_shared<Session>();
    return s;
  }

  // Reads `ids` (entries already kPending with pump `pump`) as one request
  // and starts a thread that files each list as it arrives. Called with mu
  // held: rangeio never calls back into this object from ReadRanges.
  void StartPumpLocked(const std::shared_ptr<Session>& session,
                       std::vector<size_t> ids, uint64_t pump,
                       Priority priority) {
    if (ids.empty()) return;
    // Lists next to each other in scan order that touch in the file share
    // one read (up to kMaxMerged); the reads go out in scan order, so the
    // read-ahead the budget holds is what the scan needs next.
    std::vector<ByteRange> ranges;
    std::vector<size_t> first;  // read r serves ids[first[r]..first[r+1])
    for (size_t k = 0; k < ids.size(); ++k) {
      const ByteRange r = RangeOf(ids[k]);
      if (!ranges.empty() && ranges.back().end() == r.offset &&
          ranges.back().length + r.length <= kMaxMerged) {
        ranges.back().length += r.length;
      } else {
        ranges.push_back(r);
        first.push_back(k);
      }
    }
    first.push_back(ids.size());
    Result<RangeStream> stream =
        read ? read(reader, ranges, Delivery::kAsCompleted, priority)
             : reader.ReadRanges(ranges, Delivery::kAsCompleted, priority);
    if (!stream.ok()) {
      FailLocked(*session, ids, pump, stream.status());
      return;
    }
    ++active_pumps;
    std::thread([self = shared_from_this(), session, ids = std::move(ids),
                 first = std::move(first), pump,
                 s = std::move(*stream)]() mutable {
      self->Drain(*session, ids, first, pump, std::move(s));
    }).detach();
  }

  void Drain(Session& session, const std::vector<size_t>& ids,
             const std::vector<size_t>& first, uint64_t pump,
             RangeStream owned) {
    std::optional<RangeStream> stream(std::move(owned));
    for (;;) {
      Result<std::optional<RangeResult>> next = stream->Next();
      Slice dropped;  // released after the lock
      std::unique_lock lk(mu);
      if (!next.ok()) {
        // The error ends the whole stream: a lone list failed; the lists
        // of a prefetch are read again one by one when scanned, so that
        // the error is thrown for the list that failed and only for it.
        if (ids.size() == 1) {
          FailLocked(session, ids, pump, next.status());
        } else {
          ForgetLocked(session, ids, pump);
        }
        break;
      }
      if (!*next) break;
      const size_t r = (*next)->index;
      const uint64_t base = RangeOf(ids[first[r]]).offset;
      for (size_t k = first[r]; k < first[r + 1]; ++k) {
        auto it = session.lists.find(ids[k]);
        if (it != session.lists.end() &&
            it->second.state == Entry::State::kPending) {
          const ByteRange lr = RangeOf(ids[k]);
          it->second.bytes = (*next)->bytes.Sub(lr.offset - base, lr.length);
          it->second.state = Entry::State::kReady;
        }  // else evicted or dropped meanwhile
      }
      dropped = std::move((*next)->bytes);
      if (closing) break;
      lk.unlock();
      cv.notify_all();
    }
    stream.reset();  // cancels what is left, before the owner may go
    std::lock_guard lk(mu);
    --active_pumps;
    cv.notify_all();
  }

  void ForgetLocked(Session& session, const std::vector<size_t>& ids,
                    uint64_t pump) {
    for (size_t i : ids) {
      auto it = session.lists.find(i);
      if (it != session.lists.end() && it->second.pump == pump &&
          it->second.state == Entry::State::kPending) {
        it->second.state = Entry::State::kEvicted;
      }
    }
    cv.notify_all();
  }

  void FailLocked(Session& session, const std::vector<size_t>& ids,
                  uint64_t pump, const Status& cause) {
    for (size_t i : ids) {
      auto it = session.lists.find(i);
      if (it == session.lists.end() || it->second.pump != pump ||
          it->second.state != Entry::State::kPending) {
        continue;
      }
      it->second.state = Entry::State::kFailed;
      it->second.error = cause.WithContext(Describe(i));
    }
    cv.notify_all();
  }

  // True when the limiter can admit nothing until a response is released.
  bool Stuck() const { return reader.limiter()->Stalled(); }

  // Drops the list this thread read ahead and needs last (not pinned, not
  // `keep`), so that the budget admits more. Only its own: another thread
  // holding the budget is either scanning (it releases soon) or waiting
  // (it evicts its own).
  bool EvictOneLocked(Session& own, size_t keep) {
    Entry* victim = nullptr;
    for (auto& [id, e] : own.lists) {
      if (id == keep || e.state != Entry::State::kReady || e.pins != 0 ||
          e.bytes.empty()) {
        continue;
      }
      if (victim == nullptr || e.NextUse() > victim->NextUse()) victim = &e;
    }
    if (victim == nullptr) return false;
    victim->bytes.Reset();
    victim->state = Entry::State::kEvicted;
    ++stats.lists_evicted;
    return true;
  }

  // Waits until list i of this thread's session is ready, reading it at
  // once with priority if it is not coming; pins it. Throws on a failure.
  Entry& AcquireLocked(std::unique_lock<std::mutex>& lk, size_t i) {
    std::shared_ptr<Session> session = SessionLocked();
    Entry& e = session->lists[i];
    for (;;) {
      switch (e.state) {
        case Entry::State::kReady:
          AlignLocked(e, i);
          ++e.pins;
          return e;
        case Entry::State::kFailed: {
          const std::string msg = e.error.ToString();
          e.state = Entry::State::kEvicted;  // a later call reads again
          throw ::faiss::FaissException(msg);
        }
        case Entry::State::kEvicted: {
          e.state = Entry::State::kPending;
          e.pump = next_pump++;
          ++stats.lists_on_demand;
          StartPumpLocked(session, {i}, e.pump, Priority::kHigh);
          break;
        }
        case Entry::State::kPending:
          if (Stuck() && EvictOneLocked(*session, i)) break;
          cv.wait_for(lk, kStuckCheck,
                      [&] { return e.state != Entry::State::kPending; });
          break;
      }
    }
  }

  // The ids must be int64-aligned: a buffer that leaves them unaligned
  // (a layout whose lists do not keep one alignment) is copied once.
  void AlignLocked(Entry& e, size_t i) {
    const uint64_t ids_at = lists[i].ids_offset - RangeOf(i).offset;
    if ((reinterpret_cast<uintptr_t>(e.bytes.data()) + ids_at) % 8 == 0) return;
    std::byte* w = nullptr;
    Slice copy = Slice::Allocate(e.bytes.size() + 8, &w);
    const size_t shift =
        (8 - (reinterpret_cast<uintptr_t>(w) + ids_at) % 8) % 8;
    std::memcpy(w + shift, e.bytes.data(), e.bytes.size());
    e.bytes = copy.Sub(shift, e.bytes.size());
    ++stats.aligned_copies;
  }

  // Unpins list i (on this thread's session, else wherever it is pinned).
  void ReleaseLocked(size_t i, bool use) {
    auto release = [&](Session& s) {
      auto it = s.lists.find(i);
      if (it == s.lists.end() || it->second.pins == 0) return false;
      Entry& e = it->second;
      --e.pins;
      if (use && e.InUse()) ++e.used;
      if (e.pins == 0 && !e.InUse()) s.lists.erase(it);
      return true;
    };
    if (release(*SessionLocked())) return;
    for (auto& [tid, s] : sessions) {
      if (release(*s)) return;
    }
  }
};

Result<std::unique_ptr<RangeInvertedLists>> RangeInvertedLists::Make(
    size_t code_size, std::vector<Extent> lists, Reader reader,
    ListReadFn read) {
  const std::string& name = reader.source()->name();
  if (code_size == 0) {
    return Status::InvalidArgument(
        "FAISS index '" + name +
        "': code size 0 (not a list layout rangeio reads)");
  }
  RANGEIO_ASSIGN_OR_RETURN(const uint64_t size, reader.source()->Size());
  for (size_t i = 0; i < lists.size(); ++i) {
    const Extent& e = lists[i];
    const bool overflow = e.size > (UINT64_MAX / 2) / (code_size + 8) ||
                          e.codes_offset > UINT64_MAX / 2 ||
                          e.ids_offset > UINT64_MAX / 2;
    if (overflow || e.ids_offset < e.codes_offset + e.size * code_size ||
        e.ids_offset + e.size * 8 > size) {
      return Status::InvalidArgument(
          "FAISS index '" + name + "': list " + std::to_string(i) + " of " +
          std::to_string(e.size) + " entries (codes at " +
          std::to_string(e.codes_offset) + ", ids at " +
          std::to_string(e.ids_offset) +
          ") does not fit in the data, which is " + std::to_string(size) +
          " bytes: a truncated or foreign file");
    }
  }
  auto impl = std::make_shared<Impl>(std::move(reader));
  impl->code_size = code_size;
  impl->lists = std::move(lists);
  impl->read = std::move(read);
  const size_t nlist = impl->lists.size();
  return std::unique_ptr<RangeInvertedLists>(
      new RangeInvertedLists(nlist, code_size, std::move(impl)));
}

RangeInvertedLists::RangeInvertedLists(size_t n, size_t code_bytes,
                                       std::shared_ptr<Impl> impl)
    : ReadOnlyInvertedLists(n, code_bytes), impl_(std::move(impl)) {}

// Drops every held list (their budget lets blocked pumps finish), stops the
// pumps at their next result and waits for them.
RangeInvertedLists::~RangeInvertedLists() {
  std::unordered_map<std::thread::id, std::shared_ptr<Session>> sessions;
  std::unique_lock lk(impl_->mu);
  impl_->closing = true;
  sessions.swap(impl_->sessions);
  for (auto& [tid, s] : sessions) s->lists.clear();
  impl_->cv.wait(lk, [&] { return impl_->active_pumps == 0; });
}

size_t RangeInvertedLists::list_size(size_t list_no) const {
  FAISS_THROW_IF_NOT_FMT(list_no < nlist, "list %zu of %zu", list_no, nlist);
  return impl_->lists[list_no].size;
}

const uint8_t* RangeInvertedLists::get_codes(size_t list_no) const {
  if (list_size(list_no) == 0) return kEmpty;
  std::unique_lock lk(impl_->mu);
  Entry& e = impl_->AcquireLocked(lk, list_no);
  return reinterpret_cast<const uint8_t*>(e.bytes.data()) +
         impl_->PadOf(list_no);
}

const RangeInvertedLists::idx_t* RangeInvertedLists::get_ids(
    size_t list_no) const {
  if (list_size(list_no) == 0) return reinterpret_cast<const idx_t*>(kEmpty);
  std::unique_lock lk(impl_->mu);
  Entry& e = impl_->AcquireLocked(lk, list_no);
  const uint64_t ids_at =
      impl_->lists[list_no].ids_offset - impl_->RangeOf(list_no).offset;
  return reinterpret_cast<const idx_t*>(e.bytes.data() + ids_at);
}

void RangeInvertedLists::release_codes(size_t list_no,
                                       const uint8_t* /*codes*/) const {
  if (list_size(list_no) == 0) return;
  std::lock_guard lk(impl_->mu);
  impl_->ReleaseLocked(list_no, /*use=*/true);
}

void RangeInvertedLists::release_ids(size_t list_no,
                                     const idx_t* /*ids*/) const {
  if (list_size(list_no) == 0) return;
  std::lock_guard lk(impl_->mu);
  impl_->ReleaseLocked(list_no, /*use=*/false);
}

const uint8_t* RangeInvertedLists::get_single_code(size_t list_no,
                                                   size_t offset) const {
  FAISS_THROW_IF_NOT_FMT(offset < list_size(list_no),
                         "entry %zu of list %zu (%zu entries)", offset, list_no,
                         list_size(list_no));
  return get_codes(list_no) + offset * code_size;
}

// Deduplicates the lists in scan order (first use first) and reads those
// not held yet as one request. Never throws (FAISS calls it inside an
// OpenMP region): a failure is filed on the lists and thrown by get_codes.
void RangeInvertedLists::prefetch_lists(const idx_t* list_nos, int n) const {
  std::lock_guard lk(impl_->mu);
  if (impl_->closing) return;
  std::shared_ptr<Session> session = impl_->SessionLocked();
  std::unordered_map<size_t, std::vector<uint32_t>> uses;
  std::vector<size_t> order;
  for (int k = 0; k < n; ++k) {
    const idx_t l = list_nos[k];
    if (l < 0 || static_cast<size_t>(l) >= nlist) continue;
    if (impl_->lists[l].size == 0) continue;
    std::vector<uint32_t>& u = uses[l];
    if (u.empty()) order.push_back(static_cast<size_t>(l));
    u.push_back(static_cast<uint32_t>(k));
  }
  // Lists of an earlier prefetch that this one does not name and no scan
  // holds: stale (FAISS prefetches right before it scans).
  for (auto it = session->lists.begin(); it != session->lists.end();) {
    if (it->second.pins == 0 && uses.count(it->first) == 0) {
      it = session->lists.erase(it);
    } else {
      ++it;
    }
  }
  const uint64_t pump = impl_->next_pump++;
  std::vector<size_t> to_read;
  for (size_t l : order) {
    Entry& e = session->lists[l];
    e.uses = std::move(uses[l]);
    e.used = 0;
    if (e.state == Entry::State::kReady || e.state == Entry::State::kPending) {
      continue;
    }
    e.state = Entry::State::kPending;
    e.pump = pump;
    to_read.push_back(l);
  }
  ++impl_->stats.prefetch_calls;
  impl_->stats.lists_prefetched += to_read.size();
  impl_->StartPumpLocked(session, std::move(to_read), pump, Priority::kNormal);
}

ListStats RangeInvertedLists::GetListStats() const {
  std::lock_guard lk(impl_->mu);
  return impl_->stats;
}

const Reader& RangeInvertedLists::reader() const { return impl_->reader; }

}  // namespace rangeio::integrations
