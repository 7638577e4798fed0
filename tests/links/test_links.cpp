// gpu::nvlink_between (collx/cuda/links.hpp) against a stand-in NVML built
// here (fake_nvml.cpp, loaded through COLLX_NVML_LIBRARY): the verdict that
// decides whether a group of several GPUs may run LL128. Each case runs in a
// child process, since NVML is loaded once per process and the fake reads
// its topology from the environment.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <collx/cuda/links.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace {

struct outcome {
  bool all = false;
  std::string why;
  int balance = 0;  // nvmlInit_v2 calls not shut down
};

/// nvlink_between(ids) in a child with `env` set (NAME=VALUE), through `library`.
outcome ask(const std::vector<std::string>& ids, const std::vector<std::pair<const char*, const char*>>& env,
            const char* library = COLLX_FAKE_NVML,
            std::chrono::milliseconds deadline = std::chrono::seconds(10)) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    setenv("COLLX_NVML_LIBRARY", library, 1);
    for (const auto& [k, v] : env) setenv(k, v, 1);
    const auto v = collx::gpu::nvlink_between(ids, deadline);
    int balance = 0;
    if (void* h = dlopen(library, RTLD_NOW | RTLD_NOLOAD)) {
      if (auto f = reinterpret_cast<int (*)()>(dlsym(h, "fake_nvml_balance"))) balance = f();
    }
    const std::string msg = std::string(v.all ? "1" : "0") + std::to_string(balance) + v.why;
    if (write(fds[1], msg.data(), msg.size()) != static_cast<ssize_t>(msg.size())) _exit(2);
    _exit(0);
  }
  close(fds[1]);
  std::string got;
  char buf[512];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<std::size_t>(n));
  close(fds[0]);
  int st = 0;
  REQUIRE(waitpid(pid, &st, 0) == pid);
  REQUIRE(WIFEXITED(st));
  REQUIRE(WEXITSTATUS(st) == 0);
  REQUIRE(got.size() >= 2);
  return {got[0] == '1', got.substr(2), got[1] - '0'};
}

const char* eight =
    "0000:18:00.0,0000:2a:00.0,0000:3a:00.0,0000:5d:00.0,0000:9a:00.0,0000:ab:00.0,0000:ba:00.0,0000:db:00.0";

}  // namespace

TEST_CASE("links: one GPU, or none, needs no NVLink and no NVML", "[links]") {
  for (const std::vector<std::string>& ids :
       {std::vector<std::string>{}, {"0000:18:00.0"}, {"0000:18:00.0", "0000:18:00.0", "0000:18:00.0"}}) {
    const auto o = ask(ids, {}, "/nonexistent/libnvidia-ml.so.1");
    CHECK(o.all);
    CHECK(o.why.empty());
  }
}

TEST_CASE("links: eight GPUs all on NVLink", "[links]") {
  const auto o = ask({"0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0", "0000:9a:00.0",
                      "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0"},
                     {{"COLLX_FAKE_NVML_GPUS", eight}});
  CHECK(o.all);
  CHECK(o.why.empty());
  CHECK(o.balance == 0);
}

TEST_CASE("links: one pair on PCIe refuses, naming the pair", "[links]") {
  const auto o =
      ask({"0000:3a:00.0", "0000:18:00.0", "0000:9a:00.0"},
          {{"COLLX_FAKE_NVML_GPUS", eight}, {"COLLX_FAKE_NVML_PCIE", "0000:9a:00.0-0000:3a:00.0"}});
  CHECK_FALSE(o.all);
  CHECK(o.why.find("0000:3a:00.0 and 0000:9a:00.0 are not joined by NVLink") != std::string::npos);
  CHECK(o.balance == 0);
  // A PCIe pair outside the group does not matter.
  const auto p =
      ask({"0000:18:00.0", "0000:2a:00.0"},
          {{"COLLX_FAKE_NVML_GPUS", eight}, {"COLLX_FAKE_NVML_PCIE", "0000:9a:00.0-0000:3a:00.0"}});
  CHECK(p.all);
}

TEST_CASE("links: a GPU NVML does not know refuses, naming it", "[links]") {
  const auto o = ask({"0000:18:00.0", "0000:c1:00.0"}, {{"COLLX_FAKE_NVML_GPUS", eight}});
  CHECK_FALSE(o.all);
  CHECK(o.why.find("does not know the GPU at PCI bus id 0000:c1:00.0") != std::string::npos);
  CHECK(o.why.find("Not Found") != std::string::npos);
  CHECK(o.balance == 0);
}

TEST_CASE("links: no NVML, or NVML failing, refuses with the reason", "[links]") {
  const std::vector<std::string> two{"0000:18:00.0", "0000:2a:00.0"};
  const auto missing = ask(two, {}, "/nonexistent/libnvidia-ml.so.1");
  CHECK_FALSE(missing.all);
  CHECK(missing.why.find("could not be loaded") != std::string::npos);
  CHECK(missing.why.find("/nonexistent/libnvidia-ml.so.1") != std::string::npos);

  const auto init = ask(two, {{"COLLX_FAKE_NVML_GPUS", eight}, {"COLLX_FAKE_NVML_FAIL", "init"}});
  CHECK_FALSE(init.all);
  CHECK(init.why.find("nvmlInit_v2 failed") != std::string::npos);

  const auto p2p = ask(two, {{"COLLX_FAKE_NVML_GPUS", eight}, {"COLLX_FAKE_NVML_FAIL", "p2p"}});
  CHECK_FALSE(p2p.all);
  CHECK(p2p.why.find("NVLink status of GPUs 0000:18:00.0 and 0000:2a:00.0 is unknown") != std::string::npos);
  CHECK(p2p.balance == 0);

  // A library without NVML's functions (the C library) is refused too.
  const auto wrong = ask(two, {}, "libc.so.6");
  CHECK_FALSE(wrong.all);
  CHECK(wrong.why.find("lacks nvmlInit_v2") != std::string::npos);
}

TEST_CASE("links: NVML that does not answer is given up on by the deadline", "[links]") {
  // The stand-in sleeps 20 s in nvmlInit_v2; the verdict must come by the
  // 100 ms deadline (checked against 10 s, far from both, so that a loaded
  // machine cannot make it flaky), as a refusal naming the deadline.
  const std::vector<std::string> two{"0000:18:00.0", "0000:2a:00.0"};
  const auto t0 = std::chrono::steady_clock::now();
  const auto stalled = ask(two, {{"COLLX_FAKE_NVML_GPUS", eight}, {"COLLX_FAKE_NVML_FAIL", "stall"}},
                           COLLX_FAKE_NVML, std::chrono::milliseconds(100));
  const auto took = std::chrono::steady_clock::now() - t0;
  CHECK_FALSE(stalled.all);
  CHECK(stalled.why.find("NVML did not answer within 100 ms") != std::string::npos);
  CHECK(took < std::chrono::seconds(10));
  // The same stand-in without the stall answers within the deadline.
  const auto prompt =
      ask(two, {{"COLLX_FAKE_NVML_GPUS", eight}}, COLLX_FAKE_NVML, std::chrono::milliseconds(5000));
  CHECK(prompt.all);
  CHECK(prompt.balance == 0);
}
