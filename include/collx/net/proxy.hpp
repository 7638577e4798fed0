// collx/net/proxy.hpp — the progress thread of a socket communicator: moves
// FIFO steps between this rank's private memory and its peers over TCP.
//
// What it does, per peer q and channel c (see transport/proxied.hpp for the
// memory side, net/frame.hpp for the wire):
//   send     tail of FIFO self→q (acquire) beyond what was queued: queue step
//            s as a data frame on stream s % nstreams, payload straight from
//            the slot (the slot stays untouched until the peer credits it).
//   receive  a data frame is checked (frame.hpp), its payload read straight
//            into its slot of FIFO q→self, and once every step below it has
//            arrived (streams may deliver out of order) tail is published
//            (release) and the rank's doorbell rung.
//   credit   head of FIFO q→self (acquire) beyond what was credited: send it
//            on stream 0 (one stream keeps credits in order); a credit from
//            q is stored into head of FIFO self→q (release). A credit is not
//            worth a TCP segment of its own while the sender has slots to
//            spare: it waits for the next frame to q on stream 0 (a small
//            call's step, which it rides), and goes alone only once half the
//            FIFO is uncredited, when the rank waits for anything from the
//            network (try_receive: a rank that waits may be what its peer
//            waits for), after 1 ms idle, or before the goodbye. 8-byte
//            all_reduce: one sendmsg per call instead of three
//            (bench/results/net_deferred_credits.md).
//   abort    the local abort word raised: its cause goes to every peer, whose
//            proxies raise theirs, so abort(), a timeout or a failure on one
//            host fails the calls on every host.
//   calls    each call record the rank publishes (comm/watch.hpp) goes to the
//            next rank, whose proxy stores it in its copy of this rank's
//            record: the next rank's end-of-call check then compares the
//            two calls as on shared memory (a mismatch fails the call).
// Sockets are non-blocking, watched by epoll. The thread busy-polls while
// there is traffic and, after `spin` without progress, sleeps in epoll_wait
// on the sockets and an eventfd, at most 10 ms at a time. After publishing a
// counter the rank calls try_progress() (transport::proxied_view::published):
// when the thread is not working, the rank queues and sends the posted steps
// and credits itself (one thread hand-off less on a send's path: 8-byte
// all_reduce over veth 107 -> ~55 us, bench/results/net_allreduce_veth.md);
// when it is, the rank wakes it through the eventfd if it is about to sleep.
// A rank waiting for a step calls try_receive() (proxied_view::drive): when
// the thread is not working, the rank reads the sockets itself, so an
// arriving step is published without waking the thread (8-byte all_reduce
// over veth ~80 -> ~50 us by default, bench/results/net_allreduce_veth_peers_drive.md).
//
// Failures: a connection closed without a bye, a socket error, or a refused
// frame raise the local abort word with {peer_dead / system_error, peer}
// and keep a text naming the peer, its address and what happened
// (failure_text()); the rank's pending wait sees the abort word at once.
// A peer that said goodbye (closed its communicator) fails the call with
// peer_dead too when this rank posted steps it never read (its last credit
// says so) or waits for a step it never sent (proxied_view::has_left).
// Nothing is written for a refused frame. stop() (the communicator's
// destruction) sends what the rank posted, a bye on every stream, and waits
// for the peers' end of stream, each within a bounded deadline.
//
// Thread-safety: the proxy thread and try_progress() (the rank's thread)
// move bytes under one mutex, which the rank only ever tries; failure_text()
// may be called from any thread (its own mutex guards the text).
#pragma once

#include <collx/bootstrap/socket.hpp>
#include <collx/detail/atomic.hpp>
#include <collx/detail/doorbell.hpp>
#include <collx/error.hpp>
#include <collx/net/frame.hpp>
#include <collx/net/proxy_base.hpp>
#include <collx/transport/shm.hpp>

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace collx::net {

/// The connected, authenticated streams to one peer.
struct peer_link {
  int rank = -1;
  std::string where;  // "rank 1 (10.77.0.2:40211)", for messages
  std::vector<bootstrap::socket_fd> streams;
};

class proxy : public proxy_base {
 public:
  proxy(transport::shm_view local, int self, std::vector<peer_link> links, int nstreams,
        std::uint32_t* step_bytes, std::uint64_t spin_ns, hooks h)
      : proxy_base(local, self, step_bytes, spin_ns, std::move(h)), nstreams_(nstreams) {
    ep_ = bootstrap::socket_fd(::epoll_create1(EPOLL_CLOEXEC));
    if (!ep_) bootstrap::detail::throw_errno("socket transport: epoll_create1", errno);
    epoll_event we{};
    we.events = EPOLLIN;
    we.data.u64 = wake_key;
    if (::epoll_ctl(ep_.get(), EPOLL_CTL_ADD, wake_.get(), &we) != 0)
      bootstrap::detail::throw_errno("socket transport: epoll_ctl", errno);
    peers_.resize(static_cast<std::size_t>(v_.nranks()));
    for (peer_link& l : links) {
      peer& p = peers_[static_cast<std::size_t>(l.rank)];
      p.rank = l.rank;
      p.where = l.where;
      p.ch.resize(nch_);
      for (std::uint32_t c = 0; c < nch_; ++c) {
        channel& k = p.ch[c];
        const transport::fifo_ref out = v_.fifo(self_, l.rank, static_cast<int>(c));
        const transport::fifo_ref in = v_.fifo(l.rank, self_, static_cast<int>(c));
        k.queued = *out.tail;
        k.credit_from_peer = *out.head;
        k.rx_tail = *in.tail;
        k.credited = *in.head;
        k.arrived.assign(in.slots, 0);
      }
      for (std::size_t s = 0; s < l.streams.size(); ++s) {
        stream st;
        st.fd = std::move(l.streams[s]);
        st.expected.resize(nch_);
        for (std::uint32_t c = 0; c < nch_; ++c) {
          // The first step of channel c this stream carries: the smallest
          // s' >= rx_tail with s' % nstreams == s.
          const std::uint64_t t = p.ch[c].rx_tail, n = static_cast<std::uint64_t>(nstreams_);
          st.expected[c] = t + (s + n - t % n) % n;
        }
        epoll_event e{};
        e.events = EPOLLIN;
        e.data.u64 = static_cast<std::uint64_t>(l.rank) << 32 | s;
        if (::epoll_ctl(ep_.get(), EPOLL_CTL_ADD, st.fd.get(), &e) != 0)
          bootstrap::detail::throw_errno("socket transport: epoll_ctl", errno);
        p.streams.push_back(std::move(st));
      }
    }
    start([this] { loop(); });
  }

  proxy(const proxy&) = delete;
  proxy& operator=(const proxy&) = delete;
  ~proxy() { stop(std::chrono::milliseconds(5000)); }

  /// Called by the rank after it published a counter: if the proxy thread
  /// is not working right now, queue and send what is posted (and credits)
  /// from the calling thread, saving the hand-off to the proxy on a send's
  /// critical path. Returns false when the proxy thread holds the work (it
  /// will see the counter itself, or be woken).
  bool try_progress() {
    if (!work_mu_.try_lock()) return false;
    std::lock_guard<std::mutex> lock(work_mu_, std::adopt_lock);
    if (saying_bye_) return true;
    queue_work(false);
    for (peer& p : peers_)
      for (stream& s : p.streams) flush(p, s);
    return true;
  }
  static bool try_progress_of(const void* self) {
    return const_cast<proxy*>(static_cast<const proxy*>(self))->try_progress();
  }

  /// Called by a rank that waits for a step or a credit: if the proxy
  /// thread is not working, reads what the sockets hold from the calling
  /// thread and sends what is queued and every deferred credit, so an
  /// arrival is published without waking the proxy thread. When the proxy
  /// thread holds the work, asks it to send the deferred credits and returns
  /// false.
  bool try_receive() {
    if (!work_mu_.try_lock()) {
      if (detail::load_relaxed(&deferred_) != 0) {
        flush_asked_.store(true, std::memory_order_release);
        wake_if_idle();
      }
      return false;
    }
    std::lock_guard<std::mutex> lock(work_mu_, std::adopt_lock);
    if (saying_bye_) return true;
    for (peer& p : peers_)
      for (stream& s : p.streams)
        if (!s.dead && !s.eof) receive(p, s);
    queue_work(true);
    for (peer& p : peers_)
      for (stream& s : p.streams) flush(p, s);
    return true;
  }
  static bool try_receive_of(const void* self) {
    return const_cast<proxy*>(static_cast<const proxy*>(self))->try_receive();
  }

 private:
  struct out_item {
    std::byte hdr[frame_bytes];
    const std::byte* payload = nullptr;
    std::size_t len = 0;        // payload bytes
    std::byte own[call_bytes];  // a call record's payload (deque elements do not move)
  };
  struct stream {
    bootstrap::socket_fd fd;
    std::deque<out_item> out;
    std::size_t out_off = 0;  // bytes of out.front() already sent
    bool want_out = false;    // EPOLLOUT registered
    std::byte hdr[frame_bytes];
    std::size_t hdr_got = 0;
    frame cur{};
    std::size_t payload_got = 0;
    bool in_payload = false;
    std::vector<std::uint64_t> expected;  // next data step per channel
    std::byte call[call_bytes];           // a call record's payload as it arrives
    // What one recv took, see receive(); allocated at the stream's first read
    // through it (most streams of a large job carry only a goodbye).
    std::vector<std::byte> stash;
    bool bye_sent = false, bye_seen = false, eof = false, dead = false, shut = false;
  };
  struct channel {
    std::uint64_t queued = 0;            // steps of self→q queued for sending
    std::uint64_t credit_from_peer = 0;  // q's last credit (head of self→q)
    std::uint64_t rx_tail = 0;           // tail of q→self published
    std::uint64_t credited = 0;          // head of q→self sent as credit
    std::vector<std::uint8_t> arrived;   // per slot: step complete, not yet published
  };
  struct peer {
    int rank = -1;
    std::string where;
    std::vector<channel> ch;
    std::vector<stream> streams;
    bool left = false;            // said bye on every stream
    bool lost = false;            // left with steps of this rank unread (failed once)
    std::uint64_t last_call = 0;  // the last call record received
  };

  std::string where_of(int rank) const override { return peers_[static_cast<std::size_t>(rank)].where; }
  void fail(peer& p, status why, const std::string& what) { proxy_base::fail(p.rank, why, what); }

  void push(stream& s, const frame& f, const std::byte* payload, std::size_t len) {
    out_item it;
    encode(f, it.hdr);
    it.payload = payload;
    it.len = len;
    s.out.push_back(it);
  }

  /// Forwards this rank's newly published call records (up to the last
  /// call_history) to the next rank, which compares its calls with them at
  /// the end of each call, as shm ranks compare records in shared memory.
  /// Like credits, a record rides the next frame to that rank (a call's
  /// record is published before its first step) unless `flush`; `pending`
  /// is set when one waits.
  bool queue_calls(bool flush, bool& pending) {
    const int P = v_.nranks();
    peer& next = peers_[static_cast<std::size_t>((self_ + 1) % P)];
    if (P < 2 || next.rank < 0 || next.left || next.streams.empty() || next.streams[0].dead) return false;
    if (through_memory(next.rank)) return false;  // it reads the records in this rank's memory
    if (!flush && next.streams[0].out.empty()) {
      pending = pending || call_unsent();
      return false;
    }
    bool progress = false;
    std::uint64_t seq, sig, count;
    while (next_call(seq, sig, count)) {  // oldest unsent first
      stream& s = next.streams[0];
      push(s, frame{frame_kind::call, 0, seq, call_bytes}, nullptr, call_bytes);
      frame_detail::put64(s.out.back().own, sig);
      frame_detail::put64(s.out.back().own + 8, count);
      s.out.back().payload = s.out.back().own;
      progress = true;
    }
    return progress;
  }

  /// Queues posted steps and new credits; forwards a local abort once.
  /// Credits are deferred (see the header) unless `flush_credits`.
  bool queue_work(bool flush_credits) {
    bool pending = false;
    bool progress = false;
    if (!abort_sent_ && detail::load_acquire(v_.abort_word()) != 0) {
      abort_sent_ = true;
      const std::uint64_t cause = hooks_.cause();
      for (peer& p : peers_)
        if (p.rank >= 0 && !p.streams.empty() && !p.streams[0].dead)
          push(p.streams[0], frame{frame_kind::abort, 0, cause, 0}, nullptr, 0);
      progress = true;
    }
    for (peer& p : peers_) {
      if (p.rank < 0) continue;
      if (p.left) {
        // The peer said goodbye on every stream, after its last credit (on
        // stream 0, before that stream's bye): every step this rank posted
        // beyond that credit, sent or not, is never read. Fail now (a
        // receive would otherwise wait for the deadline, a send return as if
        // delivered).
        for (std::uint32_t c = 0; c < nch_ && !p.lost; ++c) {
          const transport::fifo_ref out = v_.fifo(self_, p.rank, static_cast<int>(c));
          const std::uint64_t tail = detail::load_acquire(out.tail);
          // A peer on this host stored its credits itself, before its bye.
          const std::uint64_t credit =
              through_memory(p.rank) ? detail::load_acquire(out.head) : p.ch[c].credit_from_peer;
          if (tail <= credit) continue;
          p.lost = true;
          fail(p, status::peer_dead,
               "closed its communicator (said goodbye) with " + std::to_string(tail - credit) +
                   " step(s) of channel " + std::to_string(c) + " this rank sent it unread");
          progress = true;
        }
        continue;
      }
      if (through_memory(p.rank)) continue;  // its steps and credits go through shared memory
      for (std::uint32_t c = 0; c < nch_; ++c) {
        channel& k = p.ch[c];
        const transport::fifo_ref out = v_.fifo(self_, p.rank, static_cast<int>(c));
        const std::uint64_t tail = detail::load_acquire(out.tail);
        for (; k.queued < tail; ++k.queued) {
          const std::uint32_t len = posted_bytes(p.rank, c, k.queued, out);
          stream& s = p.streams[k.queued % p.streams.size()];
          push(s, frame{frame_kind::data, c, k.queued, len}, out.slot(k.queued), len);
          count_step();
          progress = true;
        }
        const transport::fifo_ref in = v_.fifo(p.rank, self_, static_cast<int>(c));
        const std::uint64_t head = detail::load_acquire(in.head);
        if (head > k.credited && !flush_credits && p.streams[0].out.empty() &&
            head - k.credited < (in.slots + 1) / 2) {
          pending = true;  // the peer has slots to spare: wait for a frame to ride
        } else if (head > k.credited) {
          k.credited = head;
          // Credits of every channel on stream 0: in order, so each is checked against the last.
          push(p.streams[0], frame{frame_kind::credit, c, head, 0}, nullptr, 0);
          progress = true;
        }
      }
    }
    // After the steps: a record rides a step to the next rank, after it.
    progress |= queue_calls(flush_credits, pending);
    detail::store_relaxed(&deferred_, pending ? 1u : 0u);
    return progress;
  }

  /// Writes queued frames of one stream until the socket would block.
  bool flush(peer& p, stream& s) {
    bool progress = false;
    while (!s.out.empty() && !s.dead) {
      // Several queued frames in one call (a call record and the step after
      // it, a credit and a step): fewer system calls and TCP segments.
      iovec iov[32];
      int n = 0;
      std::size_t off = s.out_off;
      for (auto it = s.out.begin(); it != s.out.end() && n + 2 <= 32; ++it, off = 0) {
        if (off < frame_bytes) iov[n++] = {it->hdr + off, frame_bytes - off};
        const std::size_t pdone = off > frame_bytes ? off - frame_bytes : 0;
        if (it->len > pdone) iov[n++] = {const_cast<std::byte*>(it->payload) + pdone, it->len - pdone};
      }
      msghdr m{};
      m.msg_iov = iov;
      m.msg_iovlen = static_cast<std::size_t>(n);
      const ssize_t w = ::sendmsg(s.fd.get(), &m, MSG_NOSIGNAL);
      if (w > 0) count_send();
      if (w < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        if (!s.bye_seen) fail(p, status::peer_dead, std::string("sending failed: ") + std::strerror(errno));
        s.dead = true;
        s.out.clear();
        return true;
      }
      progress = true;
      for (std::size_t left = static_cast<std::size_t>(w); left > 0;) {
        const std::size_t rest = frame_bytes + s.out.front().len - s.out_off;
        if (left < rest) {
          s.out_off += left;
          break;
        }
        left -= rest;
        s.out.pop_front();
        s.out_off = 0;
      }
    }
    const bool want = !s.out.empty() && !s.dead;
    if (want != s.want_out) {
      epoll_event e{};
      e.events = EPOLLIN | (want ? EPOLLOUT : 0u);
      e.data.u64 =
          static_cast<std::uint64_t>(p.rank) << 32 | static_cast<std::uint64_t>(&s - p.streams.data());
      ::epoll_ctl(ep_.get(), EPOLL_CTL_MOD, s.fd.get(), &e);
      s.want_out = want;
    }
    return progress;
  }

  /// Reads what one stream has, acting on complete frames. Headers, call
  /// records and the ends of payloads come through the stream's stash, many
  /// frames per recv (a small call's credit, record and step arrive in one
  /// segment); a payload with stash_direct bytes or more still to come is
  /// read straight into its slot. The stash is always emptied before
  /// returning: epoll would not report bytes already taken off the socket.
  bool receive(peer& p, stream& s) {
    bool progress = false;
    for (int rounds = 0; rounds < 64 && !s.dead && !s.eof; ++rounds) {
      const bool direct =
          s.in_payload && s.cur.kind == frame_kind::data && s.cur.bytes - s.payload_got >= stash_direct;
      if (!direct && s.stash.empty()) s.stash.resize(stash_bytes);
      std::byte* dst = s.stash.data();
      std::size_t want = s.stash.size();
      if (direct) {
        const transport::fifo_ref in = v_.fifo(p.rank, self_, static_cast<int>(s.cur.channel));
        dst = in.slot(s.cur.step) + s.payload_got;
        want = s.cur.bytes - s.payload_got;
      }
      const ssize_t r = ::recv(s.fd.get(), dst, want, 0);
      if (r == 0) {
        s.eof = true;
        if (!s.bye_seen && !stop_.load(std::memory_order_relaxed))
          fail(p, status::peer_dead,
               "the connection closed without a goodbye (its process died, was killed, or its host is "
               "unreachable)");
        else if (!s.bye_seen) s.dead = true;
        return true;
      }
      if (r < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        if (!s.bye_seen)
          fail(p, status::peer_dead, std::string("the connection failed: ") + std::strerror(errno));
        s.dead = true;
        return true;
      }
      progress = true;
      if (direct) {
        s.payload_got += static_cast<std::size_t>(r);
        if (s.payload_got == s.cur.bytes) on_payload(p, s);
      } else if (!take_stash(p, s, static_cast<std::size_t>(r))) {
        return true;
      }
    }
    return progress;
  }

  /// Acts on the first `got` bytes of the stash, in order: header bytes,
  /// then the frame's payload into its place. False when a frame was
  /// refused (the stream is failed; what follows it is dropped).
  bool take_stash(peer& p, stream& s, std::size_t got) {
    const std::byte* src = s.stash.data();
    while (got > 0) {
      if (!s.in_payload) {
        const std::size_t n = std::min(got, frame_bytes - s.hdr_got);
        std::memcpy(s.hdr + s.hdr_got, src, n);
        src += n, got -= n, s.hdr_got += n;
        if (s.hdr_got < frame_bytes) break;
        s.hdr_got = 0;
        if (!on_header(p, s)) return false;
        continue;
      }
      std::byte* dst;
      if (s.cur.kind == frame_kind::call) {
        dst = s.call;
      } else {
        const transport::fifo_ref in = v_.fifo(p.rank, self_, static_cast<int>(s.cur.channel));
        dst = in.slot(s.cur.step);
      }
      const std::size_t n = std::min(got, std::size_t{s.cur.bytes} - s.payload_got);
      std::memcpy(dst + s.payload_got, src, n);
      src += n, got -= n, s.payload_got += n;
      if (s.payload_got < s.cur.bytes) break;
      if (s.cur.kind == frame_kind::call) {
        s.in_payload = false;
        store_call(p.rank, s.cur.step, frame_detail::get64(s.call), frame_detail::get64(s.call + 8));
      } else {
        on_payload(p, s);
      }
    }
    return true;
  }

  /// A complete header: check it, then act (or start reading its payload).
  bool on_header(peer& p, stream& s) {
    frame f;
    std::string bad = decode(s.hdr, f);
    if (bad.empty()) {
      channel_rx rx[transport::max_channels];
      if (f.kind == frame_kind::data || f.kind == frame_kind::credit)
        for (std::uint32_t c = 0; c < nch_; ++c) {
          const transport::fifo_ref in = v_.fifo(p.rank, self_, static_cast<int>(c));
          rx[c] = channel_rx{in.slots,       in.slot_bytes,
                             s.expected[c],  detail::load_acquire(in.head),
                             p.ch[c].queued, p.ch[c].credit_from_peer};
        }
      bad = validate(f, rx, nch_);
    }
    if (bad.empty() && through_memory(p.rank) && (f.kind == frame_kind::data || f.kind == frame_kind::credit))
      bad = "a step or credit from a peer on this host, whose steps go through shared memory";
    if (!bad.empty()) {
      fail(p, status::system_error,
           "refused what it sent on stream " + std::to_string(&s - p.streams.data()) + ": " + bad +
               " (not a collx peer, or a corrupted stream)");
      s.dead = true;
      return false;
    }
    switch (f.kind) {
      case frame_kind::bye:
        s.bye_seen = true;
        p.left = true;
        for (const stream& o : p.streams) p.left = p.left && o.bye_seen;
        // Every step it sent came before its byes and is published by now.
        if (p.left) mark_left(p.rank);
        return true;
      case frame_kind::call:
        if (p.rank != (self_ + v_.nranks() - 1) % v_.nranks() || f.step <= p.last_call) {
          fail(p, status::system_error,
               "sent a call record out of turn (call " + std::to_string(f.step) + ")");
          s.dead = true;
          return false;
        }
        p.last_call = f.step;
        s.cur = f;
        s.in_payload = true;
        s.payload_got = 0;
        return true;
      case frame_kind::abort:
        hooks_.adopt(f.step);
        abort_sent_ = true;  // the peers hear of it from the rank that raised it
        detail::ring(bell_);
        return true;
      case frame_kind::credit: {
        channel& k = p.ch[f.channel];
        k.credit_from_peer = f.step;
        detail::store_release(v_.fifo(self_, p.rank, static_cast<int>(f.channel)).head, f.step);
        detail::ring(bell_);
        return true;
      }
      case frame_kind::data:
        s.cur = f;
        s.expected[f.channel] += static_cast<std::uint64_t>(nstreams_);
        if (f.bytes == 0) {
          on_payload(p, s);
        } else {
          s.in_payload = true;
          s.payload_got = 0;
        }
        return true;
    }
    return true;
  }

  /// A step's payload is in its slot: publish every step now complete.
  void on_payload(peer& p, stream& s) {
    s.in_payload = false;
    channel& k = p.ch[s.cur.channel];
    const transport::fifo_ref in = v_.fifo(p.rank, self_, static_cast<int>(s.cur.channel));
    k.arrived[s.cur.step % in.slots] = 1;
    const std::uint64_t before = k.rx_tail;
    while (k.arrived[k.rx_tail % in.slots]) {
      k.arrived[k.rx_tail % in.slots] = 0;
      ++k.rx_tail;
    }
    if (k.rx_tail != before) {
      detail::store_release(in.tail, k.rx_tail);
      detail::ring(bell_);
    }
  }

  bool all_sent() const {
    for (const peer& p : peers_)
      for (const stream& s : p.streams)
        if (!s.out.empty() && !s.dead) return false;
    return true;
  }

  void loop() {
    epoll_event ev[64];
    std::uint64_t last_progress = now_ns();
    bool& saying_bye = saying_bye_;
    bool credits_due = false;  // deferred credits waited 1 ms idle: send them
    for (;;) {
      std::unique_lock<std::mutex> lock(work_mu_);  // the rank may send inline (try_progress)
      bool progress = false;
      const bool stopping = stop_.load(std::memory_order_acquire);
      // Before a goodbye every credit goes: the peer checks its unread steps against the last.
      const bool all_credits =
          stopping || credits_due || flush_asked_.exchange(false, std::memory_order_acq_rel);
      credits_due = false;
      if (!saying_bye) progress |= queue_work(all_credits);
      for (peer& p : peers_)
        for (stream& s : p.streams) progress |= flush(p, s);
      if (stopping) {
        const std::uint64_t now = now_ns();
        const bool late = now >= stop_deadline_ns_.load();
        if (!saying_bye && (all_sent() || late || failed_)) {
          saying_bye = true;
          for (peer& p : peers_)
            for (stream& s : p.streams)
              if (!s.dead) {
                push(s, frame{frame_kind::bye, 0, 0, 0}, nullptr, 0);
                s.bye_sent = true;
                flush(p, s);
              }
        }
        if (saying_bye) {
          bool done = true;
          for (peer& p : peers_)
            for (stream& s : p.streams) {
              if (!s.dead && !s.shut && s.bye_sent && s.out.empty()) {
                ::shutdown(s.fd.get(), SHUT_WR);  // the peer reads our bye, then the end of stream
                s.shut = true;
              }
              done = done && (s.dead || s.eof);
            }
          if (done || late) return;
        }
      }
      int sleep_ms = 0;
      if (!progress && !stopping && now_ns() - last_progress >= spin_ns_) {
        // Idle: announce it, then look once more (the rank's published()
        // fences its counter store before reading the flag, so either this
        // look sees the counter or the rank sees the flag and wakes us).
        detail::store_relaxed(&idle_, 1u);
        std::atomic_thread_fence(std::memory_order_seq_cst);
        if (queue_work(flush_asked_.exchange(false, std::memory_order_acq_rel))) progress = true;
        else if (detail::load_relaxed(&deferred_) != 0) sleep_ms = 1;  // then they go alone
        else sleep_ms = 10;  // bounds how late a local abort is forwarded
      } else if (!progress && stopping) {
        sleep_ms = 1;  // waiting for the peers' end of stream (which wakes it) or the stop deadline
      }
      lock.unlock();
      const int n = ::epoll_wait(ep_.get(), ev, 64, sleep_ms);
      detail::store_relaxed(&idle_, 0u);
      lock.lock();
      credits_due = n == 0 && sleep_ms == 1;
      for (int i = 0; i < n; ++i) {
        if (ev[i].data.u64 == wake_key) {
          std::uint64_t count;
          (void)!::read(wake_.get(), &count, sizeof count);
          progress = true;
          continue;
        }
        peer& p = peers_[static_cast<std::size_t>(ev[i].data.u64 >> 32)];
        stream& s = p.streams[static_cast<std::size_t>(ev[i].data.u64 & 0xffffffffu)];
        if (ev[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) progress |= receive(p, s);
        if (ev[i].events & EPOLLOUT) progress |= flush(p, s);
        if (s.dead || s.eof) ::epoll_ctl(ep_.get(), EPOLL_CTL_DEL, s.fd.get(), nullptr);
      }
      if (progress) last_progress = now_ns();
    }
  }

  int nstreams_;
  static constexpr std::uint64_t wake_key = ~std::uint64_t{0};
  /// One recv's worth of small frames; a payload with at least stash_direct
  /// bytes to come skips it (a copy of up to stash_bytes per 512 KiB step).
  static constexpr std::size_t stash_bytes = 16384, stash_direct = 4096;
  bootstrap::socket_fd ep_;
  bool saying_bye_ = false;
  std::vector<peer> peers_;
  std::atomic<bool> flush_asked_{false};  // a waiting rank asks the proxy thread to send them
};

}  // namespace collx::net
