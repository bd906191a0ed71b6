// pread_file.h (internal) — the pread-pool engine for local files.
//
// Thread-safety: the returned Source is thread-safe, like every Source.
#pragma once

#include <memory>
#include <string>

#include "local/local_read.h"
#include "rangeio/local_file.h"
#include "rangeio/source.h"

namespace rangeio::detail {

// `file` read with pread on a pool of up to options.threads blocking
// threads, trying each buffered read inline first when options.try_inline.
// `why` is appended to its description (Info()) (e.g. why io_uring was not
// used); may be empty.
std::shared_ptr<Source> MakePreadFile(std::shared_ptr<const FileHandle> file,
                                      const LocalFileOptions& options,
                                      std::string why);

}  // namespace rangeio::detail
