// parse_fuzz_corpus_test.cc — the parsing fuzz targets' checks
// (parse_fuzz.h) as a gtest for every build and compiler: each file of
// fuzz/corpus/{url,options,http_response}/, then seeded mutations of them.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "parse_fuzz.h"
#include "util/redact.h"

namespace rangeio::fuzz {
namespace {

using Check = std::string (*)(const uint8_t*, size_t);

std::vector<std::vector<uint8_t>> ReadCorpus(const std::string& name) {
  std::vector<std::vector<uint8_t>> corpus;
  for (const auto& entry : std::filesystem::directory_iterator(
           std::string(RANGEIO_FUZZ_CORPUS_DIR) + "/" + name)) {
    std::ifstream file(entry.path(), std::ios::binary);
    corpus.emplace_back(std::istreambuf_iterator<char>(file),
                        std::istreambuf_iterator<char>());
  }
  return corpus;
}

// Every corpus file, then 5,000 seeded mutations (bytes replaced, inserted,
// erased, corpus files spliced): a small deterministic fuzz run per build.
void Replay(const std::string& name, Check check) {
  const auto corpus = ReadCorpus(name);
  ASSERT_GE(corpus.size(), 5u) << name;
  for (const auto& in : corpus) {
    EXPECT_EQ(check(in.data(), in.size()), "")
        << name << ": " << std::string(in.begin(), in.end());
  }
  std::mt19937_64 rng(16);
  for (int i = 0; i < 5000; ++i) {
    std::vector<uint8_t> in = corpus[rng() % corpus.size()];
    const int edits = 1 + static_cast<int>(rng() % 8);
    for (int k = 0; k < edits; ++k) {
      const uint64_t op = rng() % 4;
      const size_t at = in.empty() ? 0 : rng() % in.size();
      if (op == 0 && !in.empty()) {
        in[at] = static_cast<uint8_t>(rng());
      } else if (op == 1) {
        in.insert(in.begin() + static_cast<std::ptrdiff_t>(at),
                  static_cast<uint8_t>(rng()));
      } else if (op == 2 && !in.empty()) {
        in.erase(in.begin() + static_cast<std::ptrdiff_t>(at));
      } else {
        const auto& other = corpus[rng() % corpus.size()];
        in.insert(in.end(), other.begin(), other.end());
      }
    }
    const std::string e = check(in.data(), in.size());
    ASSERT_EQ(e, "") << name << " mutation " << i << " of '"
                     << detail::ForeignText(
                            std::string_view(
                                reinterpret_cast<const char*>(in.data()),
                                in.size()),
                            4096)
                     << "'";
  }
}

TEST(ParseFuzzCorpus, Url) { Replay("url", &CheckUrlInput); }
TEST(ParseFuzzCorpus, Options) { Replay("options", &CheckOptionsInput); }
TEST(ParseFuzzCorpus, HttpResponse) {
  Replay("http_response", &CheckHttpResponseInput);
}

}  // namespace
}  // namespace rangeio::fuzz
