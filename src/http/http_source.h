// http_source.h (internal) — the Source over an HttpTarget, for the openers
// of protocols above HTTP (src/s3/) that fill a target and its dialect.
// Thread-safety: the source is as Source (any method from any thread).
#pragma once

#include <memory>
#include <string>

#include "http/curl_engine.h"
#include "rangeio/source.h"

namespace rangeio::detail {

// A source reading `target` through `engine`; it registers its connection
// pool size with the engine for its lifetime. With options.adaptive its
// target shares the adaptive limit of `endpoint` (EndpointLimit::Shared).
std::shared_ptr<Source> MakeHttpSource(std::shared_ptr<CurlEngine> engine,
                                       std::shared_ptr<HttpTarget> target,
                                       const std::string& endpoint);

// "scheme://host:port" of `url` (the port spelled out, default or not),
// what one adaptive limit is kept for; `url` itself if libcurl cannot
// parse it (the read then fails with libcurl's error).
std::string EndpointOf(const std::string& url);

}  // namespace rangeio::detail
