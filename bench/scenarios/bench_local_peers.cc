// bench local's peers and surroundings: fio, run as a child process, what
// the disk under the test file is, and what of the file each run reads.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_local.h"
#include "rangeio/sim.h"

namespace rangeio::bench {
namespace {

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs `cmd` and returns its standard output; empty when it cannot run.
std::string Capture(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  ::pclose(p);
  return out;
}

}  // namespace

double CpuSeconds(int who) {
  rusage ru{};
  ::getrusage(who, &ru);
  auto sec = [](const timeval& tv) {
    return static_cast<double>(tv.tv_sec) +
           static_cast<double>(tv.tv_usec) / 1e6;
  };
  return sec(ru.ru_utime) + sec(ru.ru_stime);
}

Status PrepareFile(const std::string& path, uint64_t file_bytes) {
  constexpr uint64_t kChunk = 8 << 20;  // bytes per pwrite
  struct stat st {};
  const bool exists = ::stat(path.c_str(), &st) == 0;
  // The file is replaced (a rename over the path) when its size is wrong:
  // never do that to a device, a directory or a pipe.
  if (exists && !S_ISREG(st.st_mode)) {
    return Status::InvalidArgument(
        "--file '" + path +
        "' is not a regular file (a device, directory or pipe); it needs a "
        "file it may create or rewrite, on the disk to test");
  }
  if (exists && static_cast<uint64_t>(st.st_size) == file_bytes) {
    return Status::OK();
  }
  std::fprintf(stderr, "bench local: writing %llu MiB to %s (once)\n",
               static_cast<unsigned long long>(file_bytes >> 20), path.c_str());
  const std::string tmp = path + ".tmp";
  const int fd =
      ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::FromErrno(errno, "creating '" + tmp + "'");
  std::vector<std::byte> buf(kChunk);
  for (uint64_t off = 0; off < file_bytes; off += kChunk) {
    const uint64_t chunk = std::min(kChunk, file_bytes - off);
    FillSimulatedBytes(off, {buf.data(), chunk});
    for (uint64_t done = 0; done < chunk;) {
      const ssize_t n = ::pwrite(fd, buf.data() + done, chunk - done,
                                 static_cast<off_t>(off + done));
      if (n <= 0) {
        const int err = errno;
        ::close(fd);
        return Status::FromErrno(err, "writing '" + tmp + "'");
      }
      done += static_cast<uint64_t>(n);
    }
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::FromErrno(err, "syncing '" + tmp + "'");
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    return Status::FromErrno(errno, "renaming '" + tmp + "'");
  }
  return Status::OK();
}

std::vector<Region> SplitFile(uint64_t file_bytes, uint64_t block_size,
                              size_t runs, uint64_t min_blocks) {
  const uint64_t blocks = file_bytes / block_size / runs;
  if (blocks < min_blocks) return std::vector<Region>(runs, {0, file_bytes});
  std::vector<Region> regions(runs);
  for (size_t i = 0; i < runs; ++i) {
    regions[i] = {i * blocks * block_size, blocks * block_size};
  }
  return regions;
}

Result<double> DropCache(const std::string& path, uint64_t file_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, "opening '" + path + "'");
  (void)::fdatasync(fd);
  const int err = ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  if (err != 0) {
    ::close(fd);
    return Status::FromErrno(err, "posix_fadvise(DONTNEED) '" + path + "'");
  }
  void* map = ::mmap(nullptr, file_bytes, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return 0.0;  // unknown; not worth failing for
  const auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> resident(file_bytes / page);
  double fraction = 0;
  if (::mincore(map, file_bytes, resident.data()) == 0) {
    fraction = static_cast<double>(std::count_if(
                   resident.begin(), resident.end(),
                   [](unsigned char c) { return (c & 1) != 0; })) /
               static_cast<double>(resident.size());
  }
  ::munmap(map, file_bytes);
  return fraction;
}

std::string FioVersion() {
  std::string v = Capture("fio --version 2>/dev/null");
  while (!v.empty() && (v.back() == '\n' || v.back() == '\r')) v.pop_back();
  return v.rfind("fio-", 0) == 0 ? v : std::string();
}

namespace {

// The command line of a fio run of random O_DIRECT io_uring reads; `extra`
// bounds it (a run time, or a count of bytes).
std::string FioCommand(const std::string& path, uint64_t block_size,
                       uint32_t iodepth, uint64_t offset, uint64_t bytes,
                       const std::string& extra) {
  return "fio --name=rangeio-local --filename=" + ShellQuote(path) +
         " --offset=" + std::to_string(offset) +
         " --size=" + std::to_string(bytes) +
         " --readonly --ioengine=io_uring --direct=1 --rw=randread"
         " --iodepth=" +
         std::to_string(iodepth) + " --bs=" + std::to_string(block_size) +
         extra +
         " --numjobs=1 --lat_percentiles=1 --output-format=json 2>/dev/null";
}

}  // namespace

Result<double> FioStartupCpu(const std::string& path, uint64_t block_size,
                             uint32_t iodepth) {
  const double children0 = CpuSeconds(RUSAGE_CHILDREN);
  const std::string out =
      Capture(FioCommand(path, block_size, iodepth, 0, block_size,
                         " --io_size=" + std::to_string(block_size)));
  const double cpu = CpuSeconds(RUSAGE_CHILDREN) - children0;
  if (out.find("\"jobs\"") == std::string::npos) {
    return Status::IoError("bench local: fio's one-read run printed no report");
  }
  return cpu;
}

Result<IoRow> RunFio(const std::string& path, uint64_t block_size,
                     uint32_t iodepth, int seconds, uint64_t offset,
                     uint64_t bytes, double startup_cpu) {
  const std::string cmd =
      FioCommand(path, block_size, iodepth, offset, bytes,
                 " --runtime=" + std::to_string(seconds) + " --time_based=1");
  // fio reports its job thread's CPU alone (getrusage RUSAGE_THREAD): not
  // the io_uring workers (iou-wrk) of reads the kernel could not issue
  // without blocking, which our rows count (RUSAGE_SELF). So take fio's
  // whole process tree, as reaped by pclose, less its start-up.
  const double children0 = CpuSeconds(RUSAGE_CHILDREN);
  const std::string out = Capture(cmd);
  const double fio_tree_cpu =
      std::max(0.0, CpuSeconds(RUSAGE_CHILDREN) - children0 - startup_cpu);
  const size_t brace = out.find('{');
  const nlohmann::json j = nlohmann::json::parse(
      brace == std::string::npos ? std::string() : out.substr(brace), nullptr,
      false);
  if (j.is_discarded() || !j.contains("jobs") || j["jobs"].empty()) {
    return Status::IoError("bench local: fio printed no JSON report for: " +
                           cmd);
  }
  const nlohmann::json& job = j["jobs"][0];
  const nlohmann::json& rd = job["read"];
  const nlohmann::json& pct = rd["lat_ns"]["percentile"];
  IoRow row;
  row.strategy = "fio-uring-direct";
  row.block_size = block_size;
  row.span_bytes = bytes;
  row.reads = rd.value("total_ios", uint64_t{0});
  row.seconds = job.value("job_runtime", 0.0) / 1e3;
  row.p50_us = pct.value("50.000000", 0.0) / 1e3;
  row.p99_us = pct.value("99.000000", 0.0) / 1e3;
  const double job_thread_cpu =
      (job.value("usr_cpu", 0.0) + job.value("sys_cpu", 0.0)) / 100 *
      row.seconds;
  row.cpu_seconds = fio_tree_cpu;
  char thread_note[160];
  std::snprintf(thread_note, sizeof thread_note,
                "; CPU: the whole fio process less %.0f ms of start-up (its "
                "job thread alone: %.0f%%)",
                startup_cpu * 1e3,
                fio_tree_cpu > 0 ? 100 * job_thread_cpu / fio_tree_cpu : 0.0);
  row.note = "fio --ioengine=io_uring --direct=1 --iodepth=" +
             std::to_string(iodepth) + thread_note;
  if (job.value("error", 0) != 0 || row.reads == 0) {
    return Status::IoError("bench local: fio failed (error " +
                           std::to_string(job.value("error", 0)) +
                           ") running: " + cmd);
  }
  return row;
}

std::string VirtualDevice(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "";
  const std::string link = "/sys/dev/block/" +
                           std::to_string(major(st.st_dev)) + ":" +
                           std::to_string(minor(st.st_dev));
  char buf[512];
  const ssize_t n = ::readlink(link.c_str(), buf, sizeof buf - 1);
  if (n <= 0) return "";
  const std::string target(buf, static_cast<size_t>(n));
  for (const char* v : {"virtio", "xen", "vmbus", "/virtual/"}) {
    if (target.find(v) != std::string::npos) {
      return target.substr(target.rfind('/') + 1) + " (" + v + ")";
    }
  }
  return "";
}

}  // namespace rangeio::bench
