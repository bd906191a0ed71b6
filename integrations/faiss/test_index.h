// The small FAISS IVF indexes the rangeio_faiss tests read: 4,000 x 32
// clustered points in 16 lists, IVF-Flat or IVF-PQ, and the helpers that
// compare a ranged index with the same index in memory.
//
// Thread-safety: Data() may be called from any thread; the rest as FAISS.
#pragma once

#include <faiss/Index.h>
#include <faiss/IndexIVF.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace rangeio::testing {

constexpr int kDim = 32;
constexpr int kBase = 4000;
constexpr int kQueries = 120;
constexpr int kLists = 16;
constexpr int kK = 10;

struct Fixture {
  std::vector<float> base;     // kBase points
  std::vector<float> queries;  // kQueries points
};
const Fixture& Data();

// The labels of the kK nearest of n queries at nprobe.
std::vector<faiss::Index::idx_t> Search(faiss::Index& index, int nprobe, int n,
                                        const float* q);

// Builds `kind` ("flat" or "pq") over the first `n` points of Data().base,
// saves it as `path` and returns it.
std::unique_ptr<faiss::IndexIVF> Build(const std::string& kind,
                                       const std::string& path, int n = kBase);

// Saves the index at `plain` again with OnDiskInvertedLists ("ilod"): its
// lists in dir/lists.ivfdata, named in the index as elsewhere (found beside
// it by its file name). Returns the path of the index, dir/ondisk.index.
std::string SaveOnDisk(const std::string& plain, const std::string& dir);

// Labels of every query at nprobe 1, 4 and kLists are those of `memory`.
void ExpectSameLabels(faiss::Index& memory, faiss::Index& ranged);

// The bytes of the file at `path`, and writing them back.
std::vector<char> ReadBytes(const std::string& path);
void WriteBytes(const std::string& path, const std::vector<char>& bytes);

// The offset of the first `fourcc` (4 chars) in `bytes`; a test failure
// and 0 when there is none.
size_t FindFourcc(const std::vector<char>& bytes, const char* fourcc);

// Little-endian fields of a saved index.
uint64_t GetU64(const std::vector<char>& bytes, size_t at);
void PutU64(std::vector<char>& bytes, size_t at, uint64_t v);

}  // namespace rangeio::testing
