// bench_seam.cc — see bench_seam.h.
#include "bench_seam.h"

#include <utility>

#include "local/local_read.h"
#include "local/uring/uring_file.h"

namespace rangeio::bench_seam {

Result<std::shared_ptr<Source>> OpenUringNopFile(
    const std::string& path, const LocalFileOptions& options) {
  RANGEIO_ASSIGN_OR_RETURN(std::shared_ptr<const detail::FileHandle> file,
                           detail::OpenFileHandle(path, options.direct));
  return detail::MakeUringNopFile(std::move(file), options);
}

}  // namespace rangeio::bench_seam
