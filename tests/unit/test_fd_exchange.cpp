// bootstrap/fd_exchange.hpp: a descriptor handed to another process maps the
// same memory; a wrong token gets nothing; every failure ends by its deadline.
#include <collx/bootstrap/fd_exchange.hpp>

#include <catch2/catch.hpp>

#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>

using namespace collx;
using namespace std::chrono_literals;

namespace {

int memfd_with(std::size_t bytes) {
  const int fd = ::memfd_create("collx-test", MFD_CLOEXEC);
  REQUIRE(fd >= 0);
  REQUIRE(::ftruncate(fd, static_cast<off_t>(bytes)) == 0);
  return fd;
}

bool same_file(int a, int b) {
  struct stat x {
  }, y{};
  return ::fstat(a, &x) == 0 && ::fstat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

template <class F>
std::chrono::milliseconds time_of(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
}

}  // namespace

TEST_CASE("fd exchange: another process maps the same memory through the descriptor", "[fd_exchange]") {
  constexpr std::size_t bytes = 1 << 16;
  const int fd = memfd_with(bytes);
  auto* mem = static_cast<unsigned char*>(::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  REQUIRE(mem != MAP_FAILED);
  for (std::size_t i = 0; i < bytes; ++i) mem[i] = static_cast<unsigned char>(i * 31 + 7);
  const auto token = bootstrap::random_secret();
  // Fork before the server's thread exists (a child of a threaded process
  // may only use async-signal-safe calls); the path reaches it through a pipe.
  int pipefd[2];
  REQUIRE(::pipe(pipefd) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(pipefd[1]);
    int code = 0;
    try {
      char path[256] = {};
      std::size_t have = 0;
      for (ssize_t n;
           have < sizeof path - 1 && (n = ::read(pipefd[0], path + have, sizeof path - 1 - have)) > 0;)
        have += static_cast<std::size_t>(n);
      const int got = bootstrap::fetch_fd(path, token, 10s);
      auto* m =
          static_cast<unsigned char*>(::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, got, 0));
      if (m == MAP_FAILED) code = 2;
      for (std::size_t i = 0; code == 0 && i < bytes; ++i)
        if (m[i] != static_cast<unsigned char>(i * 31 + 7)) code = 3;
      if (code == 0) m[100] = 0x5a, m[bytes - 1] = 0xa5;  // the parent must see these
    } catch (...) {
      code = 4;
    }
    ::_exit(code);
  }
  ::close(pipefd[0]);
  bootstrap::fd_server srv(fd, token);
  REQUIRE(::write(pipefd[1], srv.path().c_str(), srv.path().size()) ==
          static_cast<ssize_t>(srv.path().size()));
  ::close(pipefd[1]);
  int st = 0;
  REQUIRE(::waitpid(child, &st, 0) == child);
  REQUIRE(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 0);
  CHECK(mem[100] == 0x5a);
  CHECK(mem[bytes - 1] == 0xa5);
  CHECK(mem[101] == static_cast<unsigned char>(101 * 31 + 7));  // and nothing else changed
  CHECK(srv.served() == 1);
  ::munmap(mem, bytes);
  ::close(fd);
}

TEST_CASE("fd exchange: a wrong token gets no descriptor, the right one still does", "[fd_exchange]") {
  const int fd = memfd_with(4096);
  const auto token = bootstrap::random_secret();
  auto wrong = token;
  wrong[5] ^= 1;
  bootstrap::fd_server srv(fd, token);
  std::string msg;
  status code = status::ok;
  try {
    (void)bootstrap::fetch_fd(srv.path(), wrong, 5s);
  } catch (const error& e) {
    msg = e.what(), code = e.code();
  }
  CHECK(code == status::invalid_argument);
  CHECK(msg.find("refused the token") != std::string::npos);
  CHECK(srv.served() == 0);
  const int got = bootstrap::fetch_fd(srv.path(), token, 5s);
  CHECK(same_file(got, fd));
  CHECK(got != fd);
  CHECK(srv.served() == 1);
  ::close(got);
  ::close(fd);
}

TEST_CASE("fd exchange: no server, or one that never answers, fails by the deadline", "[fd_exchange]") {
  const auto token = bootstrap::random_secret();
  status code = status::ok;
  const auto no_server = time_of([&] {
    try {
      (void)bootstrap::fetch_fd("/tmp/collx-no-such-dir/s", token, 300ms);
    } catch (const error& e) {
      code = e.code();
    }
  });
  CHECK(code == status::timeout);
  CHECK(no_server < 5s);

  // A listening socket nobody accepts on: the connection is queued, the answer never comes.
  char dir[] = "/tmp/collx-test-XXXXXX";
  REQUIRE(::mkdtemp(dir) != nullptr);
  const std::string path = std::string(dir) + "/s";
  const int l = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  REQUIRE(::bind(l, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(::listen(l, 4) == 0);
  code = status::ok;
  std::string msg;
  const auto mute = time_of([&] {
    try {
      (void)bootstrap::fetch_fd(path, token, 300ms);
    } catch (const error& e) {
      code = e.code(), msg = e.what();
    }
  });
  CHECK(code == status::timeout);
  CHECK(msg.find("did not answer") != std::string::npos);
  CHECK(mute < 5s);
  ::close(l);
  ::unlink(path.c_str());
  ::rmdir(dir);
}

TEST_CASE("fd exchange: a silent client does not keep others waiting, and the server cleans up",
          "[fd_exchange]") {
  const int fd = memfd_with(4096);
  const auto token = bootstrap::random_secret();
  std::string path;
  {
    bootstrap::fd_server srv(fd, token, 200ms);
    path = srv.path();
    // A client that connects and says nothing.
    const int silent = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
    REQUIRE(::connect(silent, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0);
    const int got = bootstrap::fetch_fd(path, token, 5s);
    CHECK(same_file(got, fd));
    ::close(got);
    ::close(silent);
    struct stat s {};
    REQUIRE(::stat(path.c_str(), &s) == 0);
    CHECK(S_ISSOCK(s.st_mode));
    const std::string dir = path.substr(0, path.rfind('/'));
    REQUIRE(::stat(dir.c_str(), &s) == 0);
    CHECK((s.st_mode & 0777) == 0700);  // only this user reaches the socket
  }
  struct stat s {};
  CHECK(::stat(path.c_str(), &s) != 0);  // removed with its directory
  ::close(fd);
}
