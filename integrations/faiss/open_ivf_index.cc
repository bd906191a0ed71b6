// OpenIvfIndex: a FAISS IVF index's header read through rangeio, its lists
// served by a RangeInvertedLists (rangeio_faiss/range_inverted_lists.h).
#include <faiss/IVFlib.h>
#include <faiss/IndexIVF.h>
#include <faiss/impl/FaissAssert.h>
#include <faiss/impl/FaissException.h>
#include <faiss/impl/io.h>
#include <faiss/index_io.h>
#include <faiss/invlists/InvertedListsIOHook.h>
#include <faiss/invlists/OnDiskInvertedLists.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>

#include "rangeio_faiss/range_inverted_lists.h"

namespace rangeio::integrations {

namespace {

// Header bytes fetched per read: 1 MiB covers the quantizer of 1,024 x 128
// floats (512 KiB) and the codebooks in one round trip. Never more than the
// response budget, but at least a 4 KiB page: the limiter admits a read
// above the budget alone, and a smaller window would be a read per field.
constexpr uint64_t kHeaderWindow = 1 << 20;
constexpr uint64_t kMinHeaderWindow = 4 << 10;

// FAISS's reader interface over a rangeio Reader, read front to back
// through a window, one window held at a time (released before the next is
// read), so any response budget the options accept makes progress. The
// list data of an "ilar" index is skipped by the hook below, which files
// the lists' extents here.
class RangeIOReader final : public ::faiss::IOReader {
 public:
  RangeIOReader(const Reader& reader, uint64_t size)
      : reader_(reader),
        size_(size),
        window_max_(std::clamp(reader.limiter()->response_budget_bytes(),
                               kMinHeaderWindow, kHeaderWindow)) {
    name = reader.source()->name();
  }

  // A fourcc FAISS reads (4 bytes, one item) that opens a lists section has
  // the section's counts checked before FAISS reads them: 0 items and
  // error() when they cannot be right.
  size_t operator()(void* ptr, size_t item, size_t nitems) override {
    if (item == 0 || nitems == 0 || !error_.ok()) return 0;
    const uint64_t at = pos_;
    const size_t n = Copy(ptr, item, nitems);
    if (n < nitems && error_.ok() && !short_read_) {
      short_read_ = ByteRange{at, uint64_t{nitems} * item};
    }
    if (item == 4 && n == 1) {
      uint32_t h = 0;
      std::memcpy(&h, ptr, sizeof h);
      error_ = CheckListSection(h);
      if (!error_.ok()) return 0;
    }
    return n;
  }

  uint64_t size() const { return size_; }
  void Fail(Status error) { error_ = std::move(error); }
  uint64_t position() const { return pos_; }
  void Skip(uint64_t to) { pos_ = std::min(to, size_); }
  const Status& error() const { return error_; }
  // The first read FAISS asked for past the end of the file.
  const std::optional<ByteRange>& short_read() const { return short_read_; }

  // Set by the hook for an "ilar" index.
  bool have_extents = false;
  std::vector<RangeInvertedLists::Extent> extents;
  uint64_t lists_end = 0;

 private:
  // Copies the next items that the file holds whole; 0 on a read error.
  size_t Copy(void* ptr, size_t item, size_t nitems) {
    const uint64_t left = size_ - pos_;
    const size_t n = std::min<uint64_t>(nitems, left / item);
    uint64_t want = uint64_t{n} * item;
    auto* out = static_cast<std::byte*>(ptr);
    while (want > 0) {
      if (pos_ < window_at_ || pos_ >= window_at_ + window_.size()) {
        if (!Fill()) return 0;
      }
      const uint64_t from = pos_ - window_at_;
      const uint64_t k = std::min<uint64_t>(want, window_.size() - from);
      std::memcpy(out, window_.data() + from, k);
      out += k;
      pos_ += k;
      want -= k;
    }
    return n;
  }

  // The T at byte `at`, read without moving on; none past the end (where
  // FAISS's own read fails) or on a read error.
  template <typename T>
  std::optional<T> Peek(uint64_t at) {
    if (at > size_ || size_ - at < sizeof(T)) return std::nullopt;
    const uint64_t keep = pos_;
    pos_ = at;
    T v{};
    const size_t n = Copy(&v, sizeof v, 1);
    pos_ = keep;
    return n == 1 ? std::optional<T>(v) : std::nullopt;
  }

  Status Corrupt(uint64_t at, const std::string& field, uint64_t value,
                 const std::string& why) const {
    return Status::InvalidArgument(
        "FAISS index '" + name + "': the " + field + " at byte " +
        std::to_string(at) + " (" + std::to_string(value) + ") " + why +
        ": a corrupt file, refused before FAISS allocates from it");
  }

  // FAISS sizes vectors from a lists section's counts before it reads what
  // they count (2 GiB for a list count of 2^28 in a 2 KB file), so each is
  // checked against the bytes left after it first.
  Status CheckListSection(uint32_t h) {
    if (h == ::faiss::fourcc("ilar")) return CheckArrayLists(pos_);
    if (h == ::faiss::fourcc("ilod")) return CheckOnDiskLists(pos_);
    return Status::OK();
  }

  // "ilar": nlist, code_size, the sizes' kind, then a vector: "full" holds
  // nlist sizes, "sprs" (list, size) pairs of the lists not empty. FAISS
  // sizes a vector of nlist, then resizes it to the stored count. A sparse
  // index may have more lists than bytes of sizes, but not more than the
  // file has bytes (each list costs FAISS and rangeio tens of bytes).
  Status CheckArrayLists(uint64_t at) {
    const std::optional<uint64_t> nlist = Peek<uint64_t>(at);
    const std::optional<uint32_t> kind = Peek<uint32_t>(at + 16);
    const std::optional<uint64_t> count = Peek<uint64_t>(at + 20);
    if (!nlist || !kind || !count) return error_;
    const uint64_t left = size_ - (at + 28);
    const bool full = *kind == ::faiss::fourcc("full");
    if (*nlist > (full ? left / 8 : size_)) {
      return Corrupt(at, "list count", *nlist,
                     full ? "is more list sizes than the " +
                                std::to_string(left) + " bytes left hold"
                          : "is more lists than the file has bytes");
    }
    if (full ? *count != *nlist : *count % 2 != 0 || *count > left / 8) {
      return Corrupt(
          at + 20, "list sizes' length", *count,
          full ? "differs from the list count " + std::to_string(*nlist)
               : "is not (list, size) pairs in the " + std::to_string(left) +
                     " bytes left");
    }
    return Status::OK();
  }

  // "ilod" (OnDiskInvertedLists): nlist, code_size, then three vectors
  // FAISS resizes to their stored counts: the list table ({size, capacity,
  // offset} a list), the slot table ({offset, capacity}) and the data
  // file's name.
  Status CheckOnDiskLists(uint64_t at) {
    const std::optional<uint64_t> nlist = Peek<uint64_t>(at);
    struct Vector {
      const char* field;
      uint64_t entry;
    };
    at += 16;
    for (const Vector& v :
         {Vector{"list table's length", 24}, Vector{"slot table's length", 16},
          Vector{"data file name's length", 1}}) {
      const std::optional<uint64_t> count = Peek<uint64_t>(at);
      if (!nlist || !count) return error_;
      const uint64_t left = size_ - (at + 8);
      if (*count > left / v.entry) {
        return Corrupt(at, v.field, *count,
                       "is more entries of " + std::to_string(v.entry) +
                           " bytes than the " + std::to_string(left) +
                           " bytes left hold");
      }
      if (v.entry == 24 && *count != *nlist) {
        return Corrupt(at, v.field, *count,
                       "differs from the list count " + std::to_string(*nlist));
      }
      at += 8 + *count * v.entry;
    }
    return Status::OK();
  }

  bool Fill() {
    window_.Reset();  // its budget first: the next read may need all of it
    Result<Slice> got =
        reader_.Read({pos_, std::min(size_ - pos_, window_max_)});
    if (!got.ok()) {
      error_ = got.status();
      return false;
    }
    window_ = std::move(*got);
    window_at_ = pos_;
    return true;
  }

  const Reader& reader_;
  const uint64_t size_;
  const uint64_t window_max_;
  uint64_t pos_ = 0;
  Slice window_;
  uint64_t window_at_ = 0;
  Status error_;
  std::optional<ByteRange> short_read_;
};

// Registered once under fourcc "ilrg": read_index with the io_flags below
// hands it an "ilar" index's list sizes with the reader at the first list,
// instead of reading the lists into memory.
struct RangeListsHook final : ::faiss::InvertedListsIOHook {
  RangeListsHook() : InvertedListsIOHook("ilrg", "rangeio::RangeListsHook") {}
  void write(const ::faiss::InvertedLists*, ::faiss::IOWriter*) const override {
    FAISS_THROW_MSG("rangeio reads FAISS lists, it does not write them");
  }
  ::faiss::InvertedLists* read(::faiss::IOReader*, int) const override {
    FAISS_THROW_MSG("no FAISS index stores rangeio's lists");
  }
  ::faiss::InvertedLists* read_ArrayInvertedLists(
      ::faiss::IOReader* f, int, size_t nlist, size_t code_size,
      const std::vector<size_t>& sizes) const override {
    auto* r = dynamic_cast<RangeIOReader*>(f);
    FAISS_THROW_IF_NOT_MSG(r, "rangeio's list hook needs its own reader");
    uint64_t at = r->position();
    r->extents.resize(nlist);
    for (size_t i = 0; i < nlist; ++i) {
      const uint64_t left = r->size() - at;  // at <= size: no sum wraps
      if (sizes[i] != 0 &&
          (code_size > left || sizes[i] > left / (code_size + 8))) {
        r->Fail(Status::InvalidArgument(
            "FAISS index '" + r->name + "': list " + std::to_string(i) +
            " of " + std::to_string(sizes[i]) + " entries at byte " +
            std::to_string(at) + " does not fit in the data, which is " +
            std::to_string(r->size()) + " bytes: a truncated or foreign file"));
        FAISS_THROW_MSG("list past the data");
      }
      r->extents[i] = {at, at + sizes[i] * code_size, sizes[i]};
      at += sizes[i] * (code_size + 8);
    }
    r->have_extents = true;
    r->lists_end = at;
    r->Skip(at);
    return new ::faiss::ArrayInvertedLists(nlist, code_size);
  }
};

int IoFlags() {
  static std::once_flag once;
  std::call_once(once, [] {
    // FAISS keeps its hooks for the life of the process.
    static RangeListsHook* const hook = new RangeListsHook();
    ::faiss::InvertedListsIOHook::add_callback(hook);
  });
  return ::faiss::IO_FLAG_SKIP_IVF_DATA | ::faiss::IO_FLAG_READ_ONLY |
         static_cast<int>(::faiss::fourcc("ilrg") & 0xffff0000u);
}

// The URL of `file` beside `url` (same directory).
std::string Beside(std::string_view url, const std::string& file) {
  const size_t base = file.find_last_of('/');
  std::string name = base == std::string::npos ? file : file.substr(base + 1);
  const size_t slash = url.find_last_of('/');
  if (slash == std::string_view::npos) return name;
  return std::string(url.substr(0, slash + 1)) + name;
}

// FAISS's read_index over `in`. A failure names the file and what went
// wrong: rangeio's read error, a file that ends inside the header (not
// FAISS's text, which carries a stale errno), or what FAISS refused.
Result<std::unique_ptr<::faiss::Index>> ReadHeader(RangeIOReader& in) {
  try {
    return std::unique_ptr<::faiss::Index>(::faiss::read_index(&in, IoFlags()));
  } catch (const std::exception& e) {
    if (!in.error().ok()) return in.error().WithContext("FAISS index header");
    if (in.short_read()) {
      return Status::InvalidArgument(
          "'" + in.name + "' ends at byte " + std::to_string(in.size()) +
          ", inside what FAISS reads as its header (bytes " +
          in.short_read()->ToString() +
          "): a truncated file, or not a FAISS IVF index");
    }
    return Status::InvalidArgument(
        "'" + in.name + "' is not a FAISS index rangeio can read: " + e.what());
  }
}

// The source of `url`, decorated as the options say.
Result<std::shared_ptr<Source>> OpenDecorated(std::string_view url,
                                              const IvfOpenOptions& options) {
  RANGEIO_ASSIGN_OR_RETURN(std::shared_ptr<Source> source,
                           OpenSource(url, options.source));
  return options.decorate ? options.decorate(std::move(source)) : source;
}

// The lists' extents and the reader of the source that holds them.
struct ListData {
  std::vector<RangeInvertedLists::Extent> extents;
  Reader data;
};

// "ilar": the lists lie back to back after their sizes vector, and FAISS
// reads its next field, if any, where they end. Sizes that add up to less
// than the lists' data leave bytes after FAISS's last field (and scans
// would take codes for ids); more are refused by the hook.
Result<ListData> ArrayLists(RangeIOReader& in, const Reader& reader) {
  if (in.position() != in.size()) {
    return Status::InvalidArgument(
        "FAISS index '" + in.name + "': its list sizes end the lists at byte " +
        std::to_string(in.lists_end) + " and FAISS's last field at byte " +
        std::to_string(in.position()) + ", but the file is " +
        std::to_string(in.size()) +
        " bytes: list sizes that do not match the lists' data");
  }
  return ListData{std::move(in.extents), reader};
}

// "ilod": each list's {size, capacity, offset} must lie in the data file,
// capacity codes then capacity ids from offset, with size <= capacity.
Result<ListData> OnDiskLists(std::string_view url,
                             const IvfOpenOptions& options,
                             const ::faiss::OnDiskInvertedLists& od,
                             const Reader& reader) {
  const std::string data_url =
      options.data_url.empty() ? Beside(url, od.filename) : options.data_url;
  RANGEIO_ASSIGN_OR_RETURN(std::shared_ptr<Source> ds,
                           OpenDecorated(data_url, options));
  RANGEIO_ASSIGN_OR_RETURN(Reader data,
                           Reader::Open(ds, options.reader, reader.limiter()));
  RANGEIO_ASSIGN_OR_RETURN(const uint64_t data_size, ds->Size());
  std::vector<RangeInvertedLists::Extent> extents(od.lists.size());
  for (size_t i = 0; i < od.lists.size(); ++i) {
    const auto& l = od.lists[i];
    const uint64_t left = data_size - std::min<uint64_t>(l.offset, data_size);
    if (l.size > l.capacity || l.offset > data_size ||
        (l.capacity != 0 &&
         (od.code_size > left || l.capacity > left / (od.code_size + 8)))) {
      return Status::InvalidArgument(
          "FAISS index '" + reader.source()->name() + "': list " +
          std::to_string(i) + " of size " + std::to_string(l.size) +
          " and capacity " + std::to_string(l.capacity) + " at byte " +
          std::to_string(l.offset) + " does not fit in '" + ds->name() +
          "', which is " + std::to_string(data_size) +
          " bytes: a corrupt list table or a truncated data file");
    }
    extents[i] = {l.offset, l.offset + l.capacity * od.code_size, l.size};
  }
  return ListData{std::move(extents), std::move(data)};
}

}  // namespace

Result<std::unique_ptr<::faiss::Index>> OpenIvfIndex(
    std::string_view url, const IvfOpenOptions& options,
    std::shared_ptr<Limiter> limiter) {
  RANGEIO_ASSIGN_OR_RETURN(std::shared_ptr<Source> source,
                           OpenDecorated(url, options));
  RANGEIO_ASSIGN_OR_RETURN(
      Reader reader, Reader::Open(source, options.reader, std::move(limiter)));
  RANGEIO_ASSIGN_OR_RETURN(const uint64_t size, source->Size());
  const std::string name = source->name();
  if (size == 0) {
    return Status::InvalidArgument("'" + name +
                                   "' is empty: not a FAISS IVF index");
  }
  RangeIOReader in(reader, size);
  RANGEIO_ASSIGN_OR_RETURN(std::unique_ptr<::faiss::Index> index,
                           ReadHeader(in));
  ::faiss::IndexIVF* ivf = ::faiss::ivflib::try_extract_index_ivf(index.get());
  if (ivf == nullptr) {
    const ::faiss::Index& found = *index;  // no call inside typeid
    return Status::InvalidArgument(
        "'" + name + "' is a FAISS index but not an IVF one (" +
        typeid(found).name() + "): it has no posting lists to read");
  }
  const auto* od = dynamic_cast<::faiss::OnDiskInvertedLists*>(ivf->invlists);
  if (!in.have_extents && od == nullptr) {
    return Status::InvalidArgument(
        "FAISS index '" + name + "': its lists are " +
        (ivf->invlists ? typeid(*ivf->invlists).name() : "absent") +
        "; rangeio reads a normally saved index (\"ilar\") and "
        "OnDiskInvertedLists (\"ilod\")");
  }
  RANGEIO_ASSIGN_OR_RETURN(ListData stored,
                           in.have_extents
                               ? ArrayLists(in, reader)
                               : OnDiskLists(url, options, *od, reader));
  RANGEIO_ASSIGN_OR_RETURN(
      std::unique_ptr<RangeInvertedLists> lists,
      RangeInvertedLists::Make(ivf->code_size, std::move(stored.extents),
                               std::move(stored.data), options.max_read_bytes,
                               options.max_gap_bytes));
  if (lists->nlist != ivf->nlist) {
    return Status::InvalidArgument(
        "FAISS index '" + name + "': " + std::to_string(lists->nlist) +
        " lists stored for an index of " + std::to_string(ivf->nlist));
  }
  ivf->replace_invlists(lists.release(), /*own=*/true);
  return index;
}

RangeInvertedLists* RangeListsOf(::faiss::Index* index) {
  ::faiss::IndexIVF* ivf = ::faiss::ivflib::try_extract_index_ivf(index);
  return ivf ? dynamic_cast<RangeInvertedLists*>(ivf->invlists) : nullptr;
}

}  // namespace rangeio::integrations
