// collx/bootstrap/session.hpp — one rank's connection to the rendezvous root.
//
// What: join the group named by a unique id (or a root address + secret),
// then exchange small blobs with every rank: allgather and barrier. This is
// the out-of-band channel communicators use to swap addresses and handles;
// bulk data goes through the transports.
//
//   auto s = collx::bootstrap::session::connect(id, rank, size, 30s);
//   auto all = s.allgather(&mine, sizeof mine);   // size * sizeof mine bytes
//   s.barrier();
//
// Errors (collx::error):
//  * invalid_argument: bad rank/size/timeout, a blob over the root's limit,
//    or the root rejected this rank (duplicate rank, out of range).
//  * mismatch: ranks passed different lengths to one allgather, or a
//    different group size; the session stays usable after a length mismatch.
//  * timeout: the deadline passed (connect, join, or a round).
//  * peer_failure: another rank died, left or timed out; the message names it.
//  * system_error: the root is gone, or the connection failed.
// After any error other than a length mismatch the session is unusable:
// later calls rethrow the same error without touching the network.
//
// Thread-safety: a session is used by one thread at a time; distinct
// sessions are independent.
#pragma once

#include <collx/bootstrap/socket.hpp>
#include <collx/bootstrap/unique_id.hpp>
#include <collx/bootstrap/wire.hpp>
#include <collx/error.hpp>

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace collx::bootstrap {

class session {
 public:
  /// Joins the group of `size` ranks as `rank`. Retries connecting until
  /// the deadline (the root may start later), then waits, within the same
  /// deadline, until all ranks have joined. `timeout` also becomes the
  /// deadline of each later allgather/barrier (see set_timeout).
  static session connect(const unique_id& id, int rank, int size, std::chrono::milliseconds timeout) {
    root_info info = decode_unique_id(id);
    return connect(endpoint{info.address, info.port}, info.secret, rank, size, timeout);
  }

  /// Same, for a root known by address and shared secret (launcher env).
  static session connect(const endpoint& root, const secret_bytes& secret, int rank, int size,
                         std::chrono::milliseconds timeout) {
    require(size >= 1, "bootstrap connect", "size must be at least 1, got " + std::to_string(size));
    require(
        size <= rank_limit, "bootstrap connect",
        "size " + std::to_string(size) + " is over the limit of " + std::to_string(rank_limit) + " ranks");
    require(rank >= 0 && rank < size, "bootstrap connect",
            "rank " + std::to_string(rank) + " is out of range for size " + std::to_string(size));
    require(timeout.count() > 0, "bootstrap connect", "timeout must be positive");
    session s;
    s.rank_ = rank;
    s.size_ = size;
    s.timeout_ = timeout;
    s.peer_ = "root " + to_string(root);
    const auto deadline = clock::now() + timeout;
    s.guard([&] {
      s.fd_ = connect_until(root, deadline, "root");
      auto hello = wire::encode(wire::hello{secret, rank, size});
      send_all(s.fd_.get(), hello.data(), hello.size(), deadline, s.peer_);
      wire::header h;
      try {
        h = s.read_header(deadline);
      } catch (const error& e) {
        if (e.code() == status::timeout)
          throw_error(status::timeout, "rank " + std::to_string(rank) + " of " + std::to_string(size) +
                                           ": timed out after " + std::to_string(timeout.count()) +
                                           " ms waiting for all ranks to join at " + s.peer_);
        if (e.code() == status::system_error)
          throw_error(
              status::system_error,
              std::string(e.what()) + " during the handshake (wrong secret, version, or not a collx root?)");
        throw;
      }
      if (h.k == wire::kind::welcome) {
        if (h.length != 8) s.protocol_error("malformed welcome");
        std::byte b[8];
        recv_all(s.fd_.get(), b, sizeof b, deadline, s.peer_);
        s.max_blob_ = wire::detail::get(b, 8);
        return;
      }
      s.read_failure(h, deadline,
                     h.k == wire::kind::reject ? "the root rejected rank " + std::to_string(rank) + ": "
                                               : std::string());
    });
    return s;
  }

  session(session&&) noexcept = default;
  session& operator=(session&& o) noexcept {
    if (this != &o) {
      close();
      fd_ = std::move(o.fd_);
      rank_ = o.rank_;
      size_ = o.size_;
      timeout_ = o.timeout_;
      max_blob_ = o.max_blob_;
      round_ = o.round_;
      peer_ = std::move(o.peer_);
      failed_ = std::move(o.failed_);
    }
    return *this;
  }
  session(const session&) = delete;
  session& operator=(const session&) = delete;
  ~session() { close(); }

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  bool is_open() const noexcept { return fd_.valid(); }
  /// Largest blob the root accepts per rank and round.
  std::uint64_t max_blob() const noexcept { return max_blob_; }
  std::chrono::milliseconds timeout() const noexcept { return timeout_; }
  void set_timeout(std::chrono::milliseconds t) {
    require(t.count() > 0, "session::set_timeout", "timeout must be positive");
    timeout_ = t;
  }

  /// Every rank passes `len` bytes (the same len everywhere); returns
  /// size()*len bytes, rank r's at offset r*len. `mine` may be null if len
  /// is 0.
  std::vector<std::byte> allgather(const void* mine, std::size_t len) {
    check_usable("allgather");
    require(mine != nullptr || len == 0, "allgather", "null buffer with non-zero length");
    require(len <= max_blob_, "allgather",
            std::to_string(len) + " bytes exceed the root's per-rank limit of " + std::to_string(max_blob_));
    const auto deadline = clock::now() + timeout_;
    const std::uint64_t round = round_++;
    std::vector<std::byte> out;
    guard([&] {
      try {
        auto h = wire::encode(wire::header{wire::kind::contribute, status::ok, rank_, len});
        send_all(fd_.get(), h.data(), h.size(), deadline, peer_);
        if (len) send_all(fd_.get(), mine, len, deadline, peer_);
        wire::header r = read_header(deadline);
        if (r.k != wire::kind::result) return read_failure(r, deadline, std::string());
        const std::uint64_t expect = static_cast<std::uint64_t>(len) * static_cast<std::uint64_t>(size_);
        if (r.length != expect)
          protocol_error("round result of " + std::to_string(r.length) + " bytes, expected " +
                         std::to_string(expect));
        out.resize(expect);
        if (expect) recv_all(fd_.get(), out.data(), out.size(), deadline, peer_);
      } catch (const error& e) {
        if (e.code() == status::timeout)
          throw_error(status::timeout, "rank " + std::to_string(rank_) + ": allgather (round " +
                                           std::to_string(round) + ") timed out after " +
                                           std::to_string(timeout_.count()) +
                                           " ms waiting for the other ranks");
        if (e.code() == status::system_error)
          throw_error(status::system_error, std::string(e.what()) + " (rank " + std::to_string(rank_) +
                                                ", round " + std::to_string(round) + "; root process gone?)");
        throw;
      }
    });
    return out;
  }

  /// Returns once every rank has entered the barrier.
  void barrier() { allgather(nullptr, 0); }

  /// Leaves the group in order (the root tells it from a crash) and closes
  /// the connection. Idempotent; never throws.
  void close() noexcept {
    if (!fd_) return;
    if (!failed_) {
      try {
        auto h = wire::encode(wire::header{wire::kind::leave, status::ok, rank_, 0});
        send_all(fd_.get(), h.data(), h.size(), clock::now() + std::chrono::milliseconds(100), peer_);
      } catch (...) {
        // The root is gone or stalled: closing is all that is left to do.
      }
    }
    ::shutdown(fd_.get(), SHUT_WR);
    fd_.reset();
  }

 private:
  session() = default;

  void check_usable(const char* op) const {
    if (failed_) throw error(*failed_);
    if (!fd_) throw_error(status::invalid_argument, std::string(op) + ": the session is closed");
  }

  /// Runs `f`; a fatal error is remembered so later calls fail the same way.
  template <class F>
  void guard(F&& f) {
    try {
      f();
    } catch (const error& e) {
      if (e.code() != status::mismatch && e.code() != status::invalid_argument) {
        failed_ = e;
        fd_.reset();
      }
      throw;
    }
  }

  [[noreturn]] void protocol_error(const std::string& what) {
    throw_error(status::system_error, peer_ + " sent a " + what + " (protocol error)");
  }

  wire::header read_header(clock::time_point deadline) {
    std::byte b[wire::header_size];
    recv_all(fd_.get(), b, sizeof b, deadline, peer_);
    auto h = wire::decode_header(b);
    if (!h) protocol_error("malformed frame header");
    return *h;
  }

  /// Reads the text of a failure/reject frame and throws it.
  [[noreturn]] void read_failure(const wire::header& h, clock::time_point deadline,
                                 const std::string& prefix) {
    if ((h.k != wire::kind::failure && h.k != wire::kind::reject) || h.length > wire::max_text)
      protocol_error("unexpected message");
    std::string text(h.length, '\0');
    if (h.length) recv_all(fd_.get(), text.data(), text.size(), deadline, peer_);
    const status st = h.st == status::ok ? status::internal_error : h.st;
    throw_error(st, "bootstrap: " + prefix + text);
  }

  socket_fd fd_;
  int rank_ = -1;
  int size_ = 0;
  std::chrono::milliseconds timeout_{0};
  std::uint64_t max_blob_ = 0;
  std::uint64_t round_ = 0;
  std::string peer_;
  std::optional<error> failed_;
};

}  // namespace collx::bootstrap
