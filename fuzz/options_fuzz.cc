// options_fuzz.cc — libFuzzer target: Options::Parse of "key=value,..."
// text (see parse_fuzz.h). The input is the text, as bytes.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "parse_fuzz.h"
#include "rangeio/options.h"
#include "util/redact.h"

namespace rangeio::fuzz {

std::string CheckOptionsInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto o = Options::Parse(text);
  if (!o.ok()) {
    const std::string& m = o.status().message();
    if (o.status().code() != StatusCode::kInvalidArgument) {
      return "Parse failed with " + o.status().ToString();
    }
    if (!Printable(m)) {
      return "Parse's error has a control character: " + detail::ForeignText(m);
    }
    if (m.size() > kMaxErrorChars) {
      return "Parse's error has " + std::to_string(m.size()) + " characters";
    }
    return "";
  }
  if (Status st = o->Validate(); !st.ok()) {
    return "Parse accepted what Validate refuses: " + st.ToString();
  }
  const std::string printed = o->ToString();
  auto again = Options::Parse(printed);
  if (!again.ok()) {
    return "ToString '" + printed +
           "' does not parse: " + again.status().ToString();
  }
  if (again->ToString() != printed) {
    return "ToString does not round-trip: '" + printed + "' became '" +
           again->ToString() + "'";
  }
  return "";
}

}  // namespace rangeio::fuzz

#ifndef RANGEIO_FUZZ_CORPUS_TEST
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string e = rangeio::fuzz::CheckOptionsInput(data, size);
  if (!e.empty()) {
    std::fprintf(stderr, "options_fuzz: %s\n", e.c_str());
    std::abort();
  }
  return 0;
}
#endif
