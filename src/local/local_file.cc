// OpenLocalFile: opens the file once and hands it to the engine the options
// choose (pread pool or io_uring), falling back to the pread pool when the
// default engine for O_DIRECT, io_uring, cannot be set up.
#include "rangeio/local_file.h"

#include <string>

#include "local/local_read.h"
#include "local/pread/pread_file.h"
#include "local/uring/uring_file.h"
#include "rangeio/source.h"

namespace rangeio {

std::string_view LocalEngineName(LocalEngine engine) {
  switch (engine) {
    case LocalEngine::kAuto:
      return "auto";
    case LocalEngine::kPread:
      return "pread";
    case LocalEngine::kUring:
      return "uring";
  }
  return "unknown";
}

Result<LocalEngine> ParseLocalEngine(std::string_view name) {
  for (LocalEngine e :
       {LocalEngine::kAuto, LocalEngine::kPread, LocalEngine::kUring}) {
    if (name == LocalEngineName(e)) return e;
  }
  return Status::InvalidArgument("local engine '" + std::string(name) +
                                 "' is invalid: valid auto, pread, uring");
}

Result<std::shared_ptr<Source>> OpenLocalFile(const std::string& path,
                                              const LocalFileOptions& options) {
  if (path.empty()) return Status::InvalidArgument("file path is empty");
  const uint32_t threads = options.ThreadsOrDefault();
  if (threads < 1 || threads > 4096) {
    return Status::InvalidArgument(
        "LocalFileOptions.threads=" + std::to_string(threads) + " for '" +
        path + "' is invalid: valid 1..4096");
  }
  if (options.hit_threads && *options.hit_threads > 4096) {
    return Status::InvalidArgument(
        "LocalFileOptions.hit_threads=" + std::to_string(*options.hit_threads) +
        " for '" + path +
        "' is invalid: valid 0..4096, or unset for one per core beyond the "
        "caller's");
  }
  RANGEIO_ASSIGN_OR_RETURN(std::shared_ptr<const detail::FileHandle> file,
                           detail::OpenFileHandle(path, options.direct));
  const LocalEngine engine = options.engine == LocalEngine::kAuto
                                 ? DefaultLocalEngine(options.direct)
                                 : options.engine;
  if (engine == LocalEngine::kPread) {
    return detail::MakePreadFile(std::move(file), options, "");
  }
  Result<std::shared_ptr<Source>> uring = detail::MakeUringFile(file, options);
  if (uring.ok() || options.engine == LocalEngine::kUring) return uring;
  return detail::MakePreadFile(
      std::move(file), options,
      "io_uring unavailable: " + uring.status().ToString());
}

}  // namespace rangeio
