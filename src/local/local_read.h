// local_read.h (internal) — what every local-file engine shares: the open
// file with its direct-I/O alignment, one read's state, and how the result of
// one read call advances it (short reads, EINTR/EAGAIN, end of file, errors).
//
// The engines (pread pool in pread/pread_file.cc, io_uring in uring/) differ
// only in where the read calls run; every rule about what a read returns
// lives here once, so every engine reports the same errors.
//
// Thread-safety: FileHandle is immutable after opening and may be shared by
// any threads. A LocalRead is owned by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "rangeio/byte_range.h"
#include "rangeio/slice.h"
#include "rangeio/source.h"
#include "rangeio/status.h"

namespace rangeio::detail {

// An open regular file; closes its descriptor when the last owner (the
// source, its threads, a ring) lets go.
class FileHandle {
 public:
  FileHandle(int fd, std::string path, uint64_t size, bool direct,
             uint32_t offset_align, uint32_t memory_align)
      : fd_(fd),
        path_(std::move(path)),
        size_(size),
        direct_(direct),
        offset_align_(offset_align),
        memory_align_(memory_align) {}
  FileHandle(const FileHandle&) = delete;
  FileHandle& operator=(const FileHandle&) = delete;
  ~FileHandle();

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }  // at open time
  bool direct() const { return direct_; }  // opened with O_DIRECT
  // Direct reads: file offsets and lengths are multiples of offset_align,
  // buffer addresses of memory_align (both powers of two). 1 when buffered.
  uint32_t offset_align() const { return offset_align_; }
  uint32_t memory_align() const { return memory_align_; }

  // "buffered" or "O_DIRECT, 512 B aligned".
  std::string Describe() const;

 private:
  const int fd_;
  const std::string path_;
  const uint64_t size_;
  const bool direct_;
  const uint32_t offset_align_;
  const uint32_t memory_align_;
};

// Opens `path` read-only (with O_DIRECT when `direct`), checks that it is a
// regular file and reads its size and, when direct, its direct-I/O alignment
// (statx STATX_DIOALIGN, kernel 6.1+; 4 KiB, a multiple of every common
// logical block size, where the kernel does not say). Errors name `path`:
// NotFound, PermissionDenied, InvalidArgument (not a regular file; O_DIRECT
// not supported by its file system).
Result<std::shared_ptr<const FileHandle>> OpenFileHandle(
    const std::string& path, bool direct);

// One read in progress: the bytes asked of the file, [start, start + want),
// read into dst, of which the caller's range is a part. Buffered reads ask
// for exactly the range; direct reads widen it to aligned bounds.
struct LocalRead {
  ByteRange range;  // what the caller asked for
  ReadSink* sink = nullptr;
  uint64_t tag = 0;
  uint64_t start = 0;  // file offset of dst[0]
  uint64_t want = 0;   // bytes to ask the file for, from start
  uint64_t done = 0;   // bytes read so far
  Slice buffer;        // owns dst; want bytes
  std::byte* dst = nullptr;

  // Bytes that must arrive: up to the range's end (a direct read's aligned
  // tail may lie past the end of the file).
  uint64_t need() const { return range.end() - start; }
  uint64_t next_offset() const { return start + done; }
  std::byte* next_dst() const { return dst + done; }
  uint64_t remaining() const { return want - done; }
};

// A read of `range` into a fresh buffer from Slice::Allocate, aligned for
// `file` when it is direct. Precondition: range.length > 0.
LocalRead StartLocalRead(const FileHandle& file, ByteRange range,
                         ReadSink* sink, uint64_t tag);

// The same read with no buffer yet (r.dst null): for an engine that picks
// the buffer later (io_uring's registered buffers), then calls
// AllocateBuffer or sets r.buffer and r.dst itself (r.want bytes, aligned
// to file.memory_align()).
LocalRead PlanLocalRead(const FileHandle& file, ByteRange range, ReadSink* sink,
                        uint64_t tag);
void AllocateBuffer(const FileHandle& file, LocalRead& r);

enum class ReadStep {
  kDone,    // every needed byte is in: Complete(r, OK)
  kMore,    // issue another read call at r.next_offset() (short read, EINTR,
            // EAGAIN)
  kFailed,  // *error says why: Complete(r, *error)
};

// Applies the result of one read call on `r` (bytes read, or -errno as
// io_uring reports it). `how` names the call in errors ("pread",
// "io_uring read"). Errors name the file, the offset and length asked for
// and the cause; a file that ends before the range does (truncated since it
// was opened) is an IoError, never short data.
ReadStep Advance(const FileHandle& file, LocalRead& r, int64_t result,
                 const char* how, Status* error);

// The caller's bytes (a sub-slice of r.buffer: no copy), or `error`.
Result<Slice> TakeResult(LocalRead& r, Status error);

// Calls r.sink with TakeResult(r, error).
void Complete(LocalRead& r, Status error);

// TryReadInline without calling r.sink: true with *out set when the read
// is finished (every byte was cached, or it failed for good). Reads through
// `fd` when it is not -1: a descriptor of the same file (ReopenDescription).
bool TryReadNowait(const FileHandle& file, LocalRead& r, Result<Slice>* out,
                   int fd = -1);

// A new open file description of `file` (through /proc/self/fd), checked to
// be the same file; -1 when it cannot be had. Buffered only. Threads that
// each read through their own description do not share its reference
// count: preads of one description from two threads bounce that count's
// cache line between their cores on every call (bench hot-cache).
int ReopenDescription(const FileHandle& file);

// One non-blocking attempt with preadv2(RWF_NOWAIT) on the calling thread,
// for buffered files. True when the read completed (every byte was cached,
// or it failed for good) and r.sink was called; false when the rest must
// be read by an engine that may block (r.done says how much is in).
bool TryReadInline(const FileHandle& file, LocalRead& r);

}  // namespace rangeio::detail
