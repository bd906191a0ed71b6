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

}  // namespace rangeio::detail
