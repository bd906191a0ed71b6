// The FAISS part of `rangeio-bench soak` (bench_soak_faiss.h).
#include "bench_soak_faiss.h"

#include <faiss/IndexFlat.h>
#include <faiss/IndexIVFFlat.h>
#include <faiss/index_io.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "rangeio/rangeio.h"
#include "rangeio_faiss/range_inverted_lists.h"

namespace rangeio::bench {
namespace {

constexpr int kDim = 32;
constexpr int kVectors = 20'000;  // 2.7 MB of codes and ids in 64 lists
constexpr int kLists = 64;
constexpr int kQueries = 16;
constexpr int kK = 10;
constexpr int kNprobe = 8;
// Its own limiter, with a byte budget a tenth of the index: a list pinned
// for good (FAISS never releases what get_single_code returns) would soon
// hold it all and stall the next read.
constexpr uint64_t kBudgetBytes = 256 << 10;

std::vector<float> RandomVectors(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n) * kDim);
  for (float& v : x) v = g(rng);
  return x;
}

// Builds the index and saves it to `path`.
void WriteIndex(const std::string& path) {
  const std::vector<float> base = RandomVectors(kVectors, 1);
  ::faiss::IndexFlatL2 quantizer(kDim);
  ::faiss::IndexIVFFlat ivf(&quantizer, kDim, kLists);
  ivf.train(kVectors, base.data());
  ivf.add(kVectors, base.data());
  ::faiss::write_index(&ivf, path.c_str());
}

struct Answers {
  std::vector<float> vectors;
  std::vector<::faiss::Index::idx_t> labels;
};

Answers Ask(::faiss::Index* index, const std::vector<float>& queries) {
  Answers a;
  a.vectors.resize(static_cast<size_t>(index->ntotal) * kDim);
  index->reconstruct_n(0, index->ntotal, a.vectors.data());
  std::vector<float> dist(static_cast<size_t>(kQueries) * kK);
  a.labels.resize(dist.size());
  index->search(kQueries, queries.data(), kK, dist.data(), a.labels.data());
  return a;
}

void NoteError(FaissSoakTotals* t, const std::string& what) {
  if (t->errors++ == 0) t->first_error = what;
}

// reconstruct_n and a search, each checked, until `until` or an error.
void Loop(::faiss::Index* ranged, const Answers& want,
          const std::vector<float>& queries,
          std::chrono::steady_clock::time_point until, FaissSoakTotals* t) {
  while (std::chrono::steady_clock::now() < until) {
    try {
      const Answers got = Ask(ranged, queries);
      if (got.vectors != want.vectors || got.labels != want.labels) {
        ++t->mismatches;
      }
      ++t->rounds;
    } catch (const std::exception& e) {
      NoteError(t, e.what());
      return;
    }
  }
}

}  // namespace

bool FaissSoakAvailable() { return true; }

void RunFaissSoak(const std::string& dir,
                  std::chrono::steady_clock::time_point until,
                  FaissSoakTotals* totals) {
  const std::string path = dir + "/rangeio-soak-ivf.index";
  try {
    WriteIndex(path);
    std::unique_ptr<::faiss::Index> memory(::faiss::read_index(path.c_str()));
    dynamic_cast<::faiss::IndexIVF&>(*memory).nprobe = kNprobe;
    const std::vector<float> queries = RandomVectors(kQueries, 2);
    const Answers want = Ask(memory.get(), queries);
    integrations::IvfOpenOptions o;
    o.reader.limiter.io_concurrency = 8;
    o.reader.limiter.response_budget_bytes = kBudgetBytes;
    auto ranged = integrations::OpenIvfIndex(path, o);
    if (!ranged.ok()) return NoteError(totals, ranged.status().ToString());
    dynamic_cast<::faiss::IndexIVF&>(**ranged).nprobe = kNprobe;
    const std::shared_ptr<Limiter> limiter =
        integrations::RangeListsOf(ranged->get())->reader().limiter();
    Loop(ranged->get(), want, queries, until, totals);
    ranged->reset();
    const Stats s = limiter->GetStats();
    if (s.in_flight != 0 || s.retained_count != 0) {
      NoteError(totals, "the FAISS index's limiter ends with " +
                            std::to_string(s.in_flight) + " in flight and " +
                            std::to_string(s.retained_count) + " retained");
    }
  } catch (const std::exception& e) {
    NoteError(totals, e.what());
  }
  std::remove(path.c_str());
}

}  // namespace rangeio::bench
