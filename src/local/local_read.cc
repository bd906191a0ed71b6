#include "local/local_read.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <string>

namespace rangeio::detail {
namespace {

// Direct-I/O alignment where statx does not report one (kernels before 6.1):
// 4 KiB is a multiple of every logical block size in common use (512 B and
// 4 KiB) and of the page size, so it satisfies any of them.
constexpr uint32_t kFallbackDirectAlign = 4096;

// A buffer of `size` bytes from Slice::Allocate whose address is a multiple
// of `align`. The pool already aligns buffers to min(size class, 4 KiB),
// which covers every alignment statx reports in practice; anything larger
// over-allocates and aligns inside.
Slice AllocateAligned(size_t size, size_t align, std::byte** writable) {
  Slice s = Slice::Allocate(size, writable);
  if (reinterpret_cast<uintptr_t>(*writable) % align == 0) return s;
  std::byte* base = nullptr;
  Slice wide = Slice::Allocate(size + align - 1, &base);
  const size_t skip =
      (align - reinterpret_cast<uintptr_t>(base) % align) % align;
  *writable = base + skip;
  return wide.Sub(skip, size);
}

Status Truncated(const FileHandle& file, const LocalRead& r) {
  return Status::IoError("'" + file.path() + "' ended at offset " +
                         std::to_string(r.next_offset()) +
                         " before the range did (file truncated?)");
}

// Sets the direct-I/O alignment of `fd` (opened buffered) and switches it
// to O_DIRECT.
Status EnableDirect(int fd, const std::string& path, uint32_t* offset_align,
                    uint32_t* memory_align) {
  *offset_align = kFallbackDirectAlign;
  *memory_align = kFallbackDirectAlign;
#ifdef STATX_DIOALIGN
  struct statx stx {};
  if (::statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0 &&
      (stx.stx_mask & STATX_DIOALIGN) != 0) {
    if (stx.stx_dio_offset_align == 0) {
      return Status::InvalidArgument(
          "'" + path +
          "' cannot be read with O_DIRECT: its file system does not support "
          "direct I/O (statx reports no direct-I/O alignment)");
    }
    *offset_align = stx.stx_dio_offset_align;
    *memory_align = std::max<uint32_t>(stx.stx_dio_mem_align, 1);
  }
  // Block sizes are powers of two, which PlanLocalRead's masks rely on; a
  // file system that says otherwise is refused, not misread.
  if (!std::has_single_bit(*offset_align)) {
    return Status::InvalidArgument(
        "'" + path + "' reports a direct-I/O offset alignment of " +
        std::to_string(*offset_align) + " B, not a power of two");
  }
#endif
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_DIRECT) != 0) {
    const int err = errno;
    if (err == EINVAL) {
      return Status::InvalidArgument(
          "'" + path +
          "' cannot be read with O_DIRECT: its file system does not support "
          "direct I/O (fcntl: Invalid argument)");
    }
    return Status::FromErrno(err, "setting O_DIRECT on '" + path + "'");
  }
  return Status::OK();
}

}  // namespace

FileHandle::~FileHandle() { ::close(fd_); }

std::string FileHandle::Describe() const {
  if (!direct_) return "buffered";
  return "O_DIRECT, offsets aligned to " + std::to_string(offset_align_) +
         " B, buffers to " + std::to_string(memory_align_) + " B";
}

Result<std::shared_ptr<const FileHandle>> OpenFileHandle(
    const std::string& path, bool direct) {
  if (path.empty()) return Status::InvalidArgument("file path is empty");
  // Opened buffered first, O_DIRECT set after the checks: so that a
  // directory or a missing file gets its own error, not O_DIRECT's EINVAL.
  // O_NONBLOCK: opening a FIFO for reading would block until a writer
  // comes; it is refused below, and cleared for what is kept.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return Status::FromErrno(errno, "opening '" + path + "'");
  auto fail = [fd](Status st) {
    ::close(fd);
    return st;
  };
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    return fail(Status::FromErrno(errno, "stat '" + path + "'"));
  }
  uint64_t size = static_cast<uint64_t>(st.st_size);
  if (S_ISBLK(st.st_mode)) {
    if (::ioctl(fd, BLKGETSIZE64, &size) != 0) {
      return fail(
          Status::FromErrno(errno, "size of block device '" + path + "'"));
    }
  } else if (!S_ISREG(st.st_mode)) {
    return fail(Status::InvalidArgument(
        "'" + path +
        "' is not a regular file or a block device (a FIFO, socket, "
        "character device or directory cannot be read by range)"));
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    return fail(Status::FromErrno(errno, "fcntl '" + path + "'"));
  }
  uint32_t offset_align = 1;
  uint32_t memory_align = 1;
  if (direct) {
    Status s = EnableDirect(fd, path, &offset_align, &memory_align);
    if (!s.ok()) return fail(std::move(s));
  }
  return std::shared_ptr<const FileHandle>(std::make_shared<FileHandle>(
      fd, path, size, direct, offset_align, memory_align));
}

LocalRead PlanLocalRead(const FileHandle& file, ByteRange range, ReadSink* sink,
                        uint64_t tag) {
  LocalRead r;
  r.range = range;
  r.sink = sink;
  r.tag = tag;
  if (!file.direct()) {
    r.start = range.offset;
    r.want = range.length;
    return r;
  }
  // Masks, not divisions: this runs for every read (two 64-bit divisions
  // showed in perf on the no-op ring, microbench HotPathUringNop).
  const uint64_t mask = uint64_t{file.offset_align()} - 1;
  r.start = range.offset & ~mask;
  r.want = ((range.end() + mask) & ~mask) - r.start;
  return r;
}

void AllocateBuffer(const FileHandle& file, LocalRead& r) {
  r.buffer = file.direct()
                 ? AllocateAligned(r.want, file.memory_align(), &r.dst)
                 : Slice::Allocate(r.want, &r.dst);
}

LocalRead StartLocalRead(const FileHandle& file, ByteRange range,
                         ReadSink* sink, uint64_t tag) {
  LocalRead r = PlanLocalRead(file, range, sink, tag);
  AllocateBuffer(file, r);
  return r;
}

ReadStep Advance(const FileHandle& file, LocalRead& r, int64_t result,
                 const char* how, Status* error) {
  if (result < 0) {
    const int err = static_cast<int>(-result);
    if (err == EINTR || err == EAGAIN) return ReadStep::kMore;
    *error = Status::FromErrno(
        err, std::string(how) + " of '" + file.path() + "' at offset " +
                 std::to_string(r.next_offset()) + ", " +
                 std::to_string(r.remaining()) + " bytes" +
                 (file.direct() ? " (O_DIRECT)" : ""));
    return ReadStep::kFailed;
  }
  r.done += static_cast<uint64_t>(result);
  if (r.done >= r.need()) return ReadStep::kDone;
  // End of file before the range's end. A direct read that stops inside an
  // alignment block has met the end of the file too (reads beyond it would
  // start unaligned).
  if (result == 0 || (file.direct() && r.done % file.offset_align() != 0)) {
    *error = Truncated(file, r);
    return ReadStep::kFailed;
  }
  return ReadStep::kMore;
}

Result<Slice> TakeResult(LocalRead& r, Status error) {
  if (!error.ok()) {
    r.buffer.Reset();
    return error;
  }
  if (r.start == r.range.offset && r.want == r.range.length) {
    return std::move(r.buffer);
  }
  Slice bytes = r.buffer.Sub(r.range.offset - r.start, r.range.length);
  r.buffer.Reset();
  return bytes;
}

void Complete(LocalRead& r, Status error) {
  r.sink->OnReadDone(r.tag, TakeResult(r, std::move(error)));
}

bool TryReadNowait(const FileHandle& file, LocalRead& r, Result<Slice>* out,
                   int fd) {
  iovec iov{r.next_dst(), r.remaining()};
  const ssize_t n = ::preadv2(fd >= 0 ? fd : file.fd(), &iov, 1,
                              static_cast<off_t>(r.next_offset()), RWF_NOWAIT);
  // EOPNOTSUPP/ENOSYS: no RWF_NOWAIT here; let the blocking engine decide.
  if (n < 0 && (errno == EOPNOTSUPP || errno == ENOSYS)) return false;
  Status error;
  switch (Advance(file, r, n < 0 ? -errno : n, "preadv2", &error)) {
    case ReadStep::kDone:
      *out = TakeResult(r, Status::OK());
      return true;
    case ReadStep::kFailed:
      *out = TakeResult(r, std::move(error));
      return true;
    case ReadStep::kMore:
      return false;
  }
  return false;
}

bool TryReadInline(const FileHandle& file, LocalRead& r) {
  Result<Slice> bytes = Slice();
  if (!TryReadNowait(file, r, &bytes)) return false;
  r.sink->OnReadDone(r.tag, std::move(bytes));
  return true;
}

int ReopenDescription(const FileHandle& file) {
  const std::string link = "/proc/self/fd/" + std::to_string(file.fd());
  const int fd = ::open(link.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat a {};
  struct stat b {};
  if (::fstat(fd, &a) != 0 || ::fstat(file.fd(), &b) != 0 ||
      a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace rangeio::detail
