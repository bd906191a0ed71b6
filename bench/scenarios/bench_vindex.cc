// vindex — issue 20: a FAISS IVF search whose posting lists are range
// reads. A clustered synthetic dataset (fixed seed; 200,000 x 128 floats by
// default), ground truth by brute force, IVF-Flat and IVF-PQ (16 x 8 bits)
// with 1,024 lists, written once to $TMPDIR/rangeio-vindex and served by
// nginx through the 24 ms latency relay. Rows per index and nprobe (16, 64):
// FAISS in memory, FAISS mmap (OnDiskInvertedLists on the local file, cold
// and warm), rangeio on the local file (cold and warm), rangeio over HTTP:
// chunked with one read per list (the seed's before), rolling with one
// read per list, chunked with the planned reads, rolling with the planned
// reads (the integration's default), with the relay's straggler mixture
// rolling without and with hedge=auto, and, when the test servers run Ceph
// RGW, rolling on the index uploaded there. Each row: the median of three
// batches of all queries (batch QPS), one query per call from 8 threads
// (p50/p99), recall@10 and the bytes read. Every row's labels must equal FAISS
// in memory's for every query, or the bench fails.
#include "bench_vindex.h"

#include <faiss/IVFlib.h>
#include <faiss/IndexFlat.h>
#include <faiss/IndexIVFFlat.h>
#include <faiss/IndexIVFPQ.h>
#include <faiss/impl/io.h>
#include <faiss/index_io.h>
#include <fcntl.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <random>
#include <stdexcept>
#include <thread>

#include "bench_object.h"
#include "bench_scenarios.h"
#include "chunk_barrier.h"
#include "progress.h"
#include "rangeio_faiss/range_inverted_lists.h"

namespace rangeio::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using Labels = std::vector<::faiss::Index::idx_t>;

constexpr int kDim = 128;
constexpr int kLists = 1024;
constexpr int kClusters = 1000;  // of the data, unrelated to the lists
constexpr int kK = 10;
constexpr int kClientThreads = 8;
// Batches per row, the median reported: 3 is the fewest with a median, and
// keeps the full run near 5 minutes.
constexpr int kBatches = 3;
// One-query calls per row over HTTP (each waits a round trip): enough for
// a p99 of 400 samples in a few seconds.
constexpr int kHttpSingles = 400;
// 8 client threads x nprobe 16: 128 lists in flight for one-query calls
// (C = 64 would make every other call wait a second round trip).
constexpr uint32_t kIoConcurrency = 128;
constexpr uint64_t kBudgetBytes = 256ull << 20;
constexpr uint32_t kBudgetCount = 16384;

double Seconds(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct Dataset {
  int n = 0;
  int nq = 0;
  std::vector<float> base;
  std::vector<float> queries;
  Labels truth;
};

// Gaussian clusters around random centres: real embeddings cluster, which
// makes lists uneven, as in production.
std::vector<float> Clustered(int n, const std::vector<float>& centres,
                             uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n) * kDim);
  for (int i = 0; i < n; ++i) {
    const size_t c = rng() % kClusters;
    for (int j = 0; j < kDim; ++j) {
      x[static_cast<size_t>(i) * kDim + j] = centres[c * kDim + j] + g(rng);
    }
  }
  return x;
}

Dataset MakeDataset(int n, int nq) {
  std::mt19937 rng(20);
  std::normal_distribution<float> g(0.0f, 2.0f);
  std::vector<float> centres(static_cast<size_t>(kClusters) * kDim);
  for (float& c : centres) c = g(rng);
  Dataset d;
  d.n = n;
  d.nq = nq;
  d.base = Clustered(n, centres, 1);
  d.queries = Clustered(nq, centres, 2);
  ::faiss::IndexFlatL2 flat(kDim);
  flat.add(n, d.base.data());
  std::vector<float> dist(static_cast<size_t>(nq) * kK);
  d.truth.resize(static_cast<size_t>(nq) * kK);
  flat.search(nq, d.queries.data(), kK, dist.data(), d.truth.data());
  return d;
}

// The index `kind` of the dataset, built and saved to `path` unless a file
// of that name (the same seed and sizes) is there already.
Status EnsureIndex(const std::string& kind, const Dataset& d,
                   const std::string& path) {
  if (fs::exists(path)) return Status::OK();
  Progress::Get().Phase("vindex: building " + kind + " index");
  auto* quantizer = new ::faiss::IndexFlatL2(kDim);
  std::unique_ptr<::faiss::IndexIVF> ivf;
  if (kind == "flat") {
    ivf = std::make_unique<::faiss::IndexIVFFlat>(quantizer, kDim, kLists);
  } else {
    ivf = std::make_unique<::faiss::IndexIVFPQ>(quantizer, kDim, kLists, 16, 8);
  }
  ivf->own_fields = true;
  ivf->train(d.n, d.base.data());
  ivf->add(d.n, d.base.data());
  const std::string tmp = path + ".tmp";
  ::faiss::write_index(ivf.get(), tmp.c_str());
  fs::rename(tmp, path);
  return Status::OK();
}

// Drops `path` from the page cache (clean pages: it was written long ago or
// only read), for the cold rows.
void DropCache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))];
}

struct Measured {
  double batch_s = 0;                 // the median of the batches
  std::vector<double> batch_runs_ms;  // each batch
  bool batches_agree = true;          // every batch gave the first's labels
  Labels batch;
  std::vector<double> single_ms;
  Labels single;  // queries 0..singles-1, one per call
  uint64_t bytes = 0;
};

void SetNprobe(::faiss::Index* index, int nprobe) {
  ::faiss::ivflib::extract_index_ivf(index)->nprobe = nprobe;
}

// kBatches batches of every query (the median counts: one batch swings
// 2x on a shared machine), then `singles` one-query calls from 8 threads.
// after_batch runs after the first batch.
Measured Measure(::faiss::Index* index, const Dataset& d, int singles,
                 const std::function<void()>& before_batch = nullptr,
                 const std::function<void()>& after_batch = nullptr) {
  singles = std::min(singles, d.nq);
  Measured m;
  std::vector<float> dist(static_cast<size_t>(d.nq) * kK);
  Labels labels(static_cast<size_t>(d.nq) * kK);
  for (int b = 0; b < kBatches; ++b) {
    if (before_batch) before_batch();
    const auto t0 = Clock::now();
    index->search(d.nq, d.queries.data(), kK, dist.data(), labels.data());
    m.batch_runs_ms.push_back(Seconds(t0) * 1000);
    if (b == 0) {
      m.batch = labels;
      if (after_batch) after_batch();
    } else if (labels != m.batch) {
      m.batches_agree = false;
    }
  }
  m.batch_s = Median(m.batch_runs_ms) / 1000;
  m.single.resize(static_cast<size_t>(singles) * kK);
  std::vector<std::vector<double>> ms(kClientThreads);
  std::vector<std::string> errors(kClientThreads);
  std::vector<std::thread> threads;
  threads.reserve(kClientThreads);
  for (int t = 0; t < kClientThreads; ++t) {
    threads.emplace_back([&, t] {
      omp_set_num_threads(1);  // the client threads are the parallelism
      float dd[kK];
      try {
        for (int q = t; q < singles; q += kClientThreads) {
          const auto q0 = Clock::now();
          index->search(1, d.queries.data() + static_cast<size_t>(q) * kDim, kK,
                        dd, m.single.data() + static_cast<size_t>(q) * kK);
          ms[t].push_back(Seconds(q0) * 1000);
        }
      } catch (const std::exception& e) {
        errors[t] = e.what();  // a client thread must not throw
      }
    });
  }
  for (auto& th : threads) th.join();
  for (const std::string& e : errors) {
    if (!e.empty()) throw std::runtime_error("one-query call: " + e);
  }
  for (auto& v : ms) m.single_ms.insert(m.single_ms.end(), v.begin(), v.end());
  return m;
}

double Recall(const Labels& got, const Dataset& d) {
  size_t hit = 0;
  for (int q = 0; q < d.nq; ++q) {
    const auto* t = &d.truth[static_cast<size_t>(q) * kK];
    const auto* g = &got[static_cast<size_t>(q) * kK];
    for (int i = 0; i < kK; ++i) hit += std::count(t, t + kK, g[i]) > 0;
  }
  return static_cast<double>(hit) / (static_cast<double>(d.nq) * kK);
}

struct Context {
  const Dataset* d = nullptr;
  std::string kind;
  int nprobe = 0;
  const Measured* memory = nullptr;  // the reference row
  Report* rep = nullptr;
};

Status AddRow(const Context& c, const std::string& name, const Measured& m,
              const std::string& note) {
  if (!m.batches_agree) {
    return Status::Internal("bench vindex: row " + name +
                            ": a batch's labels differ from its first's");
  }
  if (c.memory != nullptr) {
    if (m.batch != c.memory->batch) {
      return Status::Internal("bench vindex: row " + name +
                              ": batch labels differ from FAISS in memory");
    }
    if (!std::equal(m.single.begin(), m.single.end(),
                    c.memory->single.begin())) {
      return Status::Internal("bench vindex: row " + name +
                              ": one-query labels differ from FAISS in memory");
    }
  }
  Row row{VindexRowName(c.kind, c.nprobe, name),
          m.batch_runs_ms,
          static_cast<uint64_t>(c.d->nq),
          {},
          {},
          note,
          {}};
  row.extra = {{"batch_qps", c.d->nq / m.batch_s},
               {"single_p50_ms", Quantile(m.single_ms, 0.5)},
               {"single_p99_ms", Quantile(m.single_ms, 0.99)},
               {"recall_at_10", Recall(m.batch, *c.d)},
               {"mib_read", static_cast<double>(m.bytes) / (1 << 20)}};
  c.rep->rows.push_back(std::move(row));
  return Status::OK();
}

// A rangeio row: the index opened on `url`, measured; bytes from its
// limiter.
Status RangeioRow(const Context& c, const std::string& name,
                  const std::string& url, const integrations::IvfOpenOptions& o,
                  int singles, const std::string& cold_path,
                  const std::string& what = "") {
  Progress::Get().Phase("vindex: " + c.kind + " nprobe " +
                        std::to_string(c.nprobe) + " " + name);
  // A budget that holds a batch's lists (the IVF-Flat index is ~100 MiB;
  // a list scanned by several queries of a thread's slice is kept for all
  // of them): with less, lists evicted for budget are read again one round
  // trip each (the note's "evicted").
  integrations::IvfOpenOptions opened = o;
  opened.reader.limiter.io_concurrency = kIoConcurrency;
  // Connections for every read in flight (the HTTP default is 64), and room
  // for the hedge rows' second copies.
  opened.source.http.max_connections = 2 * kIoConcurrency;
  opened.reader.limiter.response_budget_bytes = kBudgetBytes;
  opened.reader.limiter.response_budget_count = kBudgetCount;
  RANGEIO_ASSIGN_OR_RETURN(std::unique_ptr<::faiss::Index> index,
                           integrations::OpenIvfIndex(url, opened));
  SetNprobe(index.get(), c.nprobe);
  integrations::RangeInvertedLists* lists =
      integrations::RangeListsOf(index.get());
  const uint64_t b0 = lists->reader().limiter()->GetStats().physical_bytes;
  Measured m;
  integrations::ListStats batch;
  try {
    m = Measure(
        index.get(), *c.d, singles,
        [&] {
          if (!cold_path.empty()) DropCache(cold_path);
        },
        [&] { batch = lists->GetListStats(); });
  } catch (const std::exception& e) {
    return Status::IoError("bench vindex: row " + name + ": " + e.what());
  }
  m.bytes = lists->reader().limiter()->GetStats().physical_bytes - b0;
  const integrations::ListStats s = lists->GetListStats();
  const std::string note =
      what + "batch: " + std::to_string(batch.prefetch_reads) + " reads for " +
      std::to_string(batch.lists_prefetched) + " lists, shared " +
      std::to_string(batch.lists_already_held) + "; all calls: on-demand " +
      std::to_string(s.lists_on_demand) + ", evicted " +
      std::to_string(s.lists_evicted) + ", copies " +
      std::to_string(s.aligned_copies);
  return AddRow(c, name, m, note);
}

// `url` (bench.bin through a relay listener) with its last path segment
// replaced by vindex-bench/<file>.
std::string Beside(const std::string& url, const std::string& file) {
  const size_t slash = url.find_last_of('/');
  return url.substr(0, slash + 1) + "vindex-bench/" + file;
}

// The whole index over HTTP (8 MiB parts at C = 64), then FAISS's reader
// on the bytes in memory: what "FAISS in memory" costs first.
Result<double> DownloadSeconds(const std::string& url) {
  const auto t0 = Clock::now();
  RANGEIO_ASSIGN_OR_RETURN(std::shared_ptr<Source> src, OpenSource(url));
  RANGEIO_ASSIGN_OR_RETURN(Reader reader, Reader::Open(src));
  RANGEIO_ASSIGN_OR_RETURN(const uint64_t size, src->Size());
  std::vector<ByteRange> parts;
  for (uint64_t o = 0; o < size; o += 8 << 20) {
    parts.push_back({o, std::min<uint64_t>(8 << 20, size - o)});
  }
  ::faiss::VectorIOReader in;
  in.data.resize(size);
  RANGEIO_ASSIGN_OR_RETURN(RangeStream s,
                           reader.ReadRanges(parts, Delivery::kAsCompleted));
  for (;;) {
    RANGEIO_ASSIGN_OR_RETURN(std::optional<RangeResult> r, s.Next());
    if (!r) break;
    std::memcpy(in.data.data() + parts[r->index].offset, r->bytes.data(),
                r->bytes.size());
  }
  std::unique_ptr<::faiss::Index> index(::faiss::read_index(&in));
  return Seconds(t0);
}

// Median over 21 trials of the time for `parallel` one-byte reads of `url`
// issued together (1 MiB apart, planner off) to all arrive: with 1, the
// round trip through the relay; with nprobe, what a query waiting for its
// slowest list waits at least (the slowest of nprobe lognormal draws: about
// 1.7x the median at sigma 0.3 and 16 draws).
Result<double> RoundTripMs(const std::string& url, int parallel) {
  RANGEIO_ASSIGN_OR_RETURN(std::shared_ptr<Source> src, OpenSource(url));
  Options o;
  o.reader.planner = PlannerOptions::None();
  RANGEIO_ASSIGN_OR_RETURN(Reader reader, Reader::Open(src, o));
  RANGEIO_ASSIGN_OR_RETURN(const uint64_t size, src->Size());
  std::vector<double> ms;
  ms.reserve(21);
  for (int i = 0; i < 21; ++i) {
    std::vector<ByteRange> ranges;
    ranges.reserve(static_cast<size_t>(parallel));
    for (int j = 0; j < parallel; ++j) {
      ranges.push_back(
          {(static_cast<uint64_t>(i * parallel + j) << 20) % size, 1});
    }
    const auto t0 = Clock::now();
    RANGEIO_ASSIGN_OR_RETURN(RangeStream s,
                             reader.ReadRanges(ranges, Delivery::kAsCompleted));
    for (;;) {
      RANGEIO_ASSIGN_OR_RETURN(std::optional<RangeResult> got, s.Next());
      if (!got) break;
    }
    ms.push_back(Seconds(t0) * 1000);
  }
  return Quantile(ms, 0.5);
}

// The test servers bench vindex reads through, from the environment.
struct Servers {
  std::string http;       // bench.bin through the 24 ms relay
  std::string straggler;  // bench.bin through the straggler mixture
  std::string root;       // the directory nginx serves
  bool have_http = false;
  // Ceph RGW (run_servers.sh with RANGEIO_TEST_RGW): the index is uploaded
  // straight to RGW and read through its 24 ms relay, signed.
  S3Options rgw;
  std::string rgw_relay;
  std::string bucket;
  bool have_rgw = false;
};

Servers FindServers() {
  Servers sv;
  sv.http = EnvOr("", "RANGEIO_BENCH_HTTP_URL");
  sv.straggler = EnvOr("", "RANGEIO_BENCH_HTTP_STRAGGLER_URL");
  sv.root = EnvOr("", "RANGEIO_TEST_NGINX_ROOT");
  sv.have_http = !sv.http.empty() && !sv.root.empty();
  sv.rgw.endpoint = EnvOr("", "RANGEIO_TEST_RGW_ENDPOINT");
  sv.rgw.access_key_id = EnvOr("", "RANGEIO_TEST_RGW_ACCESS_KEY");
  sv.rgw.secret_access_key = EnvOr("", "RANGEIO_TEST_RGW_SECRET_KEY");
  sv.rgw_relay = EnvOr("", "RANGEIO_BENCH_RGW_ENDPOINT");
  sv.bucket = EnvOr("", "RANGEIO_TEST_S3_BUCKET");
  sv.have_rgw = sv.have_http && !sv.rgw.endpoint.empty() &&
                !sv.rgw_relay.empty() && !sv.bucket.empty();
  return sv;
}

// Where one index is: its file here, and where the test servers serve it.
struct IndexFiles {
  std::string file;     // ivf-<kind>-<vectors>.index
  std::string path;     // in the index directory
  std::string url;      // through the relay; empty without test servers
  std::string rgw_url;  // s3://<bucket>/vindex-bench/<file>
};

// Puts the index where the test servers serve it: copied into nginx's
// root unless there with its size, uploaded to RGW when it runs; sets the
// URL, and adds a line with what downloading it for FAISS in memory takes.
Status ServeIndex(const std::string& kind, const Servers& sv, IndexFiles* f,
                  Report* rep) {
  fs::create_directories(sv.root + "/vindex-bench");
  std::string served = sv.root;
  served.append("/vindex-bench/").append(f->file);
  if (!fs::exists(served) || fs::file_size(served) != fs::file_size(f->path)) {
    fs::copy_file(f->path, served, fs::copy_options::overwrite_existing);
  }
  f->url = Beside(sv.http, f->file);
  if (sv.have_rgw) {
    RANGEIO_ASSIGN_OR_RETURN(const BenchObject o,
                             BenchObject::Resolve(f->rgw_url, sv.rgw));
    RANGEIO_RETURN_NOT_OK(o.Put(f->path));
  }
  RANGEIO_ASSIGN_OR_RETURN(const double dl, DownloadSeconds(f->url));
  rep->lines.push_back("  " + kind + ": FAISS in memory first downloads " +
                       std::to_string(fs::file_size(f->path) >> 20) +
                       " MiB through the relay: " + std::to_string(dl) + " s");
  return Status::OK();
}

// The rows over HTTP at c.nprobe: the chunked baseline and the rolling
// reads, per list and planned; at nprobe 16 also RGW's and the
// stragglers' (without and with hedging), when those servers run.
Status HttpRows(const Context& c, const Servers& sv, const IndexFiles& f) {
  // The seed's "before": one read per posting list, no coalescing, a
  // chunk barrier of C (lists shared across threads, as in every row).
  // With the planner a batch is a few dozen reads, often one chunk, so
  // chunked + planner is its own row, not the baseline.
  integrations::IvfOpenOptions chunked;
  chunked.decorate = [](std::shared_ptr<Source> s) {
    return WithChunkBarrier(std::move(s), kIoConcurrency);
  };
  chunked.max_read_bytes = 1;
  RANGEIO_RETURN_NOT_OK(RangeioRow(c, "rangeio-http-chunked", f.url, chunked,
                                   kHttpSingles, "", "per-list reads, "));
  integrations::IvfOpenOptions per_list;
  per_list.max_read_bytes = 1;
  RANGEIO_RETURN_NOT_OK(RangeioRow(c, "rangeio-http-per-list", f.url, per_list,
                                   kHttpSingles, "", "per-list reads, "));
  integrations::IvfOpenOptions chunked_planned = chunked;
  chunked_planned.max_read_bytes = 0;  // the integration's plan
  RANGEIO_RETURN_NOT_OK(RangeioRow(c, "rangeio-http-chunked-planned", f.url,
                                   chunked_planned, kHttpSingles, ""));
  RANGEIO_RETURN_NOT_OK(
      RangeioRow(c, "rangeio-http", f.url, {}, kHttpSingles, ""));
  if (sv.have_rgw && c.nprobe == 16) {
    integrations::IvfOpenOptions on_rgw;
    on_rgw.source.s3 = sv.rgw;
    on_rgw.source.s3.endpoint = sv.rgw_relay;
    RANGEIO_RETURN_NOT_OK(RangeioRow(c, "rangeio-rgw", f.rgw_url, on_rgw,
                                     kHttpSingles, "", "Ceph RGW, signed, "));
  }
  if (!sv.straggler.empty() && c.nprobe == 16) {
    const std::string surl = Beside(sv.straggler, f.file);
    RANGEIO_RETURN_NOT_OK(
        RangeioRow(c, "rangeio-http-stragglers", surl, {}, kHttpSingles, ""));
    integrations::IvfOpenOptions hedged;
    hedged.reader.reader.hedge = ReaderOptions::Hedge::kAuto;
    RANGEIO_RETURN_NOT_OK(RangeioRow(c, "rangeio-http-stragglers-hedge", surl,
                                     hedged, kHttpSingles, ""));
  }
  return Status::OK();
}

// The rows at c.nprobe: FAISS in memory (the reference every other row's
// labels must equal), FAISS mmap cold and warm, rangeio on the local file
// cold and warm, then the HTTP rows when the test servers run.
Status NprobeRows(Context c, ::faiss::Index* memory, ::faiss::Index* mmapped,
                  const Servers& sv, const IndexFiles& f) {
  const int nq = c.d->nq;
  SetNprobe(memory, c.nprobe);
  Progress::Get().Phase("vindex: " + c.kind + " nprobe " +
                        std::to_string(c.nprobe) + " faiss-memory");
  const Measured mem = Measure(memory, *c.d, nq);
  RANGEIO_RETURN_NOT_OK(AddRow(c, "faiss-memory", mem, "whole index in RAM"));
  c.memory = &mem;
  SetNprobe(mmapped, c.nprobe);
  for (const bool cold : {true, false}) {
    Progress::Get().Phase("vindex: " + c.kind + " faiss-mmap");
    Measured m = Measure(mmapped, *c.d, nq, [&] {
      if (cold) DropCache(f.path);
    });
    RANGEIO_RETURN_NOT_OK(AddRow(c,
                                 cold ? "faiss-mmap-cold" : "faiss-mmap-warm",
                                 m, "IO_FLAG_MMAP: OnDiskInvertedLists"));
  }
  integrations::IvfOpenOptions local;
  RANGEIO_RETURN_NOT_OK(
      RangeioRow(c, "rangeio-local-cold", f.path, local, nq, f.path));
  RANGEIO_RETURN_NOT_OK(
      RangeioRow(c, "rangeio-local-warm", f.path, local, nq, ""));
  if (!sv.have_http) return Status::OK();
  return HttpRows(c, sv, f);
}

// Index `kind` ("flat" or "pq") of the dataset: built unless in `dir`
// already, served, its rows at each nprobe, then its verdicts (with the
// relay's round trips, measured after the rows).
Status RunKind(const std::string& kind, const Dataset& d,
               const std::string& dir, const Servers& sv, Report* rep) {
  IndexFiles f;
  f.file = "ivf-";
  f.file.append(kind).append("-").append(std::to_string(d.n)).append(".index");
  f.path = (fs::path(dir) / f.file).string();
  RANGEIO_RETURN_NOT_OK(EnsureIndex(kind, d, f.path));
  f.rgw_url = "s3://";
  f.rgw_url.append(sv.bucket).append("/vindex-bench/").append(f.file);
  if (sv.have_http) RANGEIO_RETURN_NOT_OK(ServeIndex(kind, sv, &f, rep));
  std::unique_ptr<::faiss::Index> memory(::faiss::read_index(f.path.c_str()));
  std::unique_ptr<::faiss::Index> mmapped(
      ::faiss::read_index(f.path.c_str(), ::faiss::IO_FLAG_MMAP));
  for (const int nprobe : {16, 64}) {
    RANGEIO_RETURN_NOT_OK(NprobeRows(Context{&d, kind, nprobe, nullptr, rep},
                                     memory.get(), mmapped.get(), sv, f));
  }
  double rtt = 0;
  double slowest = 0;
  if (sv.have_http) {
    RANGEIO_ASSIGN_OR_RETURN(rtt, RoundTripMs(f.url, 1));
    RANGEIO_ASSIGN_OR_RETURN(slowest, RoundTripMs(f.url, 16));
  }
  VindexVerdicts(rep, kind, d.nq, rtt, slowest);
  return Status::OK();
}

}  // namespace

Result<Report> RunVindex(const BenchOptions& options) {
  Report rep;
  rep.scenario = "vindex";
  const int n = options.vindex_vectors;
  const int nq = options.vindex_queries;
  std::string tmp = EnvOr("", "TMPDIR");
  if (tmp.empty()) tmp = "/tmp";
  const std::string dir = tmp + "/rangeio-vindex";
  fs::create_directories(dir);
  const Servers sv = FindServers();
  rep.config = {{"vectors", n},
                {"dim", kDim},
                {"queries", nq},
                {"lists", kLists},
                {"k", kK},
                {"client_threads", kClientThreads},
                {"omp_threads", omp_get_max_threads()},
                {"http_url", sv.http},
                {"index_dir", dir}};
  Progress::Get().Phase("vindex: dataset and ground truth");
  const Dataset d = MakeDataset(n, nq);
  for (const std::string kind : {"flat", "pq"}) {
    RANGEIO_RETURN_NOT_OK(RunKind(kind, d, dir, sv, &rep));
  }
  return rep;
}

}  // namespace rangeio::bench
