// bench_seam.h (internal) — the one door from bench/ into the library's
// internals: what a benchmark must measure that the public API cannot open.
//
// Today that is the io_uring engine with IORING_OP_NOP in place of every
// read: the library's own cost per read with a real ring and its thread but
// no device (rangeio-bench local's no-disk rows, bench/micro's
// BM_HotPathUringNop). A public API for it would put a fake engine in front
// of users; an include path into src/ would let the bench grow private
// couplings nobody reviews. Everything else the bench does goes through
// include/rangeio/. Add to this header only what the public API cannot give
// and a benchmark cannot do without, with its reason, and keep it small.
//
// Thread-safety: the returned Source is thread-safe, like every Source.
#pragma once

#include <memory>
#include <string>

#include "rangeio/local_file.h"
#include "rangeio/source.h"
#include "rangeio/status.h"

namespace rangeio::bench_seam {

// `path` opened as OpenLocalFile opens it (O_DIRECT when options.direct),
// read through the io_uring engine with every read replaced by
// IORING_OP_NOP, which completes at once as if it had read every byte asked
// for; the buffers keep whatever they held. Queue depth options.threads.
// Not for reading data. Errors as OpenLocalFile's, naming `path`.
Result<std::shared_ptr<Source>> OpenUringNopFile(
    const std::string& path, const LocalFileOptions& options);

}  // namespace rangeio::bench_seam
