// collx/bootstrap/fd_exchange.hpp — handing a file descriptor to the other
// processes of a job on this host (SCM_RIGHTS over a UNIX socket).
//
// What for: memory that other processes map by descriptor — a GPU region
// exported by cuMemExportToShareableHandle (POSIX file descriptor handles), a
// memfd. The owner runs an fd_server; the bootstrap carries its path and a
// random token to the peers (both secret from anyone outside the job); a
// peer calls fetch_fd(path, token).
//
//   bootstrap::fd_server srv(region_fd, token);        // owner
//   ... allgather srv.path() and the token ...
//   int fd = bootstrap::fetch_fd(path, token, 10s);     // peer: its own descriptor
//
// Who may fetch: the socket lives in a fresh directory of mode 0700, so only
// processes of the same user reach it, and the server hands the descriptor
// only to a client that sends the token first (constant-time comparison); any
// other client gets a refusal byte and no descriptor.
//
// Errors (collx::error): fetch_fd throws status::timeout when no answer came
// by the deadline (no server yet, a server that does not answer),
// status::invalid_argument when the server refused the token,
// status::system_error for a failed system call. The server's thread never
// throws; a client that connects and says nothing is dropped after
// `client_timeout`, so it cannot stall the others for longer.
//
// Thread-safety: fetch_fd is reentrant; an fd_server is owned by one thread
// (its destructor stops the serving thread, closes the socket and removes the
// directory).
#pragma once

#include <collx/bootstrap/unique_id.hpp>
#include <collx/error.hpp>

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace collx::bootstrap {

namespace fd_detail {

inline constexpr char granted = 'K', refused = 'N';

[[noreturn]] inline void fail(const std::string& what) {
  throw_error(status::system_error, what + ": " + std::strerror(errno));
}

inline int ms_left(std::chrono::steady_clock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  return left.count() > 0 ? static_cast<int>(left.count()) : 0;
}

/// Waits until fd is ready for `events` or the deadline passes (false).
inline bool wait_ready(int fd, short events, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, ms_left(deadline));
    if (r > 0) return true;
    if (r == 0) return false;
    if (errno != EINTR) return false;
  }
}

inline sockaddr_un address_of(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.size() >= sizeof a.sun_path)
    throw_error(status::invalid_argument, "fd exchange: socket path too long: " + path);
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  return a;
}

}  // namespace fd_detail

class fd_server {
 public:
  /// Serves a duplicate of `fd` to clients presenting `token`, from a socket
  /// in a new directory under $TMPDIR (else /tmp).
  fd_server(int fd, const secret_bytes& token,
            std::chrono::milliseconds client_timeout = std::chrono::seconds(2))
      : token_(token), client_timeout_(client_timeout) {
    const char* tmp = std::getenv("TMPDIR");
    std::string dir = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/collx-fd-XXXXXX";
    if (::mkdtemp(dir.data()) == nullptr) fd_detail::fail("fd exchange: mkdtemp " + dir);
    dir_ = dir;
    path_ = dir_ + "/s";
    try {
      fd_ = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
      if (fd_ < 0) fd_detail::fail("fd exchange: dup");
      listen_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      if (listen_ < 0) fd_detail::fail("fd exchange: socket");
      const sockaddr_un a = fd_detail::address_of(path_);
      if (::bind(listen_, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0)
        fd_detail::fail("fd exchange: bind " + path_);
      if (::listen(listen_, 64) != 0) fd_detail::fail("fd exchange: listen");
      stop_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
      if (stop_ < 0) fd_detail::fail("fd exchange: eventfd");
      thread_ = std::thread([this] { serve(); });
    } catch (...) {
      release();
      throw;
    }
  }
  ~fd_server() {
    if (thread_.joinable()) {
      const std::uint64_t one = 1;
      (void)!::write(stop_, &one, sizeof one);
      thread_.join();
    }
    release();
  }
  fd_server(const fd_server&) = delete;
  fd_server& operator=(const fd_server&) = delete;

  /// Where clients connect (give it to them with the token).
  const std::string& path() const { return path_; }
  /// Clients granted the descriptor so far (counted as it is sent).
  std::size_t served() const { return served_.load(std::memory_order_relaxed); }

 private:
  void serve() {
    for (;;) {
      pollfd p[2] = {{listen_, POLLIN, 0}, {stop_, POLLIN, 0}};
      if (::poll(p, 2, -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (p[1].revents != 0) return;
      const int c = ::accept4(listen_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      answer(c);
      ::close(c);
    }
  }

  void answer(int c) {
    const auto deadline = std::chrono::steady_clock::now() + client_timeout_;
    secret_bytes got{};
    std::size_t have = 0;
    while (have < got.size()) {
      if (!fd_detail::wait_ready(c, POLLIN, deadline)) return;  // silent client: dropped
      const ssize_t n = ::recv(c, got.data() + have, got.size() - have, MSG_DONTWAIT);
      if (n > 0) have += static_cast<std::size_t>(n);
      else if (n == 0 || (errno != EINTR && errno != EAGAIN)) return;
    }
    char byte = secrets_equal(got, token_) ? fd_detail::granted : fd_detail::refused;
    iovec io{&byte, 1};
    msghdr m{};
    m.msg_iov = &io;
    m.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))]{};
    if (byte == fd_detail::granted) {
      m.msg_control = control;
      m.msg_controllen = sizeof control;
      cmsghdr* h = CMSG_FIRSTHDR(&m);
      h->cmsg_level = SOL_SOCKET;
      h->cmsg_type = SCM_RIGHTS;
      h->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(h), &fd_, sizeof(int));
    }
    if (!fd_detail::wait_ready(c, POLLOUT, deadline)) return;
    // Counted before the send: a client holding the descriptor sees the count.
    if (byte == fd_detail::granted) served_.fetch_add(1, std::memory_order_relaxed);
    (void)::sendmsg(c, &m, MSG_NOSIGNAL);
  }

  void release() {
    if (listen_ >= 0) ::close(listen_);
    if (stop_ >= 0) ::close(stop_);
    if (fd_ >= 0) ::close(fd_);
    listen_ = stop_ = fd_ = -1;
    if (!path_.empty()) ::unlink(path_.c_str());
    if (!dir_.empty()) ::rmdir(dir_.c_str());
  }

  secret_bytes token_{};
  std::chrono::milliseconds client_timeout_;
  std::string dir_, path_;
  int fd_ = -1, listen_ = -1, stop_ = -1;
  std::atomic<std::size_t> served_{0};
  std::thread thread_;
};

/// This process's own descriptor for what the server at `path` offers
/// (close it when done). Retries the connection until the deadline, so a
/// peer may call it before the owner's server is up.
inline int fetch_fd(const std::string& path, const secret_bytes& token, std::chrono::milliseconds timeout) {
  using steady = std::chrono::steady_clock;
  const auto deadline = steady::now() + timeout;
  const sockaddr_un a = fd_detail::address_of(path);
  for (;;) {
    // Non-blocking: a UNIX connect to a listener whose backlog is full would
    // otherwise block past the deadline.
    const int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0) fd_detail::fail("fd exchange: socket");
    struct closer {
      int fd;
      ~closer() { ::close(fd); }
    } guard{s};
    if (::connect(s, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
      if ((errno == ENOENT || errno == ECONNREFUSED || errno == EAGAIN || errno == EINTR) &&
          steady::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        continue;
      }
      if (errno == ENOENT || errno == ECONNREFUSED || errno == EAGAIN)
        throw_error(status::timeout, "fd exchange: no server at " + path + " within " +
                                         std::to_string(timeout.count()) + " ms");
      fd_detail::fail("fd exchange: connect " + path);
    }
    std::size_t sent = 0;
    while (sent < token.size()) {
      const ssize_t n = ::send(s, token.data() + sent, token.size() - sent, MSG_NOSIGNAL);
      if (n > 0) sent += static_cast<std::size_t>(n);
      else if (errno == EAGAIN) {
        if (!fd_detail::wait_ready(s, POLLOUT, deadline))
          throw_error(status::timeout, "fd exchange: the server at " + path + " did not read within " +
                                           std::to_string(timeout.count()) + " ms");
      } else if (errno != EINTR) {
        fd_detail::fail("fd exchange: send to " + path);
      }
    }
    if (!fd_detail::wait_ready(s, POLLIN, deadline))
      throw_error(status::timeout, "fd exchange: the server at " + path + " did not answer within " +
                                       std::to_string(timeout.count()) + " ms");
    char byte = 0;
    iovec io{&byte, 1};
    msghdr m{};
    m.msg_iov = &io;
    m.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))]{};
    m.msg_control = control;
    m.msg_controllen = sizeof control;
    ssize_t n;
    do n = ::recvmsg(s, &m, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n < 0) fd_detail::fail("fd exchange: recvmsg from " + path);
    int got = -1;
    for (cmsghdr* h = CMSG_FIRSTHDR(&m); h != nullptr; h = CMSG_NXTHDR(&m, h))
      if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS && h->cmsg_len == CMSG_LEN(sizeof(int)))
        std::memcpy(&got, CMSG_DATA(h), sizeof(int));
    if (n == 1 && byte == fd_detail::granted && got >= 0 && (m.msg_flags & MSG_CTRUNC) == 0) return got;
    if (got >= 0) ::close(got);
    if (n == 1 && byte == fd_detail::refused)
      throw_error(status::invalid_argument, "fd exchange: the server at " + path + " refused the token");
    throw_error(status::system_error, "fd exchange: the server at " + path + " closed without a descriptor");
  }
}

}  // namespace collx::bootstrap
