// The rangeio_faiss tests' indexes (test_index.h).
#include "test_index.h"

#include <faiss/IVFlib.h>
#include <faiss/IndexFlat.h>
#include <faiss/IndexIVFFlat.h>
#include <faiss/IndexIVFPQ.h>
#include <faiss/index_io.h>
#include <faiss/invlists/OnDiskInvertedLists.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>

namespace rangeio::testing {

namespace {

// Points around kLists random centres (fixed seed): clustered like real
// embeddings, so lists differ in size.
std::vector<float> Clustered(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> centres(kLists * kDim);
  for (float& c : centres) c = 4.0f * g(rng);
  std::vector<float> x(static_cast<size_t>(n) * kDim);
  for (int i = 0; i < n; ++i) {
    const int c = static_cast<int>(rng() % kLists);
    for (int j = 0; j < kDim; ++j)
      x[i * kDim + j] = centres[c * kDim + j] + g(rng);
  }
  return x;
}

}  // namespace

const Fixture& Data() {
  static const Fixture* f =
      new Fixture{Clustered(kBase, 1), Clustered(kQueries, 2)};
  return *f;
}

std::vector<faiss::Index::idx_t> Search(faiss::Index& index, int nprobe, int n,
                                        const float* q) {
  dynamic_cast<faiss::IndexIVF&>(*faiss::ivflib::extract_index_ivf(&index))
      .nprobe = nprobe;
  std::vector<float> d(static_cast<size_t>(n) * kK);
  std::vector<faiss::Index::idx_t> l(static_cast<size_t>(n) * kK);
  index.search(n, q, kK, d.data(), l.data());
  return l;
}

std::unique_ptr<faiss::IndexIVF> Build(const std::string& kind,
                                       const std::string& path, int n) {
  auto* quantizer = new faiss::IndexFlatL2(kDim);
  std::unique_ptr<faiss::IndexIVF> ivf;
  if (kind == "flat") {
    ivf = std::make_unique<faiss::IndexIVFFlat>(quantizer, kDim, kLists);
  } else {
    // 4 x 6 bits: 3-byte codes, so lists do not keep one alignment.
    auto pq =
        std::make_unique<faiss::IndexIVFPQ>(quantizer, kDim, kLists, 4, 6);
    pq->pq.cp.niter = 10;  // a test index: quality does not matter
    ivf = std::move(pq);
  }
  ivf->cp.niter = 10;
  ivf->own_fields = true;
  ivf->verbose = false;
  ivf->train(kBase, Data().base.data());
  ivf->add(n, Data().base.data());
  faiss::write_index(ivf.get(), path.c_str());
  return ivf;
}

std::string SaveOnDisk(const std::string& plain, const std::string& dir) {
  std::unique_ptr<faiss::Index> copy(faiss::read_index(plain.c_str()));
  auto* ivf = dynamic_cast<faiss::IndexIVF*>(copy.get());
  EXPECT_NE(ivf, nullptr);
  if (ivf == nullptr) return "";
  const std::string data = dir + "/lists.ivfdata";
  auto* od =
      new faiss::OnDiskInvertedLists(ivf->nlist, ivf->code_size, data.c_str());
  od->merge_from_1(ivf->invlists);
  od->filename = "/elsewhere/lists.ivfdata";
  ivf->replace_invlists(od, true);
  std::string path = dir + "/ondisk.index";
  faiss::write_index(ivf, path.c_str());
  return path;
}

void ExpectSameLabels(faiss::Index& memory, faiss::Index& ranged) {
  const float* q = Data().queries.data();
  for (int nprobe : {1, 4, kLists}) {
    SCOPED_TRACE("nprobe " + std::to_string(nprobe));
    EXPECT_EQ(Search(memory, nprobe, kQueries, q),
              Search(ranged, nprobe, kQueries, q));
  }
}

std::vector<char> ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void WriteBytes(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

size_t FindFourcc(const std::vector<char>& bytes, const char* fourcc) {
  const auto it = std::search(bytes.begin(), bytes.end(), fourcc, fourcc + 4);
  if (it == bytes.end()) {
    ADD_FAILURE() << "no \"" << fourcc << "\" in the saved index";
    return 0;
  }
  return static_cast<size_t>(it - bytes.begin());
}

uint64_t GetU64(const std::vector<char>& bytes, size_t at) {
  uint64_t v = 0;
  std::memcpy(&v, bytes.data() + at, sizeof v);
  return v;
}

void PutU64(std::vector<char>& bytes, size_t at, uint64_t v) {
  std::memcpy(bytes.data() + at, &v, sizeof v);
}

}  // namespace rangeio::testing
