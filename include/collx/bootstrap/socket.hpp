// collx/bootstrap/socket.hpp — small RAII TCP helpers for the bootstrap.
//
// What: an owning file descriptor, "host:port" parsing, name resolution, a
// listener (port 0 = ephemeral), connect-with-retry until a deadline, and
// send_all / recv_all bounded by a deadline. IPv4 and IPv6 ("[::1]:port").
//
// Errors: collx::error with status invalid_argument (malformed address,
// unknown host), timeout (deadline passed) or system_error (OS call failed,
// connection closed or reset). Messages name the peer/address involved.
//
// Every socket is created close-on-exec (the launcher forks children that
// must not inherit the root's listener) and non-blocking: all waits go
// through poll() with a deadline, so nothing blocks forever. Sends use
// MSG_NOSIGNAL so a vanished peer raises an error instead of SIGPIPE.
//
// Thread-safety: free functions are reentrant; a socket_fd is owned by one
// thread at a time.
#pragma once

#include <collx/error.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

namespace collx::bootstrap {

using clock = std::chrono::steady_clock;

/// Owns one file descriptor and closes it on destruction. Movable only.
class socket_fd {
 public:
  socket_fd() = default;
  explicit socket_fd(int fd) noexcept : fd_(fd) {}
  socket_fd(socket_fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  socket_fd& operator=(socket_fd&& o) noexcept {
    if (this != &o) reset(std::exchange(o.fd_, -1));
    return *this;
  }
  socket_fd(const socket_fd&) = delete;
  socket_fd& operator=(const socket_fd&) = delete;
  ~socket_fd() { reset(); }

  int get() const noexcept { return fd_; }
  bool valid() const noexcept { return fd_ >= 0; }
  explicit operator bool() const noexcept { return valid(); }
  int release() noexcept { return std::exchange(fd_, -1); }
  void reset(int fd = -1) noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

/// A host (name or numeric literal, IPv6 without brackets) and a port.
struct endpoint {
  std::string host;
  std::uint16_t port = 0;
};

/// "host:port", with brackets around IPv6 literals ("[::1]:29500").
inline std::string to_string(const endpoint& e) {
  const bool v6 = e.host.find(':') != std::string::npos;
  return (v6 ? "[" + e.host + "]" : e.host) + ":" + std::to_string(e.port);
}

namespace detail {

[[noreturn]] inline void throw_errno(const std::string& what, int err) {
  throw_error(status::system_error, what + ": " + std::strerror(err));
}

/// Strict decimal port: digits only, 0..65535.
inline bool parse_port(std::string_view s, std::uint16_t& out) {
  if (s.empty() || s.size() > 5) return false;
  unsigned v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || p != s.data() + s.size() || v > 65535) return false;
  if (!std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) return false;
  out = static_cast<std::uint16_t>(v);
  return true;
}

/// Milliseconds left until `deadline`, rounded up, clamped for poll().
inline int poll_timeout_ms(clock::time_point deadline) {
  auto left = deadline - clock::now();
  if (left <= clock::duration::zero()) return 0;
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::min<long long>(ms, INT_MAX));
}

/// Waits until `fd` reports one of `events` (or an error/hangup).
/// Returns false when the deadline passed first.
inline bool wait_fd(int fd, short events, clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int r = ::poll(&p, 1, poll_timeout_ms(deadline));
    if (r > 0) return true;
    if (r == 0) {
      if (clock::now() >= deadline) return false;
      continue;
    }
    if (errno != EINTR) throw_errno("poll", errno);
  }
}

inline void set_nodelay(int fd) {
  int one = 1;
  // Bootstrap messages are small and latency-bound; Nagle only adds delay.
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

}  // namespace detail

/// Parses "host:port" or "[ipv6]:port". A bare IPv6 literal with several
/// colons is rejected as ambiguous. `what` names the source in errors.
inline endpoint parse_endpoint(std::string_view text, std::string_view what = "address") {
  auto fail = [&](const char* why) -> endpoint {
    throw_error(status::invalid_argument,
                std::string(what) + " '" + std::string(text) + "': " + why + " (expected host:port)");
  };
  endpoint e;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    auto close = text.find(']');
    if (close == std::string_view::npos) return fail("missing ']'");
    e.host = std::string(text.substr(1, close - 1));
    if (close + 1 >= text.size() || text[close + 1] != ':') return fail("missing ':port'");
    port = text.substr(close + 2);
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string_view::npos) return fail("missing ':port'");
    if (text.find(':') != colon) return fail("IPv6 addresses need brackets, e.g. [::1]:29500");
    e.host = std::string(text.substr(0, colon));
    port = text.substr(colon + 1);
  }
  if (e.host.empty()) return fail("empty host");
  if (!detail::parse_port(port, e.port)) return fail("port is not a number in 0..65535");
  return e;
}

/// A resolved socket address (IPv4 or IPv6).
struct socket_address {
  sockaddr_storage storage{};
  socklen_t length = 0;

  int family() const noexcept { return storage.ss_family; }
  const sockaddr* get() const noexcept { return reinterpret_cast<const sockaddr*>(&storage); }

  /// Numeric host, without brackets.
  std::string host() const {
    char buf[INET6_ADDRSTRLEN] = {};
    if (family() == AF_INET) {
      auto* a = reinterpret_cast<const sockaddr_in*>(&storage);
      ::inet_ntop(AF_INET, &a->sin_addr, buf, sizeof buf);
    } else if (family() == AF_INET6) {
      auto* a = reinterpret_cast<const sockaddr_in6*>(&storage);
      ::inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof buf);
    }
    return buf;
  }
  std::uint16_t port() const noexcept {
    if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
    if (family() == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
    return 0;
  }
  endpoint to_endpoint() const { return {host(), port()}; }
};

/// Resolves `e` to its first address (numeric literals need no DNS).
inline socket_address resolve(const endpoint& e, bool passive = false) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* res = nullptr;
  const std::string port = std::to_string(e.port);
  int rc = ::getaddrinfo(e.host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0 || res == nullptr) {
    const bool bad_name = rc == EAI_NONAME || rc == EAI_SERVICE || rc == EAI_FAMILY;
    throw_error(
        bad_name ? status::invalid_argument : status::system_error,
        "cannot resolve '" + e.host + "': " + (rc == EAI_SYSTEM ? std::strerror(errno) : ::gai_strerror(rc)));
  }
  socket_address a;
  std::memcpy(&a.storage, res->ai_addr, res->ai_addrlen);
  a.length = res->ai_addrlen;
  ::freeaddrinfo(res);
  return a;
}

/// Address the socket is bound to (gives the real port after binding port 0).
inline socket_address local_address(int fd) {
  socket_address a;
  a.length = sizeof a.storage;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a.storage), &a.length) != 0)
    detail::throw_errno("getsockname", errno);
  return a;
}

/// Listens on exactly the address given (0.0.0.0 / :: only when asked for).
/// Returns a non-blocking listener; read the bound port with local_address.
inline socket_fd listen_on(const endpoint& e, int backlog = 128) {
  socket_address a = resolve(e, /*passive=*/true);
  socket_fd fd(::socket(a.family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) detail::throw_errno("socket", errno);
  int one = 1;
  // Lets a restarted job rebind a fixed port still in TIME_WAIT; unlike
  // SO_REUSEPORT it does not allow two live listeners on one port.
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd.get(), a.get(), a.length) != 0)
    detail::throw_errno("cannot listen on " + to_string(e) + ": bind", errno);
  if (::listen(fd.get(), backlog) != 0) detail::throw_errno("cannot listen on " + to_string(e), errno);
  return fd;
}

/// Accepts one pending connection (non-blocking, close-on-exec, no Nagle).
/// Returns an empty socket_fd when none is pending or accept failed; errno
/// then tells which (EAGAIN: none pending).
inline socket_fd accept_connection(int listener) {
  for (;;) {
    int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      detail::set_nodelay(fd);
      return socket_fd(fd);
    }
    if (errno == EINTR) continue;
    // ECONNABORTED and friends concern only that one connection; EMFILE etc.
    // are reported as "none pending" so the caller keeps serving the others.
    return socket_fd();
  }
}

/// Connects to `e`, retrying while the peer is not listening yet (it may start
/// later) until `deadline`. `peer` names the peer in error messages.
inline socket_fd connect_until(const endpoint& e, clock::time_point deadline,
                               std::string_view peer = "peer") {
  const socket_address a = resolve(e);
  const std::string who = std::string(peer) + " " + to_string(e);
  auto backoff = std::chrono::milliseconds(5);
  int last = 0;
  for (;;) {
    socket_fd fd(::socket(a.family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd) detail::throw_errno("socket", errno);
    int err = 0;
    if (::connect(fd.get(), a.get(), a.length) != 0) {
      err = errno;
      if (err == EINPROGRESS || err == EINTR) {
        if (!detail::wait_fd(fd.get(), POLLOUT, deadline)) {
          last = ETIMEDOUT;
          break;
        }
        socklen_t len = sizeof err;
        if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      }
    }
    if (err == 0) {
      detail::set_nodelay(fd.get());
      return fd;
    }
    last = err;
    const bool retry = err == ECONNREFUSED || err == ETIMEDOUT || err == ECONNRESET || err == ECONNABORTED ||
                       err == EHOSTUNREACH || err == ENETUNREACH || err == EAGAIN || err == EADDRNOTAVAIL;
    if (!retry) detail::throw_errno("cannot connect to " + who, err);
    if (clock::now() + backoff >= deadline) break;
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(200));
  }
  throw_error(status::timeout, "could not connect to " + who + " before the deadline (last error: " +
                                   std::strerror(last ? last : ETIMEDOUT) + ")");
}

/// Sends all `len` bytes or throws (timeout / system_error).
inline void send_all(int fd, const void* data, std::size_t len, clock::time_point deadline,
                     std::string_view peer = "peer") {
  auto* p = static_cast<const char*>(data);
  while (len > 0) {
    ssize_t n = ::send(fd, p, len, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      len -= static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!detail::wait_fd(fd, POLLOUT, deadline))
        throw_error(status::timeout, "sending to " + std::string(peer) + " timed out");
      continue;
    }
    detail::throw_errno("connection to " + std::string(peer) + " lost while sending", n < 0 ? errno : EPIPE);
  }
}

/// Receives exactly `len` bytes or throws: timeout, or system_error when the
/// peer closed the connection ("closed by <peer>") or it failed.
inline void recv_all(int fd, void* data, std::size_t len, clock::time_point deadline,
                     std::string_view peer = "peer") {
  auto* p = static_cast<char*>(data);
  while (len > 0) {
    ssize_t n = ::recv(fd, p, len, 0);
    if (n > 0) {
      p += n;
      len -= static_cast<std::size_t>(n);
      continue;
    }
    if (n == 0) throw_error(status::system_error, "connection closed by " + std::string(peer));
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!detail::wait_fd(fd, POLLIN, deadline))
        throw_error(status::timeout, "waiting for " + std::string(peer) + " timed out");
      continue;
    }
    detail::throw_errno("connection to " + std::string(peer) + " lost while receiving", errno);
  }
}

}  // namespace collx::bootstrap
