// collx/bootstrap/root.hpp — the rendezvous root service.
//
// What: a background thread that owns a listening TCP socket, admits the
// ranks of one job (they must present the job's secret), and then serves
// rounds: every rank sends one blob, the root answers every rank with all
// blobs in rank order (an allgather; a barrier is an allgather of 0 bytes).
//
//   collx::unique_id id = collx::get_unique_id();   // like ncclGetUniqueId
//   // ship collx::to_string(id) to every rank, then each rank calls
//   // collx::bootstrap::session::connect(id, rank, size, timeout)
//
// Failure handling (the root never crashes on what a client sends):
//  * A connection must start with a 40-byte hello. Wrong magic, version or
//    secret: closed without a word. Bad size/rank, a size that disagrees with
//    the first hello, a duplicate rank: answered with a `reject` naming the
//    cause, then closed. Unauthenticated connections are capped in number
//    (past the cap the oldest is closed) and must complete their hello within
//    min(timeout, 10 s). Nothing but the hello is read before the secret
//    matched; the root never proves the secret to clients (use it on a
//    network where the root's address cannot be taken over).
//  * Per-rank blobs are bounded (bootstrap_options::max_blob, default 1 MiB);
//    a larger length prefix, an unknown frame or a second blob in one round is
//    a protocol violation of that rank. The root never allocates more than a
//    validated length.
//  * A rank whose connection closes or breaks without an orderly `leave`, or
//    that violates the protocol, or leaves while a round needs it, fails the
//    group: every remaining rank gets a `failure` naming that rank (status
//    peer_failure) instead of a round result, so nobody waits for it.
//  * Deadlines (bootstrap_options::timeout, default 5 min): all ranks must
//    join within `timeout` of the start, and a started round must complete
//    within `timeout`; otherwise the waiting ranks get a `failure` (status
//    timeout) naming the missing ranks. Between rounds, with every rank
//    connected, nobody is waiting, so the root does not time out: a job may
//    run for hours between its init and finalize barriers.
//  * Lengths that differ between ranks in one round: every rank gets a
//    `failure` with status mismatch; the group stays usable.
//
// Lifetime: the root thread ends when every admitted rank has closed its
// connection, when the join deadline passes with nobody joined, `timeout`
// after the group failed, or on stop(). Its std::thread is owned by a
// process-wide registry whose destructor (run by exit(), i.e. after main
// returns) stops and joins every root of this process, so a root never keeps
// the process alive and never runs during static destruction. A root handle
// observes and can stop the service; dropping it does not stop it. In a
// child forked after a root started, the registry leaves the parent's roots
// alone (their threads do not exist there).
//
// Thread-safety: start_root/get_unique_id and root_handle's members may be
// called from any thread.
#pragma once

#include <collx/bootstrap/socket.hpp>
#include <collx/bootstrap/unique_id.hpp>
#include <collx/bootstrap/wire.hpp>
#include <collx/error.hpp>

#include <ifaddrs.h>
#include <net/if.h>
#include <sys/eventfd.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace collx {

struct bootstrap_options {
  /// Address the root listens on; never all interfaces unless "0.0.0.0" or
  /// "::" is given, in which case the id advertises this host's first
  /// non-loopback address of that family.
  std::string address = "127.0.0.1";
  std::uint16_t port = 0;  // 0 = ephemeral; the id carries the bound port
  /// Join deadline, per-round deadline and post-failure linger.
  std::chrono::milliseconds timeout = std::chrono::minutes(5);
  /// Largest blob one rank may contribute to a round.
  std::uint64_t max_blob = bootstrap::wire::default_max_blob;
  /// Largest group the root admits.
  int max_ranks = 4096;
};

namespace bootstrap {
namespace detail {

struct root_shared {
  socket_fd wake;  // eventfd the loop polls; stop() writes it
  std::atomic<bool> stop_requested{false};
  root_info info;  // what the id advertises

  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  std::string outcome;

  void request_stop() noexcept {
    stop_requested.store(true);
    std::uint64_t one = 1;
    [[maybe_unused]] ssize_t r = ::write(wake.get(), &one, sizeof one);
  }
  void finish(std::string why) {
    std::lock_guard lk(m);
    done = true;
    outcome = std::move(why);
    cv.notify_all();
  }
  bool is_done() {
    std::lock_guard lk(m);
    return done;
  }
};

/// The root's event loop: one thread, poll() over the listener and every
/// connection, non-blocking I/O with per-connection buffers, so a slow or
/// hostile client cannot stall the others.
class root_loop {
 public:
  root_loop(root_shared& s, socket_fd listener, const bootstrap_options& o)
      : s_(s), listener_(std::move(listener)), opt_(o) {}

  /// Runs until the service is finished; returns why it ended.
  std::string run() {
    start_ = clock::now();
    for (;;) {
      if (s_.stop_requested.load()) {
        drain_all();
        return "stopped";
      }
      const auto now = clock::now();
      expire(now);
      if (finished(now)) {
        drain_all();
        return outcome_.empty() ? "all ranks left" : outcome_;
      }
      poll_once();
      std::erase_if(conns_, [](const std::unique_ptr<conn>& c) { return !c->fd; });
    }
  }

 private:
  using buffer = std::shared_ptr<const std::vector<std::byte>>;
  enum class phase { hello, joined, left, rejected };
  enum class slot { empty, live, left, gone };

  struct conn {
    socket_fd fd;
    phase ph = phase::hello;
    int rank = -1;
    clock::time_point since;
    std::array<std::byte, wire::hello_size> hello{};
    std::array<std::byte, wire::header_size> head{};
    std::size_t got = 0;  // bytes of hello / head / payload received so far
    bool in_payload = false;
    wire::header h;
    std::vector<std::byte> payload;
    std::deque<buffer> out;
    std::size_t out_off = 0;
    bool contributed = false;
    std::vector<std::byte> blob;
  };

  static constexpr std::size_t max_unauthenticated = 128;

  std::chrono::milliseconds hello_timeout() const {
    return std::min<std::chrono::milliseconds>(opt_.timeout, std::chrono::seconds(10));
  }

  // ---- deadlines ---------------------------------------------------------

  void expire(clock::time_point now) {
    for (auto& c : conns_)
      if (c->fd && (c->ph == phase::hello || c->ph == phase::rejected) && now >= c->since + hello_timeout())
        c->fd.reset();
    if (!formed_ && !failed_ && joined_ > 0 && now >= start_ + opt_.timeout) {
      fail_group(status::timeout, first_with(slot::empty),
                 "only " + std::to_string(joined_) + " of " + std::to_string(size_) +
                     " ranks joined within " + std::to_string(opt_.timeout.count()) +
                     " ms; missing: " + list_ranks(slot::empty, false));
    }
    if (formed_ && !failed_ && contributed_ > 0 && now >= round_start_ + opt_.timeout) {
      fail_group(status::timeout, first_missing_contribution(),
                 "round " + std::to_string(round_) + " timed out after " +
                     std::to_string(opt_.timeout.count()) +
                     " ms; not contributed: " + list_ranks(slot::live, true));
    }
  }

  bool finished(clock::time_point now) {
    const bool any_admitted = std::any_of(conns_.begin(), conns_.end(), [](const std::unique_ptr<conn>& c) {
      return c->fd && (c->ph == phase::joined || c->ph == phase::left || c->ph == phase::rejected);
    });
    if (failed_) return !any_admitted || now >= failed_at_ + opt_.timeout;
    if (formed_) return !any_admitted;
    if (joined_ == 0 && now >= start_ + opt_.timeout) {
      outcome_ = "no rank joined within " + std::to_string(opt_.timeout.count()) + " ms";
      return true;
    }
    return false;
  }

  clock::time_point next_deadline() const {
    auto d = clock::now() + std::chrono::seconds(60);
    for (auto& c : conns_)
      if (c->fd && (c->ph == phase::hello || c->ph == phase::rejected))
        d = std::min(d, c->since + hello_timeout());
    if (!formed_ && !failed_) d = std::min(d, start_ + opt_.timeout);
    if (formed_ && !failed_ && contributed_ > 0) d = std::min(d, round_start_ + opt_.timeout);
    if (failed_) d = std::min(d, failed_at_ + opt_.timeout);
    if (accept_paused_until_ > clock::now()) d = std::min(d, accept_paused_until_);
    return d;
  }

  // ---- I/O ---------------------------------------------------------------

  void poll_once() {
    std::vector<pollfd> fds;
    fds.reserve(conns_.size() + 2);
    fds.push_back({s_.wake.get(), POLLIN, 0});
    // While accept() fails for lack of descriptors the pending connection
    // stays readable; pausing the listener avoids spinning on it.
    fds.push_back({listener_.get(), static_cast<short>(clock::now() < accept_paused_until_ ? 0 : POLLIN), 0});
    for (auto& c : conns_) {
      short ev = POLLIN;
      if (!c->out.empty()) ev |= POLLOUT;
      fds.push_back({c->fd.get(), ev, 0});
    }
    const std::size_t n = conns_.size();
    int r = ::poll(fds.data(), fds.size(), poll_timeout_ms(next_deadline()));
    if (r < 0) {
      if (errno == EINTR) return;
      throw_errno("poll", errno);
    }
    if (fds[0].revents) {
      std::uint64_t v;
      [[maybe_unused]] ssize_t k = ::read(s_.wake.get(), &v, sizeof v);
    }
    for (std::size_t i = 0; i < n; ++i) {
      conn* c = conns_[i].get();
      const short re = fds[i + 2].revents;
      if (!c->fd || re == 0) continue;
      if (re & (POLLIN | POLLHUP | POLLERR)) on_readable(*c);
      if (c->fd && (re & POLLOUT)) flush(*c);
    }
    if (fds[1].revents) accept_all();
  }

  void accept_all() {
    for (int i = 0; i < 64; ++i) {
      errno = 0;
      socket_fd fd = accept_connection(listener_.get());
      if (!fd) {
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
          accept_paused_until_ = clock::now() + std::chrono::milliseconds(100);
        return;
      }
      const auto pending = std::count_if(conns_.begin(), conns_.end(), [](const std::unique_ptr<conn>& c) {
        return c->fd && c->ph == phase::hello;
      });
      // The poll set stays bounded: past the cap the oldest connection that
      // has not said hello is closed, not the new one. A real rank says hello
      // as soon as it connects, so a flood of idle connections cannot lock it
      // out of the job.
      if (static_cast<std::size_t>(pending) >= max_unauthenticated) {
        conn* oldest = nullptr;
        for (auto& c : conns_)
          if (c->fd && c->ph == phase::hello && (oldest == nullptr || c->since < oldest->since))
            oldest = c.get();
        if (oldest != nullptr) oldest->fd.reset();
      }
      auto c = std::make_unique<conn>();
      c->fd = std::move(fd);
      c->since = clock::now();
      conns_.push_back(std::move(c));
    }
  }

  /// Reads what is available; returns after EAGAIN or when the connection
  /// ended. A connection is never more than one frame ahead of the round,
  /// so this loop is bounded by the blob limit.
  void on_readable(conn& c) {
    std::byte scratch[4096];
    while (c.fd) {
      std::byte* dst;
      std::size_t want;
      if (c.ph == phase::hello) {
        dst = c.hello.data() + c.got;
        want = c.hello.size() - c.got;
      } else if (c.ph == phase::joined && !c.in_payload) {
        dst = c.head.data() + c.got;
        want = c.head.size() - c.got;
      } else if (c.ph == phase::joined) {
        dst = c.payload.data() + c.got;
        want = c.payload.size() - c.got;
      } else {  // left / rejected: anything more is ignored
        dst = scratch;
        want = sizeof scratch;
      }
      ssize_t n = ::recv(c.fd.get(), dst, want, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n <= 0) {
        lost(c, n == 0 ? "closed its connection without leaving the group (process exited or crashed?)"
                       : std::string("lost its connection: ") + std::strerror(errno));
        return;
      }
      if (c.ph == phase::left || c.ph == phase::rejected) continue;
      c.got += static_cast<std::size_t>(n);
      if (c.ph == phase::hello) {
        if (c.got == c.hello.size()) on_hello(c);
      } else if (!c.in_payload) {
        if (c.got == c.head.size()) on_header(c);
      } else if (c.got == c.payload.size()) {
        c.in_payload = false;
        c.got = 0;
        on_frame(c);
      }
    }
  }

  void enqueue(conn& c, const buffer& b) {
    c.out.push_back(b);
    flush(c);
  }

  void flush(conn& c) {
    while (c.fd && !c.out.empty()) {
      const auto& b = *c.out.front();
      ssize_t n = ::send(c.fd.get(), b.data() + c.out_off, b.size() - c.out_off, MSG_NOSIGNAL);
      if (n >= 0) {
        c.out_off += static_cast<std::size_t>(n);
        if (c.out_off == b.size()) {
          c.out.pop_front();
          c.out_off = 0;
        }
        continue;
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      lost(c, std::string("lost its connection: ") + std::strerror(errno));
      return;
    }
    if (c.fd && c.ph == phase::rejected) c.fd.reset();  // reason delivered
  }

  /// On stop/finish: push out what is queued without waiting, and consume
  /// unread input so that closing sends FIN rather than RST (an RST could
  /// make a client lose a failure message it has not read yet).
  void drain_all() {
    for (auto& c : conns_) {
      if (!c->fd) continue;
      flush(*c);
      if (!c->fd) continue;
      std::byte scratch[4096];
      for (int i = 0; i < 256 && ::recv(c->fd.get(), scratch, sizeof scratch, 0) > 0; ++i) {
      }
      ::shutdown(c->fd.get(), SHUT_WR);
      c->fd.reset();
    }
  }

  static buffer make_frame(wire::kind k, status st, int rank, std::string_view text) {
    text = text.substr(0, wire::max_text);
    auto b = std::make_shared<std::vector<std::byte>>(wire::header_size + text.size());
    auto h = wire::encode(wire::header{k, st, rank, text.size()});
    std::copy(h.begin(), h.end(), b->begin());
    std::memcpy(b->data() + wire::header_size, text.data(), text.size());
    return b;
  }

  // ---- protocol ----------------------------------------------------------

  void on_hello(conn& c) {
    auto h = wire::decode_hello(c.hello.data());
    if (!h || !secrets_equal(h->secret, s_.info.secret)) {
      c.fd.reset();  // not one of ours: say nothing
      return;
    }
    const int r = h->rank;
    auto reject = [&](status st, const std::string& why) {
      c.ph = phase::rejected;
      enqueue(c, make_frame(wire::kind::reject, st, r, why));
    };
    if (h->size < 1 || h->size > opt_.max_ranks)
      return reject(status::invalid_argument, "size " + std::to_string(h->size) + " is out of range 1.." +
                                                  std::to_string(opt_.max_ranks));
    if (r < 0 || r >= h->size)
      return reject(status::invalid_argument,
                    "rank " + std::to_string(r) + " is out of range for size " + std::to_string(h->size));
    if (failed_) return reject(status::peer_failure, "the group has already failed: " + outcome_);
    if (size_ < 0) {
      size_ = h->size;
      size_from_ = r;
      slots_.assign(static_cast<std::size_t>(size_), slot::empty);
      conn_of_.assign(static_cast<std::size_t>(size_), nullptr);
    } else if (h->size != size_) {
      return reject(status::mismatch, "rank " + std::to_string(r) + " says the group has " +
                                          std::to_string(h->size) + " ranks, but rank " +
                                          std::to_string(size_from_) + " said " + std::to_string(size_));
    }
    if (slots_[r] != slot::empty)
      return reject(status::invalid_argument,
                    "rank " + std::to_string(r) + " has already joined (duplicate rank)");
    slots_[r] = slot::live;
    conn_of_[r] = &c;
    c.ph = phase::joined;
    c.rank = r;
    c.got = 0;
    if (++joined_ == size_) {
      formed_ = true;
      auto b = std::make_shared<std::vector<std::byte>>(wire::header_size + 8);
      auto hd = wire::encode(wire::header{wire::kind::welcome, status::ok, -1, 8});
      std::copy(hd.begin(), hd.end(), b->begin());
      wire::detail::put(b->data() + wire::header_size, opt_.max_blob, 8);
      broadcast(b);
    }
  }

  void on_header(conn& c) {
    auto h = wire::decode_header(c.head.data());
    c.got = 0;
    if (!h) return violation(c, "sent a malformed frame header");
    if (h->k == wire::kind::contribute) {
      if (h->length > opt_.max_blob)
        return violation(c, "sent a blob of " + std::to_string(h->length) + " bytes, over the limit of " +
                                std::to_string(opt_.max_blob));
    } else if (h->k == wire::kind::leave) {
      if (h->length != 0) return violation(c, "sent a malformed leave message");
    } else {
      return violation(c, "sent an unexpected message kind " + std::to_string(static_cast<unsigned>(h->k)));
    }
    c.h = *h;
    c.payload.assign(h->length, std::byte{});  // bounded by max_blob above
    if (h->length == 0) return on_frame(c);
    c.in_payload = true;
  }

  void on_frame(conn& c) {
    if (c.h.k == wire::kind::leave) return on_leave(c);
    const int r = c.rank;
    if (!formed_) return violation(c, "sent data before all ranks joined");
    if (failed_) return;  // it already has the failure message queued
    if (c.contributed) return violation(c, "sent a second blob before the round completed");
    c.blob = std::move(c.payload);
    c.payload = {};
    c.contributed = true;
    if (contributed_++ == 0) round_start_ = clock::now();
    if (left_ > 0) {
      const int q = first_with(slot::left);
      return fail_group(status::peer_failure, q,
                        "rank " + std::to_string(q) + " left the group (closed its session) before round " +
                            std::to_string(round_) + ", which rank " + std::to_string(r) + " started");
    }
    if (contributed_ == size_) complete_round();
  }

  void on_leave(conn& c) {
    const int r = c.rank;
    c.ph = phase::left;
    slots_[r] = slot::left;
    conn_of_[r] = nullptr;
    const bool mine = std::exchange(c.contributed, false);
    if (mine) --contributed_;
    if (failed_) return;
    if (!formed_)
      return fail_group(status::peer_failure, r,
                        "rank " + std::to_string(r) + " left before all ranks joined");
    if (contributed_ > 0 || mine)
      return fail_group(
          status::peer_failure, r,
          "rank " + std::to_string(r) + " left the group during round " + std::to_string(round_));
    ++left_;
  }

  void violation(conn& c, const std::string& why) { lost(c, why); }

  /// The connection of `c` is over. For an admitted rank that did not
  /// leave, that is a failure every other rank must hear about.
  void lost(conn& c, const std::string& why) {
    const phase ph = c.ph;
    const int r = c.rank;
    c.fd.reset();
    c.out.clear();
    if (ph != phase::joined) return;  // a rank that left is simply gone now
    slots_[r] = slot::gone;
    conn_of_[r] = nullptr;
    if (std::exchange(c.contributed, false)) --contributed_;
    fail_group(status::peer_failure, r, "rank " + std::to_string(r) + " " + why);
  }

  void fail_group(status st, int rank, const std::string& why) {
    if (failed_) return;
    failed_ = true;
    failed_at_ = clock::now();
    outcome_ = why;
    reset_round();
    broadcast(make_frame(wire::kind::failure, st, rank, why));
  }

  void complete_round() {
    const std::size_t len = conn_of_[0]->blob.size();
    for (int r = 1; r < size_; ++r) {
      if (conn_of_[r]->blob.size() != len) {
        const std::string why = "allgather length mismatch in round " + std::to_string(round_) +
                                ": rank 0 passed " + std::to_string(len) + " bytes, rank " +
                                std::to_string(r) + " passed " + std::to_string(conn_of_[r]->blob.size());
        reset_round();
        ++round_;
        broadcast(make_frame(wire::kind::failure, status::mismatch, r, why));
        return;
      }
    }
    const std::uint64_t total = static_cast<std::uint64_t>(len) * static_cast<std::uint64_t>(size_);
    auto b = std::make_shared<std::vector<std::byte>>(wire::header_size + total);
    auto hd = wire::encode(wire::header{wire::kind::result, status::ok, -1, total});
    std::copy(hd.begin(), hd.end(), b->begin());
    for (int r = 0; r < size_; ++r) {
      const auto& blob = conn_of_[r]->blob;
      if (len)
        std::memcpy(b->data() + wire::header_size + static_cast<std::size_t>(r) * len, blob.data(), len);
    }
    reset_round();
    ++round_;
    broadcast(b);
  }

  void reset_round() {
    for (auto& c : conns_) {
      c->contributed = false;
      c->blob = {};
    }
    contributed_ = 0;
  }

  void broadcast(const buffer& b) {
    for (std::size_t i = 0; i < conns_.size(); ++i)  // enqueue may fail others; no erasure here
      if (conns_[i]->fd && conns_[i]->ph == phase::joined) enqueue(*conns_[i], b);
  }

  int first_with(slot s) const {
    for (int r = 0; r < size_; ++r)
      if (slots_[r] == s) return r;
    return -1;
  }
  int first_missing_contribution() const {
    for (int r = 0; r < size_; ++r)
      if (!conn_of_[r] || !conn_of_[r]->contributed) return r;
    return -1;
  }
  /// Ranks in state `s` (or, with `missing_blob`, live ranks that have not
  /// contributed), abbreviated after 16.
  std::string list_ranks(slot s, bool missing_blob) const {
    std::string out;
    int n = 0;
    for (int r = 0; r < size_; ++r) {
      const bool hit = missing_blob ? (conn_of_[r] && !conn_of_[r]->contributed) : slots_[r] == s;
      if (!hit) continue;
      if (n++ < 16) out += (out.empty() ? "" : ", ") + std::to_string(r);
    }
    if (n > 16) out += " and " + std::to_string(n - 16) + " more";
    return out;
  }

  root_shared& s_;
  socket_fd listener_;
  bootstrap_options opt_;
  std::vector<std::unique_ptr<conn>> conns_;
  std::vector<slot> slots_;
  std::vector<conn*> conn_of_;
  int size_ = -1, size_from_ = -1, joined_ = 0, left_ = 0, contributed_ = 0;
  bool formed_ = false, failed_ = false;
  std::uint64_t round_ = 0;
  clock::time_point start_, round_start_, failed_at_, accept_paused_until_;
  std::string outcome_;
};

/// Owns the root threads of this process; see "Lifetime" above.
class root_registry {
 public:
  static root_registry& instance() {
    static root_registry r;
    return r;
  }

  void adopt(std::shared_ptr<root_shared> s, std::thread t) {
    std::lock_guard lk(m_);
    const pid_t me = ::getpid();
    // Join roots that already ended so a long-lived process does not
    // accumulate finished threads.
    std::erase_if(entries_, [me](entry& e) {
      if (e.pid != me || !e.state->is_done()) return false;
      e.thread.join();
      return true;
    });
    entries_.push_back({me, std::move(s), std::move(t)});
  }

  ~root_registry() {
    std::lock_guard lk(m_);
    const pid_t me = ::getpid();
    for (auto& e : entries_) {
      if (e.pid == me) {
        e.state->request_stop();
        e.thread.join();
      } else {
        // Inherited through fork(): the thread does not exist here, so it can
        // neither be joined nor detached; leaking the handle is the only
        // safe option (std::thread's destructor would call terminate).
        new std::thread(std::move(e.thread));
      }
    }
  }

 private:
  root_registry() = default;
  struct entry {
    pid_t pid;
    std::shared_ptr<root_shared> state;
    std::thread thread;
  };
  std::mutex m_;
  std::vector<entry> entries_;
};

inline bool is_wildcard(const socket_address& a) {
  if (a.family() == AF_INET)
    return reinterpret_cast<const sockaddr_in*>(&a.storage)->sin_addr.s_addr == INADDR_ANY;
  if (a.family() == AF_INET6)
    return IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(&a.storage)->sin6_addr);
  return false;
}

/// For a wildcard listener, the address other hosts should use: the first
/// up, non-loopback interface address of the same family, else loopback.
inline std::string advertised_host(const socket_address& bound) {
  if (!is_wildcard(bound)) return bound.host();
  const int fam = bound.family();
  ifaddrs* list = nullptr;
  std::string found;
  if (::getifaddrs(&list) == 0) {
    for (ifaddrs* p = list; p && found.empty(); p = p->ifa_next) {
      if (!p->ifa_addr || p->ifa_addr->sa_family != fam) continue;
      if ((p->ifa_flags & IFF_UP) == 0 || (p->ifa_flags & IFF_LOOPBACK) != 0) continue;
      socket_address a;
      a.length = fam == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
      std::memcpy(&a.storage, p->ifa_addr, a.length);
      if (fam == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<sockaddr_in6*>(&a.storage)->sin6_addr))
        continue;  // would need a scope id the id does not carry
      found = a.host();
    }
    ::freeifaddrs(list);
  }
  if (found.empty()) found = fam == AF_INET ? "127.0.0.1" : "::1";
  return found;
}

}  // namespace detail

/// Observer of a running root service. Cheap to copy. Dropping it does not
/// stop the service.
class root_handle {
 public:
  root_handle() = default;
  explicit root_handle(std::shared_ptr<detail::root_shared> s) : s_(std::move(s)) {}

  explicit operator bool() const noexcept { return s_ != nullptr; }
  /// Advertised address, bound port and secret.
  const root_info& info() const { return s_->info; }
  unique_id id() const { return encode_unique_id(s_->info); }
  endpoint address() const { return {s_->info.address, s_->info.port}; }

  /// Asks the service to close every connection and end; does not wait.
  void stop() const noexcept {
    if (s_) s_->request_stop();
  }
  /// True once the service thread has finished (within `d`).
  bool wait_for(std::chrono::milliseconds d) const {
    std::unique_lock lk(s_->m);
    return s_->cv.wait_for(lk, d, [&] { return s_->done; });
  }
  bool running() const { return s_ && !s_->is_done(); }
  /// Why the service ended ("all ranks left", a failure, "stopped"); empty
  /// while it runs.
  std::string outcome() const {
    std::lock_guard lk(s_->m);
    return s_->outcome;
  }

 private:
  std::shared_ptr<detail::root_shared> s_;
};

/// Starts a root service listening on address:port (port 0 = ephemeral)
/// that admits clients presenting `secret`. Throws invalid_argument for a
/// bad address or options, system_error when the address cannot be bound.
inline root_handle start_root(const std::string& address, std::uint16_t port, const secret_bytes& secret,
                              const bootstrap_options& opt = {}) {
  require(opt.timeout.count() > 0, "start_root", "timeout must be positive");
  require(
      opt.max_ranks >= 1 && opt.max_ranks <= rank_limit, "start_root",
      "max_ranks must be in [1, " + std::to_string(rank_limit) + "], got " + std::to_string(opt.max_ranks));
  socket_fd listener = listen_on(endpoint{address, port});
  const socket_address bound = local_address(listener.get());

  auto s = std::make_shared<detail::root_shared>();
  s->wake.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!s->wake) detail::throw_errno("eventfd", errno);
  s->info.address = detail::advertised_host(bound);
  s->info.port = bound.port();
  s->info.secret = secret;

  std::thread t;
  try {
    t = std::thread([s, l = std::move(listener), opt]() mutable {
      std::string outcome;
      try {
        detail::root_loop loop(*s, std::move(l), opt);
        outcome = loop.run();
      } catch (const std::exception& e) {
        outcome = std::string("root service failed: ") + e.what();
      } catch (...) {
        outcome = "root service failed";
      }
      s->finish(std::move(outcome));
    });
  } catch (const std::system_error& e) {
    throw_error(status::system_error, std::string("cannot start the root thread: ") + e.what());
  }
  detail::root_registry::instance().adopt(s, std::move(t));
  return root_handle(s);
}

}  // namespace bootstrap

/// Starts a root service in this process (listening on options.address,
/// port options.port or an ephemeral one) with a fresh random secret, and
/// returns the id every rank needs. Errors as start_root.
inline unique_id get_unique_id(const bootstrap_options& opt = {}) {
  return bootstrap::start_root(opt.address, opt.port, bootstrap::random_secret(), opt).id();
}

}  // namespace collx
