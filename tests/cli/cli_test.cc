// The rangeio CLI end to end: `cat` over local files, nginx and s3rver for
// names with spaces, '+', '=', '%', unicode and parentheses (every byte
// checked), its errors (exit code and message), and no credential in any
// output of any error path. Runs the built binary (RANGEIO_CLI).
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "rangeio/rangeio.h"
#include "support/http_servers.h"
#include "support/http_test_util.h"

extern char** environ;

namespace rangeio {
namespace {

using ::testing::HasSubstr;
using testing::kPatternBytes;
using ::testing::Not;

constexpr char kSecret[] = "cli-test-SECRET-4f9a2c";
constexpr char kToken[] = "cli-test-TOKEN-77b1e0";

struct CliRun {
  int exit_code = -1;
  std::string out;
  std::string err;
  double seconds = 0;
};

// Runs `exe` with `args`; `env` entries replace (or, with an empty value,
// remove) the test's own variables. Killed after 60 s (a hang fails).
CliRun RunExe(const char* exe, const std::vector<std::string>& args,
              const std::map<std::string, std::string>& env) {
  std::vector<std::string> envs;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    if (env.count(kv.substr(0, kv.find('='))) == 0) envs.push_back(kv);
  }
  for (const auto& [k, v] : env) {
    if (!v.empty()) envs.push_back(k + "=" + v);
  }
  std::vector<std::string> argv_s = {exe};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (std::string& e : envs) envp.push_back(e.data());
  envp.push_back(nullptr);

  int out_pipe[2];
  int err_pipe[2];
  CliRun run;
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) {
    ADD_FAILURE() << "pipe2 failed";
    return run;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err_pipe[1], 2);
  const auto t0 = std::chrono::steady_clock::now();
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, exe, &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (rc != 0) {
    ADD_FAILURE() << "cannot run " << exe;
    return run;
  }
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&run.out, &run.err};
  int open_fds = 2;
  while (open_fds > 0) {
    const auto left =
        std::chrono::seconds(60) - (std::chrono::steady_clock::now() - t0);
    const int ms = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(left).count());
    if (ms <= 0 || poll(fds, 2, ms) <= 0) {
      kill(pid, SIGKILL);
      ADD_FAILURE() << "rangeio did not finish within 60 s";
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buf[65536];
      const ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
      } else {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (pollfd& f : fds) {
    if (f.fd >= 0) close(f.fd);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  run.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  return run;
}

CliRun RunCli(const std::vector<std::string>& args,
              const std::map<std::string, std::string>& env = {}) {
  return RunExe(RANGEIO_CLI, args, env);
}

#ifdef RANGEIO_BENCH
CliRun RunBench(const std::vector<std::string>& args) {
  return RunExe(RANGEIO_BENCH, args, {});
}
#endif

// The seeded pattern's bytes over `r` (tests/servers/seed.js).
std::string PatternBytes(ByteRange r) {
  std::string s;
  for (uint64_t i = r.offset; i < r.end(); ++i) {
    s.push_back(static_cast<char>(SimulatedByteAt(i)));
  }
  return s;
}

// Every byte outside RFC 3986's unreserved set as %XX (a path segment).
std::string EncodePath(const std::string& name) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : name) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out += {'%', kHex[c >> 4], kHex[c & 15]};
    }
  }
  return out;
}

// An S3 store of the test servers and its test user.
struct Store {
  std::string name;
  std::string endpoint;
  std::string key_id;
  std::string secret;  // what the store wants (s3rver checks none)
};

// s3rver always; Ceph RGW when it runs (required under
// RANGEIO_REQUIRE_SERVERS=1, like the other RGW tests).
std::vector<Store> Stores(const testing::TestServers& s) {
  std::vector<Store> stores = {{"s3rver", s.s3_endpoint, "S3RVER", kSecret}};
  if (testing::HasBackend(s, testing::HttpBackend::kRgwPath)) {
    stores.push_back(
        {"rgw", s.rgw_endpoint, s.rgw_access_key, s.rgw_secret_key});
  } else if (testing::TestServers::Required()) {
    ADD_FAILURE() << "RANGEIO_REQUIRE_SERVERS=1 but Ceph RGW is not running";
  }
  return stores;
}

// The AWS environment that points the CLI at `store`, with `secret` (the
// store's own unless a test wants a wrong one), and for s3rver a session
// token (RGW checks tokens only with STS, which is not set up here).
std::map<std::string, std::string> S3Env(const Store& store,
                                         const std::string& key_id = "",
                                         const std::string& secret = "") {
  std::map<std::string, std::string> env = {
      {"AWS_ACCESS_KEY_ID", key_id.empty() ? store.key_id : key_id},
      {"AWS_SECRET_ACCESS_KEY", secret.empty() ? store.secret : secret},
      {"AWS_SESSION_TOKEN", ""},
      {"AWS_ENDPOINT_URL", store.endpoint},
      {"AWS_ENDPOINT_URL_S3", ""},
      {"AWS_PROFILE", ""},
      {"AWS_REGION", "us-east-1"}};
  if (store.name == "s3rver") env["AWS_SESSION_TOKEN"] = kToken;
  return env;
}

// Names with the characters users' keys hold (as the seed's S3 keys).
const char* const kNames[] = {
    "with space.bin",
    "plus+sign.bin",
    "eq=uals.bin",
    "per%cent.bin",
    "per%20cent.bin",
    "unicod\xc3\xa9 \xe2\x98\x83.bin",
    "paren (1).bin",
    "mixed dir/a+b=c%d \xc3\xa9 \xe2\x98\x83 ~!*'()&$@,;:.bin",
};

const ByteRange kRanges[] = {{1000, 64}, {5, 3}, {kPatternBytes - 13, 13}};

std::vector<std::string> CatArgs(const std::string& url) {
  std::vector<std::string> args = {"cat", url};
  for (const ByteRange& r : kRanges) {
    args.push_back("-r");
    args.push_back(std::to_string(r.offset) + ":" + std::to_string(r.length));
  }
  return args;
}

std::string Expected() {
  std::string s;
  for (const ByteRange& r : kRanges) s += PatternBytes(r);
  return s;
}

// Writes the seeded pattern's kPatternBytes bytes to a new file at `path`.
bool WritePatternFile(const std::string& path) {
  const std::string all = PatternBytes({0, kPatternBytes});
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(all.data(), static_cast<std::streamsize>(all.size()));
  return static_cast<bool>(out);
}

TEST(CliCatTest, LocalFileByPathAndUrl) {
  const std::string dir = ::testing::TempDir() + "rangeio_cli_local";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/paren (1) %.bin";
  ASSERT_TRUE(WritePatternFile(path));
  for (const std::string& name :
       {path, "file://" + dir + "/" + EncodePath("paren (1) %.bin")}) {
    SCOPED_TRACE(name);
    const CliRun r = RunCli(CatArgs(name));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(r.out == Expected()) << "bytes differ";
  }
  const CliRun past = RunCli({"cat", path, "-r", "1048580:100"});
  EXPECT_EQ(past.exit_code, 1);
  EXPECT_THAT(past.err, HasSubstr("range 0 [1048580, 1048680)"));
  EXPECT_THAT(past.err, HasSubstr("ends past its size 1048589"));
  std::filesystem::remove_all(dir);
}

// `-o` takes Options::Parse's comma form as well as one key per flag, and
// the sizes 1 TiB is documented to allow; a comma before a word that is no
// key stays part of the value, which is then refused by name.
TEST(CliCatTest, OptionsInTheCommaFormAndTebibytes) {
  const std::string dir = ::testing::TempDir() + "rangeio_cli_comma";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/pattern.bin";
  ASSERT_TRUE(WritePatternFile(path));
  for (const std::vector<std::string>& opts :
       {std::vector<std::string>{"-o", "read-thread-num=4,planner=none"},
        std::vector<std::string>{"-o", "hedge=1ms,hedge-budget=0.5", "-o",
                                 "response-budget-bytes=1TiB"},
        std::vector<std::string>{"-o", "response-budget-bytes=1T"}}) {
    std::vector<std::string> args = CatArgs(path);
    args.insert(args.end(), opts.begin(), opts.end());
    const CliRun r = RunCli(args);
    EXPECT_EQ(r.exit_code, 0) << opts[1] << ": " << r.err;
    EXPECT_TRUE(r.out == Expected()) << opts[1] << ": bytes differ";
  }
  std::vector<std::string> bad = CatArgs(path);
  bad.insert(bad.end(), {"-o", "read-thread-num=4,bogus=1"});
  const CliRun r = RunCli(bad);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("read-thread-num"));
  EXPECT_THAT(r.err, HasSubstr("4,bogus=1"));
  std::vector<std::string> twice = CatArgs(path);
  twice.insert(twice.end(), {"-o", "planner=none,planner=local"});
  EXPECT_EQ(RunCli(twice).exit_code, 1) << "a key given twice is refused";
  std::filesystem::remove_all(dir);
}

// The product's `bench url` is the load generator alone: one row, every
// byte read once with --reads; the lab's rows (--compare) and scenarios are
// rangeio-bench's, and asking the CLI for them says where they went.
TEST(CliBenchTest, UrlIsTheLoadGeneratorAloneAndScenariosPointToRangeioBench) {
  const std::string dir = ::testing::TempDir() + "rangeio_cli_bench_url";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string file = dir + "/data.bin";
  {
    std::ofstream out(file, std::ios::binary);
    out << std::string(1 << 20, 'x');
  }
  const std::string json = dir + "/url.json";
  const CliRun r = RunCli({"bench", "url", file, "--reads", "1000", "--block",
                           "4KiB", "-q", "--json", json});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json report = nlohmann::json::parse(std::ifstream(json));
  ASSERT_EQ(report["rows"].size(), 1U) << report.dump();
  const nlohmann::json& row = report["rows"][0];
  EXPECT_EQ(row["strategy"], "rangeio");
  EXPECT_EQ(row["logical_bytes"], 1000 * 4096);
  EXPECT_EQ(row["physical_bytes"], 1000 * 4096);

  const CliRun compare = RunCli({"bench", "url", file, "--compare"});
  EXPECT_NE(compare.exit_code, 0);
  EXPECT_THAT(compare.err, HasSubstr("--compare"));
  const CliRun moved = RunCli({"bench", "straggler"});
  EXPECT_EQ(moved.exit_code, 1);
  EXPECT_THAT(moved.err, HasSubstr("run `rangeio-bench straggler`"));
  const CliRun bad = RunCli({"bench", "url", file, "--block", "3Q"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.err, HasSubstr("--block '3Q' is not a size"));
  std::filesystem::remove_all(dir);
}

#ifdef RANGEIO_BENCH
// bench local replaces a test file of the wrong size by renaming a new one
// over it: a device, a pipe or a directory given as --file is refused before
// anything is written, and stays what it was.
TEST(RangeioBenchTest, LocalRefusesToReplaceWhatIsNotARegularFile) {
  const std::string dir = ::testing::TempDir() + "rangeio_cli_bench_local";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir + "/a directory");
  const std::string fifo = dir + "/a pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : {fifo, dir + "/a directory"}) {
    SCOPED_TRACE(path);
    const auto type = std::filesystem::status(path).type();
    const CliRun r = RunBench({"local", "--file", path, "-q"});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_THAT(r.err, HasSubstr("--file '" + path + "'"));
    EXPECT_THAT(r.err, HasSubstr("is not a regular file"));
    EXPECT_EQ(std::filesystem::status(path).type(), type);
    EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  }
  std::filesystem::remove_all(dir);
}

// rangeio-bench url --compare: the same sequence through plain pread
// threads and the chunk barrier, every row reading every byte once.
TEST(RangeioBenchTest, UrlCompareAddsTheDirectAndChunkedRows) {
  const std::string dir = ::testing::TempDir() + "rangeio_bench_url";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string file = dir + "/data.bin";
  {
    std::ofstream out(file, std::ios::binary);
    out << std::string(1 << 20, 'y');
  }
  const std::string json = dir + "/url.json";
  const CliRun r = RunBench({"url", file, "--compare", "--reads", "500",
                             "--block", "4KiB", "-q", "--json", json});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("rangeio / direct reads/s"));
  const nlohmann::json report = nlohmann::json::parse(std::ifstream(json));
  ASSERT_EQ(report["rows"].size(), 3U) << report.dump();
  const char* want[] = {"rangeio", "direct", "chunked"};
  for (size_t i = 0; i < 3; ++i) {
    const nlohmann::json& row = report["rows"][i];
    EXPECT_EQ(row["strategy"], want[i]);
    EXPECT_EQ(row["logical_bytes"], 500 * 4096) << row.dump();
    EXPECT_EQ(row["physical_bytes"], 500 * 4096) << row.dump();
  }
  std::filesystem::remove_all(dir);
}
#endif  // RANGEIO_BENCH

TEST(CliCatTest, NginxNamesWithSpacesPlusEqualsPercentUnicodeParentheses) {
  RANGEIO_NEED_SERVERS(s);
  const std::string pattern = s.nginx_root + "/pattern.bin";
  for (const char* name : kNames) {
    SCOPED_TRACE(name);
    const std::string copy = s.nginx_root + "/cli-test/" + name;
    std::filesystem::create_directories(
        std::filesystem::path(copy).parent_path());
    std::filesystem::copy_file(
        pattern, copy, std::filesystem::copy_options::overwrite_existing);
    std::string url = s.nginx + "/cli-test";
    for (const auto& part : std::filesystem::path(name)) {
      url += "/" + EncodePath(part.string());
    }
    const CliRun r = RunCli(CatArgs(url));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(r.out == Expected()) << "bytes differ for " << url;
    EXPECT_THAT(r.err, HasSubstr("ranged GETs over HTTP"));
  }
  std::filesystem::remove_all(s.nginx_root + "/cli-test");
}

TEST(CliCatTest, S3KeysWithSpacesPlusEqualsPercentUnicodeParentheses) {
  RANGEIO_NEED_SERVERS(s);
  for (const Store& store : Stores(s)) {
    for (const char* key : testing::kSeededKeys) {
      SCOPED_TRACE(store.name + ": " + key);
      const CliRun r =
          RunCli(CatArgs("s3://" + s.bucket + "/" + key), S3Env(store));
      EXPECT_EQ(r.exit_code, 0) << r.err;
      EXPECT_TRUE(r.out == Expected()) << "bytes differ for " << key;
      EXPECT_THAT(r.err, HasSubstr("SigV4-signed"));
    }
  }
}

TEST(CliCatTest, OptionsReachTheSource) {
  RANGEIO_NEED_SERVERS(s);
  // The endpoint as an option instead of the environment, and a size hint
  // (no size probe): the bytes are the same.
  auto env = S3Env(Stores(s)[0]);
  env["AWS_ENDPOINT_URL"] = "";
  std::vector<std::string> args = CatArgs("s3://" + s.bucket + "/pattern.bin");
  for (const std::string& o :
       {"endpoint=" + s.s3_endpoint,
        "size-hint=" + std::to_string(kPatternBytes),
        std::string("read-thread-num=4"), std::string("addressing=path")}) {
    args.push_back("-o");
    args.push_back(o);
  }
  const CliRun r = RunCli(args, env);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.out == Expected());
  EXPECT_THAT(r.err, HasSubstr("path style at " + s.s3_endpoint));
}

// A loopback port whose accept queue is full: a connect to it gets no
// answer (the kernel drops the SYN), like a black-holed address.
class BlackHole {
 public:
  BlackHole() {
    listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (bind(listener_, reinterpret_cast<sockaddr*>(&a), len) != 0 ||
        listen(listener_, 0) != 0 ||
        getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      return;
    }
    port_ = ntohs(a.sin_port);
    // Fill the queue (never accepted): later SYNs are dropped.
    for (int& c : fillers_) {
      c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a);
    }
  }
  ~BlackHole() {
    for (int c : fillers_) close(c);
    close(listener_);
  }
  int port() const { return port_; }

 private:
  int listener_ = -1;
  int port_ = 0;
  int fillers_[2] = {-1, -1};
};

TEST(CliCatTest, UnreachableHostFailsWithinTheConnectTimeoutNamingIt) {
  BlackHole hole;
  ASSERT_NE(hole.port(), 0);
  const std::string port = std::to_string(hole.port());
  for (const std::string& url : {"http://127.0.0.1:" + port + "/a.bin",
                                 std::string("s3://bucket/key")}) {
    SCOPED_TRACE(url);
    auto env = S3Env({"none", "http://127.0.0.1:" + port, "KEY", kSecret});
    const CliRun r = RunCli(
        {"cat", url, "-r", "0:10", "-o", "connect-timeout-ms=1000"}, env);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_THAT(r.err, HasSubstr("127.0.0.1 port " + port));
    EXPECT_THAT(r.err, HasSubstr("connect_timeout 1000 ms"));
    // One attempt, not max_attempts (5) of them: at least 5 s if retried.
    EXPECT_LT(r.seconds, 4.0);
    EXPECT_THAT(r.err, Not(HasSubstr(kSecret)));
  }
}

struct ErrorCase {
  std::string what;
  std::vector<std::string> args;
  std::string says;  // the message must hold this
  bool s3_env = true;
  std::string key_id = std::string();  // empty: the store's
  std::string secret = std::string();  // empty: the store's
};

std::vector<ErrorCase> ErrorCases(const testing::TestServers& s,
                                  const Store& store) {
  const std::string obj = "s3://" + s.bucket + "/pattern.bin";
  std::vector<ErrorCase> cases = {
      {"missing key",
       {"cat", "s3://" + s.bucket + "/no such key.bin", "-r", "0:1"},
       "NoSuchKey"},
      {"missing key names it",
       {"cat", "s3://" + s.bucket + "/no such key.bin", "-r", "0:1"},
       "key 'no such key.bin'"},
      {"missing bucket",
       {"cat", "s3://no-such-bucket/k", "-r", "0:1"},
       "NoSuchBucket"},
      {"wrong access key",
       {"cat", obj, "-r", "0:1"},
       "InvalidAccessKeyId",
       true,
       "WRONGKEY",
       kSecret},
      {"past the end",
       {"cat", obj, "-r", "1048580:100"},
       "range 0 [1048580, 1048680) of '" + obj +
           "': ends past its size 1048589"},
      {"nginx 404", {"cat", s.nginx + "/no-such.bin", "-r", "0:1"}, "HTTP 404"},
      {"nginx past the end",
       {"cat", s.nginx + "/pattern.bin", "-r", "1048589:1"},
       "ends past its size 1048589"},
      {"unknown scheme, password in the URL",
       {"cat", std::string("ftp://me:") + kSecret + "@host/k", "-r", "0:1"},
       "supported are s3://, http://, https://, file://"},
      {"password in an http URL",
       {"cat", "http://me:" + std::string(kSecret) + "@127.0.0.1:1/k", "-r",
        "0:1"},
       "127.0.0.1"},
      {"bad option value",
       {"cat", obj, "-r", "0:1", "-o", "connect-timeout-ms=soon"},
       "option connect-timeout-ms='soon' is invalid"},
      {"secret given as an option, badly",
       {"cat", obj, "-r", "0:1", "-o",
        "secret-access-key=" + std::string(kSecret) + "\x01"},
       "option secret-access-key is invalid"},
      {"unknown option",
       {"cat", obj, "-r", "0:1", "-o", "no-such-option=1"},
       "unknown option 'no-such-option'"},
      {"bad range", {"cat", obj, "-r", "zero:1"}, "is not OFFSET:LENGTH"},
      {"no credentials",
       {"cat", obj, "-r", "0:1"},
       "no AWS credentials for '" + obj + "'",
       false},
      {"bad endpoint",
       {"cat", obj, "-r", "0:1", "-o", "endpoint=ftp://x"},
       "endpoint"},
  };
  if (store.name == "rgw") {
    // s3rver checks no signature; RGW does.
    cases.push_back({"wrong secret",
                     {"cat", obj, "-r", "0:1"},
                     "SignatureDoesNotMatch",
                     true,
                     "",
                     kSecret});
  }
  return cases;
}

TEST(CliCatTest, ErrorsExitOneNamingTheCauseAndNeverShowASecret) {
  RANGEIO_NEED_SERVERS(s);
  for (const Store& store : Stores(s)) {
    for (const ErrorCase& c : ErrorCases(s, store)) {
      SCOPED_TRACE(store.name + ": " + c.what);
      auto env = S3Env(store, c.key_id, c.secret);
      if (!c.s3_env) {
        env["AWS_ACCESS_KEY_ID"] = "";
        env["AWS_SECRET_ACCESS_KEY"] = "";
        env["AWS_SESSION_TOKEN"] = "";
        env["AWS_SHARED_CREDENTIALS_FILE"] = "/nonexistent/credentials";
      }
      const CliRun r = RunCli(c.args, env);
      EXPECT_EQ(r.exit_code, 1) << r.err;
      EXPECT_THAT(r.err, HasSubstr("rangeio cat: "));
      EXPECT_THAT(r.err, HasSubstr(c.says));
      EXPECT_TRUE(r.out.empty()) << "wrote data before failing";
      for (const std::string& text : {r.out, r.err}) {
        EXPECT_THAT(text, Not(HasSubstr(kSecret)));
        EXPECT_THAT(text, Not(HasSubstr(kToken)));
        EXPECT_THAT(text, Not(HasSubstr(store.secret)));
      }
    }
  }
}

}  // namespace
}  // namespace rangeio
