// cli_options.cc — see cli_options.h.
#include "cli_options.h"

#include <charconv>
#include <map>
#include <string_view>
#include <utility>

namespace rangeio::cli {

namespace {

bool IsOptionKey(std::string_view key) {
  return Options::IsKey(key) || SourceOptions::IsKey(key);
}

// Splits "a=1,b=2" where a comma is followed by a known key and '='.
std::vector<std::string> SplitItems(const std::vector<std::string>& items) {
  std::vector<std::string> out;
  for (const std::string& item : items) {
    const std::string_view text = item;
    size_t begin = 0;
    for (size_t comma = text.find(','); comma != text.npos;
         comma = text.find(',', comma + 1)) {
      const size_t eq = text.find('=', comma + 1);
      if (eq == text.npos) break;
      if (!IsOptionKey(text.substr(comma + 1, eq - comma - 1))) continue;
      out.emplace_back(text.substr(begin, comma - begin));
      begin = comma + 1;
    }
    out.emplace_back(text.substr(begin));
  }
  return out;
}

}  // namespace

Result<CliOptions> ParseCliOptions(const std::vector<std::string>& given,
                                   SourceOptions base) {
  std::map<std::string, std::string> kv;
  for (const std::string& item : SplitItems(given)) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      return Status::InvalidArgument("option '" + item + "' is not key=value");
    }
    if (!kv.emplace(item.substr(0, eq), item.substr(eq + 1)).second) {
      return Status::InvalidArgument("option " + item.substr(0, eq) +
                                     " is given more than once");
    }
  }
  CliOptions out;
  out.source = std::move(base);
  RANGEIO_RETURN_NOT_OK(ParseOpenOptions(kv, &out.reader, &out.source));
  return out;
}

Result<uint64_t> ParseByteSize(const std::string& what,
                               const std::string& text) {
  const std::string_view s = text;
  const size_t digits = s.find_first_not_of("0123456789");
  const std::string_view number = s.substr(0, digits);
  const std::string_view suffix =
      digits == std::string_view::npos ? "" : s.substr(digits);
  uint64_t n = 0;
  const auto [end, ec] =
      std::from_chars(number.data(), number.data() + number.size(), n);
  int shift = -1;
  if (suffix.empty() || suffix == "B") shift = 0;
  if (suffix == "K" || suffix == "KiB") shift = 10;
  if (suffix == "M" || suffix == "MiB") shift = 20;
  if (suffix == "G" || suffix == "GiB") shift = 30;
  if (suffix == "T" || suffix == "TiB") shift = 40;
  if (number.empty() || ec != std::errc() || shift < 0 ||
      n > (UINT64_MAX >> shift)) {
    return Status::InvalidArgument(
        what + " '" + text +
        "' is not a size: want e.g. 4096, 64KiB, "
        "1MiB (suffix K, KiB, M, MiB, G, GiB, T, TiB)");
  }
  return n << shift;
}

}  // namespace rangeio::cli
