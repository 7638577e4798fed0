// collx/net/ib_proxy.hpp — the progress thread of an InfiniBand (verbs)
// communicator: moves FIFO steps between hosts with RDMA writes.
//
// Memory: the rank's FIFO segment (transport/proxied.hpp) is registered
// whole; every rank's segment has the same layout (checked when connecting),
// so a slot or counter has the same offset in every rank's segment, and a
// peer addresses it as (its base + offset, its rkey).
//
// Per peer q, `qps` reliable connected queue pairs; step s of channel c
// travels on QP s % qps, credits and control messages on QP 0:
//   send     tail of FIFO self→q (acquire) beyond what was posted: RDMA
//            WRITE WITH IMMEDIATE of the step's bytes from the local slot
//            straight into the same slot of q's FIFO self→q; the immediate
//            says (data, channel, step). The local slot is not reused before
//            q credits it, which it does after the bytes arrived.
//   receive  a receive completion with a data immediate: the bytes are in
//            the slot already (RC places them before the completion); once
//            every step below it arrived, tail is published (release) and
//            the rank's doorbell rung.
//   credit   head of FIFO q→self (acquire) beyond what was credited: RDMA
//            WRITE WITH IMMEDIATE of the 8-byte head straight into q's head
//            word of that FIFO (where q's protocol reads it: the
//            clear-to-send write of NCCL's IB transport), the immediate
//            telling q's proxy to check it and ring q's doorbell.
//   control  SENDs of 32 bytes: the abort cause (to every peer), a call
//            record (to the next rank, as the socket proxy forwards them),
//            goodbye (on every QP, after its last step).
// Every receive request has a 32-byte buffer; one is reposted for each
// completion. Sleeping: the completion queue's event fd and the rank's
// eventfd in one epoll set, as the socket proxy sleeps on its sockets.
//
// Checks: each completion's immediate is checked (kind, channel, the QP's
// expected step, bytes against the slot, steps against free slots, credits
// against steps sent); one that fails fails the communicator naming the
// peer. A peer's writes cannot reach beyond the registered segment (the
// HCA checks the key and range), but they land before they are checked:
// the verbs transport trusts the fabric as far as memory goes. Failed
// completions (retry counter exceeded: peer or link gone; remote access
// error; a QP in the error state) fail the communicator with status::
// peer_dead or system_error naming the peer, its device and the QP.
//
// Not yet: GPU memory (dmabuf registration), shared receive queues,
// registering only the receive FIFOs (today the whole segment is pinned),
// adaptive routing, several devices per rank.
#pragma once

#include <collx/bootstrap/session.hpp>
#include <collx/net/ifname.hpp>
#include <collx/net/proxy_base.hpp>
#include <collx/net/verbs.hpp>

#include <sys/epoll.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace collx::net {

/// The ib transport's settings (net::net_options::from_env reads them).
struct ib_options {
  /// COLLX_IB_HCA: devices in NCCL's syntax, name[:port] entries ("mlx5_0:1",
  /// "^mlx5_1", "=mlx5_0"); empty: the first device with an active port.
  std::string hca;
  /// COLLX_IB_GID_INDEX: the GID to address by (RoCE v2); < 0: the LID on
  /// InfiniBand, GID 0 on Ethernet (RoCE) ports.
  int gid_index = -1;
  /// COLLX_IB_QPS_PER_CONNECTION: queue pairs per peer, 1..16; equal on every rank.
  int qps = 1;
  /// COLLX_IB_TIMEOUT (local ACK timeout exponent, 4.096 µs · 2^t) and
  /// COLLX_IB_RETRY_CNT (transport retries before retry_exc_err).
  std::uint8_t timeout = 18;
  std::uint8_t retry_cnt = 7;
  /// The verbs implementation; null: rdma-core's (net/verbs_rdma.hpp).
  const verbs::provider* provider = nullptr;
};

/// The device and port COLLX_IB_HCA picks among `devs` (the first match).
inline std::pair<std::string, int> pick_hca(const std::string& spec,
                                            const std::vector<verbs::device_info>& devs) {
  std::string names;
  for (const auto& d : devs) names += (names.empty() ? "" : ", ") + d.name;
  if (devs.empty()) throw_error(status::not_supported, "ib transport: no RDMA device found");
  if (spec.empty()) return {devs.front().name, 1};
  if_filter f = parse_if_filter(spec, "COLLX_IB_HCA");
  std::vector<int> ports(f.names.size(), 1);
  for (std::size_t i = 0; i < f.names.size(); ++i)
    if (const std::size_t colon = f.names[i].find(':'); colon != std::string::npos) {
      const std::string p = f.names[i].substr(colon + 1);
      char* end = nullptr;
      const long v = std::strtol(p.c_str(), &end, 10);
      require(!p.empty() && *end == '\0' && v >= 1 && v <= 255, "COLLX_IB_HCA",
              "'" + spec + "': bad port '" + p + "'");
      ports[i] = static_cast<int>(v);
      f.names[i].resize(colon);
    }
  for (const auto& d : devs) {
    if (!matches(f, d.name)) continue;
    int port = 1;
    for (std::size_t i = 0; i < f.names.size() && !f.exclude; ++i)
      if (f.exact ? d.name == f.names[i] : d.name.compare(0, f.names[i].size(), f.names[i]) == 0)
        port = ports[i];
    return {d.name, port};
  }
  throw_error(status::not_supported,
              "COLLX_IB_HCA='" + spec + "' matches no RDMA device (there are: " + names + ")");
}

class ib_proxy : public proxy_base {
 public:
  /// Opens the device, registers the segment [seg, seg + seg_bytes), makes
  /// `o.qps` queue pairs per peer, exchanges their addresses through `s`
  /// and connects them; then starts the thread.
  ib_proxy(transport::shm_view local, std::size_t seg_bytes, int self, bootstrap::session& s,
           const ib_options& o, std::uint32_t* step_bytes, std::uint64_t spin_ns, hooks h)
      : proxy_base(local, self, step_bytes, spin_ns, std::move(h)), vb_(*o.provider), nqps_(o.qps) {
    require(o.qps >= 1 && o.qps <= max_qps, "COLLX_IB_QPS_PER_CONNECTION",
            std::to_string(o.qps) + " is not a queue pair count in [1, 16]");
    const int P = v_.nranks();
    const auto [devname, port] = pick_hca(o.hca, vb_.devices(vb_.self));
    dev_ = devname;
    r_.vb = &vb_;
    r_.ctx = vb_.open(vb_.self, devname);
    const verbs::port_info pi = vb_.query_port(r_.ctx, port, o.gid_index);
    if (!pi.active)
      throw_error(status::system_error,
                  "ib transport: port " + std::to_string(port) + " of " + devname + " is not active");
    r_.pd = vb_.alloc_pd(r_.ctx);
    r_.seg_mr = vb_.reg_mr(r_.pd, v_.base, seg_bytes, verbs::local_write | verbs::remote_write, &seg_lkey_,
                           &seg_rkey_);
    // Slots per connection bound the steps (and credits) in flight per QP.
    std::uint32_t steps = 0;
    for (std::uint32_t c = 0; c < nch_; ++c) steps += v_.layout.fifo[c].slots;
    rdepth_ = 2 * steps + 16;
    sdepth_ = std::max<std::uint32_t>(256, 2 * rdepth_);
    const std::size_t nq = std::size_t(P) * std::size_t(nqps_);
    ctl_.assign((nq * rdepth_ + std::size_t(P) * sdepth_) * ctl_bytes + std::size_t(P) * nch_ * 8,
                std::byte{0});
    r_.ctl_mr = vb_.reg_mr(r_.pd, ctl_.data(), ctl_.size(), verbs::local_write, &ctl_lkey_, &ctl_rkey_);
    r_.cq = vb_.create_cq(r_.ctx, static_cast<int>(nq * (rdepth_ + sdepth_)));

    // What each rank publishes: its address, segment, geometry, then the qpn
    // of each of its QPs to each rank.
    hello me{};
    me.magic = hello_magic;
    me.lid = pi.lid;
    std::memcpy(me.gid, pi.gid, 16);
    me.mtu = pi.mtu;
    me.base = reinterpret_cast<std::uint64_t>(v_.base);
    me.rkey = seg_rkey_;
    me.qps = static_cast<std::uint32_t>(nqps_);
    me.nchannels = nch_;
    for (std::uint32_t c = 0; c < nch_; ++c)
      me.slots[c] = v_.layout.fifo[c].slots, me.slot_bytes[c] = v_.layout.fifo[c].slot_bytes;
    std::snprintf(me.device, sizeof me.device, "%s", devname.c_str());
    // Room for the most QPs per peer, so that ranks that disagree on the
    // count still exchange records of one size and check_peer names the problem.
    std::vector<std::byte> blob(sizeof(hello) + std::size_t(P) * max_qps * 4);
    peers_.resize(static_cast<std::size_t>(P));
    for (int q = 0; q < P; ++q) {
      if (q == self_) continue;
      peer& p = peers_[static_cast<std::size_t>(q)];
      p.rank = q;
      for (int i = 0; i < nqps_; ++i) {
        std::uint32_t qpn = 0;
        p.qps.push_back(vb_.create_qp(r_.pd, r_.cq, verbs::qp_caps{sdepth_, rdepth_}, &qpn));
        r_.qps.push_back(p.qps.back());
        std::memcpy(blob.data() + sizeof(hello) + (std::size_t(q) * max_qps + i) * 4, &qpn, 4);
      }
    }
    std::memcpy(blob.data(), &me, sizeof me);
    const std::vector<std::byte> all = s.allgather(blob.data(), blob.size());
    require(
        all.size() == blob.size() * std::size_t(P), "ib transport",
        "the ranks' connection records differ in size (different rank counts or queue pairs per connection)");

    verbs::qp_connect how;
    how.port = port;
    how.gid_index = pi.ethernet && o.gid_index < 0 ? 0 : o.gid_index;
    how.timeout = o.timeout;
    how.retry_cnt = o.retry_cnt;
    for (int q = 0; q < P; ++q) {
      if (q == self_) continue;
      const std::byte* rec = all.data() + std::size_t(q) * blob.size();
      hello them;
      std::memcpy(&them, rec, sizeof them);
      them.device[sizeof them.device - 1] = '\0';
      check_peer(q, me, them);
      peer& p = peers_[static_cast<std::size_t>(q)];
      p.where = "rank " + std::to_string(q) + " (" + them.device + ", lid " + std::to_string(them.lid) + ")";
      p.base = them.base;
      p.rkey = them.rkey;
      p.out.assign(static_cast<std::size_t>(nqps_), 0);
      p.bye_seen.assign(static_cast<std::size_t>(nqps_), 0);
      p.expected.assign(static_cast<std::size_t>(nqps_), std::vector<std::uint64_t>(nch_));
      p.ch.resize(nch_);
      for (std::uint32_t c = 0; c < nch_; ++c) {
        channel& k = p.ch[c];
        const transport::fifo_ref out = v_.fifo(self_, q, static_cast<int>(c));
        const transport::fifo_ref in = v_.fifo(q, self_, static_cast<int>(c));
        k.queued = *out.tail;
        k.credit_from_peer = *out.head;
        k.rx_tail = *in.tail;
        k.credited = *in.head;
        k.arrived.assign(in.slots, 0);
        for (int i = 0; i < nqps_; ++i) {
          const std::uint64_t t = k.rx_tail, n = static_cast<std::uint64_t>(nqps_);
          p.expected[static_cast<std::size_t>(i)][c] = t + (static_cast<std::uint64_t>(i) + n - t % n) % n;
        }
      }
      verbs::qp_address mine{pi.lid, {}, 0, 0, pi.mtu},
          theirs{them.lid, {}, 0, 0, std::min(pi.mtu, them.mtu)};
      std::memcpy(mine.gid, pi.gid, 16);
      std::memcpy(theirs.gid, them.gid, 16);
      for (int i = 0; i < nqps_; ++i) {
        std::memcpy(&theirs.qpn, rec + sizeof(hello) + (std::size_t(self_) * max_qps + i) * 4, 4);
        std::memcpy(&mine.qpn, blob.data() + sizeof(hello) + (std::size_t(q) * max_qps + i) * 4, 4);
        vb_.connect_qp(p.qps[static_cast<std::size_t>(i)], how, mine, theirs);
        for (std::uint32_t k = 0; k < rdepth_; ++k) repost(q, i, k);
      }
    }
    s.barrier();  // every QP is ready to receive before any rank sends

    ep_ = bootstrap::socket_fd(::epoll_create1(EPOLL_CLOEXEC));
    if (!ep_) bootstrap::detail::throw_errno("ib transport: epoll_create1", errno);
    watch(wake_.get(), wake_key);
    watch(vb_.cq_fd(r_.cq), cq_key);
    start([this] { loop(); });
  }

  ~ib_proxy() override { stop(std::chrono::milliseconds(5000)); }

  /// As net::proxy::try_progress: posts the rank's steps and credits from the
  /// calling thread when the proxy thread is not working.
  bool try_progress() {
    if (!work_mu_.try_lock()) return false;
    std::lock_guard<std::mutex> lock(work_mu_, std::adopt_lock);
    if (!saying_bye_) queue_work();
    return true;
  }
  static bool try_progress_of(const void* self) {
    return const_cast<ib_proxy*>(static_cast<const ib_proxy*>(self))->try_progress();
  }

  /// As net::proxy::try_receive: polls the completion queue from a waiting
  /// rank's thread when the proxy thread is not working.
  bool try_receive() {
    if (!work_mu_.try_lock()) return false;
    std::lock_guard<std::mutex> lock(work_mu_, std::adopt_lock);
    if (saying_bye_) return true;
    poll();
    queue_work();
    return true;
  }
  static bool try_receive_of(const void* self) {
    return const_cast<ib_proxy*>(static_cast<const ib_proxy*>(self))->try_receive();
  }

  /// The device this rank uses.
  const std::string& device() const { return dev_; }

 private:
  static constexpr int max_qps = 16;
  static constexpr std::uint32_t ping_slot = 1;              // wr_id slot of a liveness write
  static constexpr std::uint64_t ping_ns = 500'000'000ull;   // how often an idle proxy pings its peers
  static constexpr std::uint32_t hello_magic = 0x43584942u;  // "CXIB"
  static constexpr std::size_t ctl_bytes = 32;
  static constexpr std::uint64_t wake_key = 0, cq_key = 1;
  enum : std::uint32_t { imm_data = 1, imm_credit = 2 };
  static constexpr std::uint32_t step_mask = (1u << 27) - 1;
  enum : std::uint32_t { ctl_abort = 1, ctl_call = 2, ctl_bye = 3 };

  struct hello {
    std::uint32_t magic;
    std::uint16_t lid;
    std::uint16_t pad;
    std::uint8_t gid[16];
    std::uint32_t mtu;
    std::uint32_t rkey;
    std::uint64_t base;
    std::uint32_t qps;
    std::uint32_t nchannels;
    std::uint32_t slots[transport::max_channels];
    std::uint32_t slot_bytes[transport::max_channels];
    char device[32];
  };
  struct channel {
    std::uint64_t queued = 0, credit_from_peer = 0, rx_tail = 0, credited = 0;
    std::vector<std::uint8_t> arrived;
  };
  struct peer {
    int rank = -1;
    std::string where;
    std::vector<verbs::handle> qps;
    std::vector<std::uint32_t> out;                    // per QP: send requests not completed
    std::vector<std::vector<std::uint64_t>> expected;  // per QP and channel: next data step
    std::vector<channel> ch;
    std::vector<std::uint8_t> bye_seen;
    std::uint64_t base = 0;
    std::uint32_t rkey = 0;
    std::uint32_t ctl_next = 0;
    std::uint64_t last_call = 0;
    bool left = false, lost = false, dead = false, bye_sent = false;
    bool ping_out = false;  // a liveness write not completed yet
  };
  /// Everything made from the provider, released in reverse order.
  struct resources {
    const verbs::provider* vb = nullptr;
    verbs::handle ctx = nullptr, pd = nullptr, seg_mr = nullptr, ctl_mr = nullptr, cq = nullptr;
    std::vector<verbs::handle> qps;
    ~resources() {
      if (vb == nullptr) return;
      for (verbs::handle q : qps) vb->destroy_qp(q);
      if (cq) vb->destroy_cq(cq);
      if (ctl_mr) vb->dereg_mr(ctl_mr);
      if (seg_mr) vb->dereg_mr(seg_mr);
      if (pd) vb->dealloc_pd(pd);
      if (ctx) vb->close(ctx);
    }
  };

  void check_peer(int q, const hello& me, const hello& them) const {
    const std::string who = "ib transport: rank " + std::to_string(q);
    if (them.magic != hello_magic)
      throw_error(status::system_error, who + " sent a connection record that is not collx's");
    if (them.qps != me.qps)
      throw_error(status::mismatch, who + " uses " + std::to_string(them.qps) +
                                        " queue pairs per connection, rank " + std::to_string(self_) + " " +
                                        std::to_string(me.qps) +
                                        " (COLLX_IB_QPS_PER_CONNECTION must be equal on every rank)");
    bool same = them.nchannels == me.nchannels;
    for (std::uint32_t c = 0; same && c < me.nchannels; ++c)
      same = them.slots[c] == me.slots[c] && them.slot_bytes[c] == me.slot_bytes[c];
    if (!same)
      throw_error(status::mismatch, who + "'s FIFO geometry differs from rank " + std::to_string(self_) +
                                        "'s (set COLLX_BUFFSIZE and the slot options equally on every rank)");
  }

  void watch(int fd, std::uint64_t key) {
    epoll_event e{};
    e.events = EPOLLIN;
    e.data.u64 = key;
    if (::epoll_ctl(ep_.get(), EPOLL_CTL_ADD, fd, &e) != 0)
      bootstrap::detail::throw_errno("ib transport: epoll_ctl", errno);
  }

  std::string where_of(int rank) const override { return peers_[static_cast<std::size_t>(rank)].where; }

  static std::uint64_t wr_id(bool recv, int rank, int qp, std::uint32_t slot) {
    return (recv ? 1ull << 63 : 0) | std::uint64_t(std::uint16_t(rank)) << 32 |
           std::uint64_t(qp & 0xff) << 24 | (slot & 0xffffffu);
  }
  std::byte* recv_buf(int rank, int qp, std::uint32_t k) {
    return ctl_.data() + ((std::size_t(rank) * nqps_ + std::size_t(qp)) * rdepth_ + k) * ctl_bytes;
  }
  std::byte* send_buf(int rank, std::uint32_t k) {
    const std::size_t nq = std::size_t(v_.nranks()) * std::size_t(nqps_);
    return ctl_.data() + (nq * rdepth_ + std::size_t(rank) * sdepth_ + k % sdepth_) * ctl_bytes;
  }
  std::uint64_t* credit_word(int rank, std::uint32_t c) {
    const std::size_t nq = std::size_t(v_.nranks()) * std::size_t(nqps_);
    return reinterpret_cast<std::uint64_t*>(ctl_.data() +
                                            (nq * rdepth_ + std::size_t(v_.nranks()) * sdepth_) * ctl_bytes +
                                            (std::size_t(rank) * nch_ + c) * 8);
  }

  void repost(int rank, int qp, std::uint32_t k) {
    verbs::recv_wr r{wr_id(true, rank, qp, k),
                     {reinterpret_cast<std::uint64_t>(recv_buf(rank, qp, k)), ctl_bytes, ctl_lkey_}};
    const int rc =
        vb_.post_recv(peers_[static_cast<std::size_t>(rank)].qps[static_cast<std::size_t>(qp)], &r, 1);
    if (rc != 0)
      throw_error(status::system_error,
                  "ib transport: post_recv failed (" + std::string(std::strerror(rc)) + ")");
  }

  /// Posts one send request on QP `qp` of peer p; false (and a failure) if the provider refuses it.
  bool post(peer& p, int qp, const verbs::send_wr& wr) {
    const int rc = vb_.post_send(p.qps[static_cast<std::size_t>(qp)], &wr, 1);
    if (rc != 0) {
      fail(p.rank, status::system_error,
           "posting to queue pair " + std::to_string(qp) + " failed (" + std::strerror(rc) + ")");
      p.dead = true;
      return false;
    }
    ++p.out[static_cast<std::size_t>(qp)];
    return true;
  }

  bool post_ctl(peer& p, int qp, std::uint32_t kind, std::uint64_t a, std::uint64_t b, std::uint64_t c) {
    if (p.out[static_cast<std::size_t>(qp)] >= sdepth_) return false;
    std::byte* buf = send_buf(p.rank, p.ctl_next++);
    const std::uint32_t head[2] = {hello_magic, kind};
    std::memcpy(buf, head, 8);
    std::memcpy(buf + 8, &a, 8);
    std::memcpy(buf + 16, &b, 8);
    std::memcpy(buf + 24, &c, 8);
    verbs::send_wr wr;
    wr.wr_id = wr_id(false, p.rank, qp, 0);
    wr.op = verbs::wr_opcode::send;
    wr.local = {reinterpret_cast<std::uint64_t>(buf), ctl_bytes, ctl_lkey_};
    return post(p, qp, wr);
  }

  bool live(const peer& p) const { return p.rank >= 0 && !p.dead && !p.left; }

  /// Posts new steps and credits, forwards call records and a local abort.
  bool queue_work() {
    bool progress = false;
    const int P = v_.nranks();
    peer& next = peers_[static_cast<std::size_t>((self_ + 1) % P)];
    std::uint64_t seq, sig, count;
    // A next rank on this host reads the records in this rank's memory.
    while (P > 1 && live(next) && !through_memory(next.rank) && next.out[0] < sdepth_ &&
           next_call(seq, sig, count))
      progress |= post_ctl(next, 0, ctl_call, seq, sig, count);
    if (!abort_sent_ && detail::load_acquire(v_.abort_word()) != 0) {
      // Forwarded once every live peer took it; a full send queue retries
      // next time (a peer told twice adopts it once).
      const std::uint64_t cause = hooks_.cause();
      bool all = true;
      for (peer& p : peers_)
        if (live(p)) all = post_ctl(p, 0, ctl_abort, cause, 0, 0) && all;
      abort_sent_ = all;
      progress = true;
    }
    for (peer& p : peers_) {
      if (p.rank < 0 || p.dead) continue;
      if (p.left) {
        // Said goodbye after its last credit: steps posted beyond it are never read.
        for (std::uint32_t c = 0; c < nch_ && !p.lost; ++c) {
          const transport::fifo_ref out = v_.fifo(self_, p.rank, static_cast<int>(c));
          const std::uint64_t tail = detail::load_acquire(out.tail);
          // A peer on this host stored its credits itself, before its bye.
          const std::uint64_t credit =
              through_memory(p.rank) ? detail::load_acquire(out.head) : p.ch[c].credit_from_peer;
          if (tail <= credit) continue;
          p.lost = true;
          fail(p.rank, status::peer_dead,
               "closed its communicator (said goodbye) with " + std::to_string(tail - credit) +
                   " step(s) of channel " + std::to_string(c) + " this rank sent it unread");
          progress = true;
        }
        continue;
      }
      if (through_memory(p.rank)) continue;  // its steps and credits go through shared memory
      for (std::uint32_t c = 0; c < nch_ && !p.dead; ++c) {
        channel& k = p.ch[c];
        const transport::fifo_ref out = v_.fifo(self_, p.rank, static_cast<int>(c));
        const std::uint64_t tail = detail::load_acquire(out.tail);
        while (k.queued < tail && !p.dead) {
          const int qp = static_cast<int>(k.queued % static_cast<std::uint64_t>(nqps_));
          if (p.out[static_cast<std::size_t>(qp)] >= sdepth_) break;  // the send queue is full: later
          const std::byte* slot = out.slot(k.queued);
          verbs::send_wr wr;
          wr.wr_id = wr_id(false, p.rank, qp, 0);
          wr.op = verbs::wr_opcode::rdma_write_with_imm;
          wr.local = {reinterpret_cast<std::uint64_t>(slot), posted_bytes(p.rank, c, k.queued, out),
                      seg_lkey_};
          wr.remote_addr = p.base + static_cast<std::uint64_t>(slot - v_.base);
          wr.rkey = p.rkey;
          wr.imm = imm_data << 30 | c << 27 | static_cast<std::uint32_t>(k.queued & step_mask);
          if (!post(p, qp, wr)) break;
          count_step();
          ++k.queued;
          progress = true;
        }
        const transport::fifo_ref in = v_.fifo(p.rank, self_, static_cast<int>(c));
        const std::uint64_t head = detail::load_acquire(in.head);
        if (head > k.credited && !p.dead && p.out[0] < sdepth_) {
          k.credited = head;
          std::uint64_t* w = credit_word(p.rank, c);
          *w = head;
          verbs::send_wr wr;
          wr.wr_id = wr_id(false, p.rank, 0, 0);
          wr.op = verbs::wr_opcode::rdma_write_with_imm;
          wr.local = {reinterpret_cast<std::uint64_t>(w), 8, ctl_lkey_};
          wr.remote_addr =
              p.base + static_cast<std::uint64_t>(reinterpret_cast<std::byte*>(in.head) - v_.base);
          wr.rkey = p.rkey;
          wr.imm = imm_credit << 30 | c << 27 | static_cast<std::uint32_t>(head & step_mask);
          post(p, 0, wr);
          progress = true;
        }
      }
    }
    return progress;
  }

  void refuse(peer& p, int qp, const std::string& why) {
    fail(p.rank, status::system_error,
         "refused what it sent on queue pair " + std::to_string(qp) + ": " + why +
             " (not a collx peer, or a corrupted transfer)");
    p.dead = true;
  }

  /// Polls the completion queue and acts on what completed.
  bool poll() {
    verbs::completion wc[32];
    const int n = vb_.poll_cq(r_.cq, wc, 32);
    for (int i = 0; i < n; ++i) on_completion(wc[i]);
    return n > 0;
  }

  void on_completion(const verbs::completion& e) {
    const bool recv = (e.wr_id >> 63) != 0;
    const int rank = static_cast<int>((e.wr_id >> 32) & 0xffff),
              qp = static_cast<int>((e.wr_id >> 24) & 0xff);
    const std::uint32_t k = static_cast<std::uint32_t>(e.wr_id & 0xffffff);
    if (rank >= v_.nranks() || rank == self_ || qp >= nqps_) return;  // not ours: cannot happen
    peer& p = peers_[static_cast<std::size_t>(rank)];
    if (!recv) --p.out[static_cast<std::size_t>(qp)];
    if (!recv && k == ping_slot) p.ping_out = false;
    if (e.status != verbs::wc_status::success) {
      const bool quiet = e.status == verbs::wc_status::wr_flush_err && (p.dead || p.left || failed_);
      if (!quiet && !p.dead && !(p.left && stop_.load(std::memory_order_relaxed))) {
        const status why =
            e.status == verbs::wc_status::retry_exc_err || e.status == verbs::wc_status::rnr_retry_exc_err
                ? status::peer_dead
                : status::system_error;
        fail(p.rank, why,
             std::string(recv ? "a receive" : "a send") + " on queue pair " + std::to_string(qp) +
                 " failed: " + verbs::to_string(e.status));
      }
      p.dead = true;
      return;
    }
    if (!recv) return;
    if (p.dead) return;
    if (!e.has_imm) {
      on_control(p, qp, recv_buf(rank, qp, k), e.byte_len);
      if (!p.dead && !p.bye_seen[static_cast<std::size_t>(qp)]) repost(rank, qp, k);
      return;
    }
    repost(rank, qp, k);
    if (through_memory(p.rank))
      return refuse(p, qp, "a step or credit from a peer on this host, whose steps go through shared memory");
    const std::uint32_t kind = e.imm >> 30, c = (e.imm >> 27) & 7u, low = e.imm & step_mask;
    if (c >= nch_) return refuse(p, qp, "channel " + std::to_string(c) + " of " + std::to_string(nch_));
    channel& ch = p.ch[c];
    if (kind == imm_credit) {
      const transport::fifo_ref out = v_.fifo(self_, p.rank, static_cast<int>(c));
      const std::uint64_t h = detail::load_acquire(out.head);
      if (h < ch.credit_from_peer || h > ch.queued)
        return refuse(p, qp,
                      "a credit of " + std::to_string(h) + " steps of channel " + std::to_string(c) +
                          " (sent " + std::to_string(ch.queued) + ")");
      ch.credit_from_peer = h;
      detail::ring(bell_);
      return;
    }
    if (kind != imm_data) return refuse(p, qp, "an immediate of unknown kind " + std::to_string(kind));
    const transport::fifo_ref in = v_.fifo(p.rank, self_, static_cast<int>(c));
    std::uint64_t& want = p.expected[static_cast<std::size_t>(qp)][c];
    if (low != (want & step_mask))
      return refuse(p, qp,
                    "step " + std::to_string(low) + " of channel " + std::to_string(c) + " (expected " +
                        std::to_string(want & step_mask) + ")");
    if (e.byte_len > in.slot_bytes)
      return refuse(p, qp,
                    std::to_string(e.byte_len) + " bytes for a slot of " + std::to_string(in.slot_bytes));
    if (want >= detail::load_acquire(in.head) + in.slots)
      return refuse(
          p, qp,
          "step " + std::to_string(want) + " of channel " + std::to_string(c) + " beyond the free slots");
    ch.arrived[want % in.slots] = 1;
    want += static_cast<std::uint64_t>(nqps_);
    const std::uint64_t before = ch.rx_tail;
    while (ch.arrived[ch.rx_tail % in.slots]) {
      ch.arrived[ch.rx_tail % in.slots] = 0;
      ++ch.rx_tail;
    }
    if (ch.rx_tail != before) {
      detail::store_release(in.tail, ch.rx_tail);
      detail::ring(bell_);
    }
  }

  void on_control(peer& p, int qp, const std::byte* buf, std::uint32_t len) {
    std::uint32_t head[2];
    std::uint64_t a, b, c;
    std::memcpy(head, buf, 8);
    std::memcpy(&a, buf + 8, 8);
    std::memcpy(&b, buf + 16, 8);
    std::memcpy(&c, buf + 24, 8);
    if (len != ctl_bytes || head[0] != hello_magic)
      return refuse(p, qp, "a control message of " + std::to_string(len) + " bytes that is not collx's");
    switch (head[1]) {
      case ctl_abort:
        hooks_.adopt(a);
        abort_sent_ = true;  // the peers hear of it from the rank that raised it
        detail::ring(bell_);
        return;
      case ctl_call:
        if (p.rank != (self_ + v_.nranks() - 1) % v_.nranks() || a <= p.last_call)
          return refuse(p, qp, "a call record out of turn (call " + std::to_string(a) + ")");
        p.last_call = a;
        store_call(p.rank, a, b, c);
        return;
      case ctl_bye: {
        p.bye_seen[static_cast<std::size_t>(qp)] = 1;
        bool all = true;
        for (std::uint8_t s : p.bye_seen) all = all && s != 0;
        if (all) {
          p.left = true;  // every step it sent came before its goodbyes and is published
          mark_left(p.rank);
        }
        return;
      }
      default: return refuse(p, qp, "a control message of unknown kind " + std::to_string(head[1]));
    }
  }

  /// A zero-byte RDMA write to every live peer that has none in flight. RC
  /// gives a peer whose QP failed or whose host or link is gone no way to
  /// say so; a write to it exceeds its retries, and this rank fails naming
  /// it instead of waiting for the deadline (a receive-only wait sends
  /// nothing else). Consumes no receive request at the peer.
  void ping() {
    for (peer& p : peers_) {
      if (!live(p) || p.ping_out || p.out[0] >= sdepth_) continue;
      verbs::send_wr wr;
      wr.wr_id = wr_id(false, p.rank, 0, ping_slot);
      wr.op = verbs::wr_opcode::rdma_write;
      wr.local = {reinterpret_cast<std::uint64_t>(ctl_.data()), 0, ctl_lkey_};
      wr.remote_addr = p.base;
      wr.rkey = p.rkey;
      if (post(p, 0, wr)) p.ping_out = true;
    }
  }

  bool all_posted() {
    for (peer& p : peers_) {
      if (p.rank < 0 || p.dead || p.left) continue;
      for (std::uint32_t c = 0; c < nch_ && !through_memory(p.rank); ++c)
        if (p.ch[c].queued < detail::load_acquire(v_.fifo(self_, p.rank, static_cast<int>(c)).tail))
          return false;
      for (std::uint32_t o : p.out)
        if (o != 0) return false;
    }
    return true;
  }

  void loop() {
    epoll_event ev[8];
    std::uint64_t last_progress = now_ns(), last_ping = last_progress;
    for (;;) {
      std::unique_lock<std::mutex> lock(work_mu_);  // the rank may post inline (try_progress)
      const bool stopping = stop_.load(std::memory_order_acquire);
      bool progress = poll();
      if (!saying_bye_) progress |= queue_work();
      if (stopping) {
        const bool late = now_ns() >= stop_deadline_ns_.load();
        if (!saying_bye_ && (all_posted() || late || failed_)) {
          saying_bye_ = true;
          for (peer& p : peers_)
            if (p.rank >= 0 && !p.dead) {
              for (int i = 0; i < nqps_; ++i) post_ctl(p, i, ctl_bye, 0, 0, 0);
              p.bye_sent = true;
            }
        }
        if (saying_bye_) {
          bool done = true;
          for (const peer& p : peers_) {
            if (p.rank < 0 || p.dead) continue;
            done = done && p.left;
            for (std::uint32_t o : p.out) done = done && o == 0;
          }
          if (done || late) return;
        }
      }
      if (!progress && !stopping && now_ns() - last_ping >= ping_ns) {
        ping();
        last_ping = now_ns();
      }
      int sleep_ms = 0;
      if (!progress && !stopping && now_ns() - last_progress >= spin_ns_) {
        // Idle: announce it, arm the completion queue's event, look once more.
        detail::store_relaxed(&idle_, 1u);
        std::atomic_thread_fence(std::memory_order_seq_cst);
        vb_.arm_cq(r_.cq);
        if (poll() || queue_work()) progress = true;
        else sleep_ms = 10;  // bounds how late a local abort is forwarded
      } else if (!progress && stopping) {
        sleep_ms = 1;
      }
      lock.unlock();
      const int n = sleep_ms > 0 ? ::epoll_wait(ep_.get(), ev, 8, sleep_ms) : 0;
      detail::store_relaxed(&idle_, 0u);
      for (int i = 0; i < n; ++i) {
        if (ev[i].data.u64 == wake_key) {
          std::uint64_t count;
          (void)!::read(wake_.get(), &count, sizeof count);
        } else {
          vb_.drain_cq_events(r_.cq);
        }
      }
      if (progress) last_progress = now_ns();
    }
  }

  const verbs::provider& vb_;
  int nqps_;
  std::string dev_;
  std::vector<std::byte> ctl_;  // receive buffers, control sends, credit words (registered; outlives r_)
  resources r_;
  std::uint32_t seg_lkey_ = 0, seg_rkey_ = 0, ctl_lkey_ = 0, ctl_rkey_ = 0;
  std::uint32_t rdepth_ = 0, sdepth_ = 0;
  std::vector<peer> peers_;
  bootstrap::socket_fd ep_;
  bool saying_bye_ = false;
};

}  // namespace collx::net
