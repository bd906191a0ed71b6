// uring_file.h (internal) — the io_uring engine for local files.
//
// Thread-safety: the returned Source is thread-safe, like every Source.
#pragma once

#include <memory>

#include "local/local_read.h"
#include "rangeio/local_file.h"
#include "rangeio/source.h"
#include "rangeio/status.h"

namespace rangeio::detail {

// `file` read through an io_uring ring of queue depth options.threads, with
// one completion thread. Fails, naming the file and the kernel's errno, when
// the kernel does not give a ring (EPERM, ENOSYS, ENOMEM, ...).
Result<std::shared_ptr<Source>> MakeUringFile(
    std::shared_ptr<const FileHandle> file, const LocalFileOptions& options);

// The same engine with every read call replaced by IORING_OP_NOP, which
// completes at once as if it had read every byte asked for (the buffers keep
// whatever they held): the library's own cost per read, with the ring and
// its thread but no disk (bench local's no-disk rows). Not for reading data.
Result<std::shared_ptr<Source>> MakeUringNopFile(
    std::shared_ptr<const FileHandle> file, const LocalFileOptions& options);

}  // namespace rangeio::detail
