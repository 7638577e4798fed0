// collx/net/fake_verbs.hpp — an in-process verbs provider: reliable
// connected queue pairs between "devices" of one process, for testing the ib
// transport (net/ib_proxy.hpp) where there is no RDMA device.
//
// What it models (net/verbs.hpp states the semantics the transport needs):
//   * RC queue pairs through RESET → RTS; requests of one QP delivered in
//     order; RDMA WRITE, RDMA WRITE WITH IMMEDIATE and SEND;
//   * memory registrations with local and remote keys: a local address
//     outside its lkey's registration fails with loc_prot_err; a remote key,
//     range or access that does not match fails with rem_access_err and moves
//     both QPs to the error state;
//   * receive requests: a WRITE WITH IMM or SEND waits (receiver not ready,
//     retried forever as rnr_retry = 7 does) until the remote posts one; a
//     SEND longer than the receive buffer fails with loc_len_err there;
//   * a QP in the error state flushes every posted and new request
//     (wr_flush_err); a destroyed or failed remote QP, or a link down, fails
//     a send with retry_exc_err;
//   * completion queues with an event fd (readable after arm_cq once a
//     completion arrives);
//   * an 8-byte, 8-byte-aligned write is stored atomically (release), as an
//     HCA's PCIe write of one aligned word is seen whole by the CPU.
// Injected faults (inject()): the n-th next RDMA write posted from a device
// moves its QP to the error state, fails with retry_exc_err, or carries a
// remote key that does not match; set_link() takes a device's link down.
//
// Data moves synchronously inside post_send (under the fabric's mutex) when
// the receiver is ready: the fake is for semantics, not speed.
#pragma once

#include <collx/error.hpp>
#include <collx/net/verbs.hpp>

#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace collx::net::verbs {

class fake_fabric {
 public:
  enum class fault : std::uint8_t { qp_error, retry_exceeded, bad_rkey };

  /// A fabric of `ndevices` devices named fake0, fake1, …, one port each.
  explicit fake_fabric(int ndevices) {
    for (int i = 0; i < ndevices; ++i) {
      auto d = std::make_unique<dev>();
      d->fab = this;
      d->name = "fake" + std::to_string(i);
      d->lid = static_cast<std::uint16_t>(i + 1);
      devs_.push_back(std::move(d));
    }
    table_.name = "fake";
    table_.self = this;
    table_.devices = &devices_of;
    table_.open = &open_of;
    table_.close = [](handle) {};
    table_.query_port = &query_port_of;
    table_.alloc_pd = &alloc_pd_of;
    table_.dealloc_pd = &dealloc_pd_of;
    table_.reg_mr = &reg_mr_of;
    table_.dereg_mr = &dereg_mr_of;
    table_.create_cq = &create_cq_of;
    table_.destroy_cq = &destroy_cq_of;
    table_.cq_fd = [](handle c) { return static_cast<cq*>(c)->efd; };
    table_.arm_cq = &arm_cq_of;
    table_.drain_cq_events = [](handle c) {
      std::uint64_t n;
      while (::read(static_cast<cq*>(c)->efd, &n, sizeof n) > 0) {
      }
    };
    table_.create_qp = &create_qp_of;
    table_.connect_qp = &connect_qp_of;
    table_.destroy_qp = &destroy_qp_of;
    table_.post_send = &post_send_of;
    table_.post_recv = &post_recv_of;
    table_.poll_cq = &poll_cq_of;
  }
  fake_fabric(const fake_fabric&) = delete;
  fake_fabric& operator=(const fake_fabric&) = delete;

  /// The provider table (valid while the fabric lives).
  const provider& table() const { return table_; }

  /// The `after`-th next RDMA write (0: the next) posted from `device` fails
  /// as `f` says. One pending fault per device.
  void inject(const std::string& device, fault f, int after = 0) {
    std::lock_guard<std::mutex> lock(mu_);
    dev& d = find(device);
    d.fault_armed = true;
    d.fault_kind = f;
    d.fault_after = after;
  }

  /// Takes a device's link down (every send from or to it fails with
  /// retry_exc_err) or up.
  void set_link(const std::string& device, bool up) {
    std::lock_guard<std::mutex> lock(mu_);
    find(device).link_up = up;
  }

  /// RDMA writes (with or without immediate) posted from `device` so far.
  std::uint64_t writes_posted(const std::string& device) {
    std::lock_guard<std::mutex> lock(mu_);
    return find(device).writes;
  }

 private:
  struct dev;
  struct pd;
  struct mr {
    pd* owner = nullptr;
    std::uintptr_t addr = 0;
    std::size_t len = 0;
    unsigned access = 0;
    std::uint32_t lkey = 0, rkey = 0;
  };
  struct pd {
    dev* d = nullptr;
    std::vector<mr*> mrs;
  };
  struct cq {
    dev* d = nullptr;
    std::deque<completion> q;
    int efd = -1;
    bool armed = false;
  };
  enum class qp_state : std::uint8_t { reset, rts, error };
  /// A request on its way into a QP: waits there for a receive request
  /// (or behind one that does), bytes snapshotted when it had to wait.
  struct arrival {
    std::uint32_t from_qpn = 0;
    send_wr wr;
    std::vector<std::byte> bytes;
  };
  struct qp {
    pd* owner = nullptr;
    cq* cq_ = nullptr;
    std::uint32_t qpn = 0;
    qp_state state = qp_state::reset;
    std::uint32_t remote_qpn = 0;
    std::uint16_t remote_lid = 0;
    std::deque<recv_wr> rq;
    std::deque<arrival> inbox;
  };
  struct dev {
    fake_fabric* fab = nullptr;
    std::string name;
    std::uint16_t lid = 0;
    bool link_up = true;
    bool fault_armed = false;
    fault fault_kind = fault::qp_error;
    int fault_after = 0;
    std::uint64_t writes = 0;
  };

  dev& find(const std::string& name) {
    for (auto& d : devs_)
      if (d->name == name) return *d;
    throw_error(status::invalid_argument, "fake verbs: no device '" + name + "'");
  }
  static fake_fabric& of(void* self) { return *static_cast<fake_fabric*>(self); }

  static std::vector<device_info> devices_of(void* self) {
    std::vector<device_info> v;
    for (auto& d : of(self).devs_) v.push_back({d->name, 1});
    return v;
  }
  static handle open_of(void* self, const std::string& name) {
    std::lock_guard<std::mutex> lock(of(self).mu_);
    return &of(self).find(name);
  }
  static port_info query_port_of(handle ctx, int port, int gid_index) {
    const dev& d = *static_cast<dev*>(ctx);
    if (port != 1) throw_error(status::invalid_argument, "fake verbs: " + d.name + " has only port 1");
    (void)gid_index;
    port_info p;
    p.active = d.link_up;
    p.lid = d.lid;
    p.gid[15] = static_cast<std::uint8_t>(d.lid);
    return p;
  }
  static handle alloc_pd_of(handle ctx) {
    dev* d = static_cast<dev*>(ctx);
    auto* p = new pd;
    p->d = d;
    return p;
  }
  static void dealloc_pd_of(handle h) { delete static_cast<pd*>(h); }
  static handle reg_mr_of(handle h, void* addr, std::size_t len, unsigned access, std::uint32_t* lkey,
                          std::uint32_t* rkey) {
    pd* p = static_cast<pd*>(h);
    fake_fabric& f = *p->d->fab;
    std::lock_guard<std::mutex> lock(f.mu_);
    auto* m = new mr;
    m->owner = p;
    m->addr = reinterpret_cast<std::uintptr_t>(addr);
    m->len = len;
    m->access = access;
    ++f.next_key_;
    m->lkey = f.next_key_ * 0x10001u + 0x100u;
    m->rkey = f.next_key_ * 0x10001u + 0x200u;
    *lkey = m->lkey;
    *rkey = m->rkey;
    p->mrs.push_back(m);
    return m;
  }
  static void dereg_mr_of(handle h) {
    mr* m = static_cast<mr*>(h);
    fake_fabric& f = *m->owner->d->fab;
    std::lock_guard<std::mutex> lock(f.mu_);
    auto& v = m->owner->mrs;
    for (std::size_t i = 0; i < v.size(); ++i)
      if (v[i] == m) v.erase(v.begin() + static_cast<std::ptrdiff_t>(i)), i = v.size();
    delete m;
  }
  static handle create_cq_of(handle ctx, int) {
    auto* c = new cq;
    c->d = static_cast<dev*>(ctx);
    c->efd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (c->efd < 0) {
      delete c;
      throw_error(status::system_error, "fake verbs: eventfd failed");
    }
    return c;
  }
  static void destroy_cq_of(handle h) {
    cq* c = static_cast<cq*>(h);
    ::close(c->efd);
    delete c;
  }
  static void arm_cq_of(handle h) {
    cq* c = static_cast<cq*>(h);
    std::lock_guard<std::mutex> lock(c->d->fab->mu_);
    if (!c->q.empty()) signal(*c);
    else c->armed = true;
  }
  static void signal(cq& c) {
    c.armed = false;
    const std::uint64_t one = 1;
    (void)!::write(c.efd, &one, sizeof one);
  }
  static void complete(cq& c, const completion& e) {
    c.q.push_back(e);
    if (c.armed) signal(c);
  }
  static handle create_qp_of(handle h, handle c, const qp_caps&, std::uint32_t* qpn) {
    pd* p = static_cast<pd*>(h);
    fake_fabric& f = *p->d->fab;
    std::lock_guard<std::mutex> lock(f.mu_);
    auto q = std::make_unique<qp>();
    q->owner = p;
    q->cq_ = static_cast<cq*>(c);
    q->qpn = ++f.next_qpn_;
    *qpn = q->qpn;
    qp* raw = q.get();
    f.qps_[raw->qpn] = std::move(q);
    return raw;
  }
  static void connect_qp_of(handle h, const qp_connect& how, const qp_address&, const qp_address& remote) {
    qp* q = static_cast<qp*>(h);
    fake_fabric& f = *q->owner->d->fab;
    std::lock_guard<std::mutex> lock(f.mu_);
    if (how.port != 1) throw_error(status::invalid_argument, "fake verbs: only port 1 exists");
    bool known = false;
    for (auto& d : f.devs_) known = known || d->lid == remote.lid;
    if (!known)
      throw_error(status::system_error, "fake verbs: no device with lid " + std::to_string(remote.lid));
    if (q->state != qp_state::reset)
      throw_error(status::invalid_argument, "fake verbs: QP already connected");
    q->remote_qpn = remote.qpn;
    q->remote_lid = remote.lid;
    q->state = qp_state::rts;
  }
  static void destroy_qp_of(handle h) {
    qp* q = static_cast<qp*>(h);
    fake_fabric& f = *q->owner->d->fab;
    std::lock_guard<std::mutex> lock(f.mu_);
    for (const arrival& a : q->inbox) f.sender_done(a, wc_status::retry_exc_err);  // nobody answers
    q->inbox.clear();
    f.qps_.erase(q->qpn);
  }

  /// Moves a QP to the error state: its receive requests and waiting
  /// arrivals are flushed.
  void to_error(qp& q) {
    if (q.state == qp_state::error) return;
    q.state = qp_state::error;
    for (const recv_wr& r : q.rq)
      complete(*q.cq_, {r.wr_id, wc_status::wr_flush_err, wc_opcode::recv, 0, 0, false, q.qpn});
    q.rq.clear();
    for (const arrival& a : q.inbox) sender_done(a, wc_status::retry_exc_err);
    q.inbox.clear();
  }

  /// The sender's completion of a request (errors always complete).
  void sender_done(const arrival& a, wc_status st) {
    auto it = qps_.find(a.from_qpn);
    if (it == qps_.end()) return;
    qp& s = *it->second;
    if (st != wc_status::success) {
      complete(*s.cq_, {a.wr.wr_id, st, op_of(a.wr.op), 0, 0, false, s.qpn});
      to_error(s);
    } else if (a.wr.signaled) {
      complete(*s.cq_, {a.wr.wr_id, st, op_of(a.wr.op), a.wr.local.length, 0, false, s.qpn});
    }
  }
  static wc_opcode op_of(wr_opcode o) {
    return o == wr_opcode::send ? wc_opcode::send : wc_opcode::rdma_write;
  }

  static const mr* find_mr(const pd& p, std::uint32_t key, bool remote, std::uint64_t addr, std::uint64_t len,
                           unsigned need) {
    for (const mr* m : p.mrs)
      if ((remote ? m->rkey : m->lkey) == key)
        return addr >= m->addr && len <= m->len && addr - m->addr <= m->len - len &&
                       (m->access & need) == need
                   ? m
                   : nullptr;
    return nullptr;
  }

  static void store_bytes(std::byte* dst, const std::byte* src, std::size_t n) {
    if (n == 8 && reinterpret_cast<std::uintptr_t>(dst) % 8 == 0) {
      std::uint64_t v;
      std::memcpy(&v, src, 8);
      std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(dst))
          .store(v, std::memory_order_release);
    } else if (n != 0) {
      std::memcpy(dst, src, n);
    }
  }

  /// Delivers what waits in q's inbox while it can (in order).
  void deliver(qp& q) {
    while (!q.inbox.empty() && q.state == qp_state::rts) {
      arrival& a = q.inbox.front();
      const bool needs_recv = a.wr.op != wr_opcode::rdma_write;
      if (needs_recv && q.rq.empty()) return;  // receiver not ready: retried until it posts one
      const std::byte* src =
          a.bytes.empty() ? reinterpret_cast<const std::byte*>(a.wr.local.addr) : a.bytes.data();
      if (a.wr.op == wr_opcode::send) {
        const recv_wr r = q.rq.front();
        q.rq.pop_front();
        if (a.wr.local.length > r.local.length ||
            find_mr(*q.owner, r.local.lkey, false, r.local.addr, r.local.length, local_write) == nullptr) {
          const wc_status st =
              a.wr.local.length > r.local.length ? wc_status::loc_len_err : wc_status::loc_prot_err;
          complete(*q.cq_, {r.wr_id, st, wc_opcode::recv, 0, 0, false, q.qpn});
          arrival gone = std::move(a);
          q.inbox.pop_front();
          to_error(q);
          sender_done(gone, wc_status::rem_access_err);
          return;
        }
        store_bytes(reinterpret_cast<std::byte*>(r.local.addr), src, a.wr.local.length);
        complete(*q.cq_, {r.wr_id, wc_status::success, wc_opcode::recv, a.wr.local.length, 0, false, q.qpn});
      } else {
        if (find_mr(*q.owner, a.wr.rkey, true, a.wr.remote_addr, a.wr.local.length, remote_write) ==
            nullptr) {
          arrival gone = std::move(a);
          q.inbox.pop_front();
          to_error(q);
          sender_done(gone, wc_status::rem_access_err);
          return;
        }
        store_bytes(reinterpret_cast<std::byte*>(a.wr.remote_addr), src, a.wr.local.length);
        if (needs_recv) {
          const recv_wr r = q.rq.front();
          q.rq.pop_front();
          complete(*q.cq_, {r.wr_id, wc_status::success, wc_opcode::recv_rdma_with_imm, a.wr.local.length,
                            a.wr.imm, true, q.qpn});
        }
      }
      const arrival done = std::move(a);
      q.inbox.pop_front();
      sender_done(done, wc_status::success);
    }
  }

  static int post_send_of(handle h, const send_wr* wrs, int n) {
    qp* q = static_cast<qp*>(h);
    fake_fabric& f = *q->owner->d->fab;
    std::lock_guard<std::mutex> lock(f.mu_);
    if (q->state == qp_state::reset) return EINVAL;
    for (int i = 0; i < n; ++i) f.send_one(*q, wrs[i]);
    return 0;
  }

  void send_one(qp& q, send_wr wr) {
    const arrival self{q.qpn, wr, {}};
    if (q.state == qp_state::error)
      return complete(*q.cq_, {wr.wr_id, wc_status::wr_flush_err, op_of(wr.op), 0, 0, false, q.qpn});
    if (find_mr(*q.owner, wr.local.lkey, false, wr.local.addr, wr.local.length, 0) == nullptr)
      return sender_done(self, wc_status::loc_prot_err);
    dev& d = *q.owner->d;
    if (wr.op != wr_opcode::send) {
      ++d.writes;
      if (d.fault_armed && d.fault_after-- == 0) {
        d.fault_armed = false;
        switch (d.fault_kind) {
          case fault::qp_error:
            complete(*q.cq_, {wr.wr_id, wc_status::wr_flush_err, op_of(wr.op), 0, 0, false, q.qpn});
            return to_error(q);
          case fault::retry_exceeded: return sender_done(self, wc_status::retry_exc_err);
          case fault::bad_rkey: wr.rkey ^= 0x5a5a5a5au; break;
        }
      }
    }
    auto it = qps_.find(q.remote_qpn);
    qp* r = it == qps_.end() ? nullptr : it->second.get();
    bool remote_link = false;
    for (auto& o : devs_) remote_link = remote_link || (o->lid == q.remote_lid && o->link_up);
    if (r == nullptr || r->state != qp_state::rts || !d.link_up || !remote_link)
      return sender_done(self, wc_status::retry_exc_err);
    // Delivered now when nothing waits ahead of it and a receive is posted
    // (if it needs one); else it waits, its bytes snapshotted (the sender
    // may reuse its buffer once the request is "on the wire").
    arrival a{q.qpn, wr, {}};
    const bool now = r->inbox.empty() && (wr.op == wr_opcode::rdma_write || !r->rq.empty());
    if (!now && wr.local.length != 0) {
      const auto* src = reinterpret_cast<const std::byte*>(wr.local.addr);
      a.bytes.assign(src, src + wr.local.length);
    }
    r->inbox.push_back(std::move(a));
    deliver(*r);
  }

  static int post_recv_of(handle h, const recv_wr* wrs, int n) {
    qp* q = static_cast<qp*>(h);
    fake_fabric& f = *q->owner->d->fab;
    std::lock_guard<std::mutex> lock(f.mu_);
    for (int i = 0; i < n; ++i) {
      if (q->state == qp_state::error)
        complete(*q->cq_, {wrs[i].wr_id, wc_status::wr_flush_err, wc_opcode::recv, 0, 0, false, q->qpn});
      else q->rq.push_back(wrs[i]);
    }
    f.deliver(*q);
    return 0;
  }

  static int poll_cq_of(handle h, completion* out, int max) {
    cq* c = static_cast<cq*>(h);
    std::lock_guard<std::mutex> lock(c->d->fab->mu_);
    int n = 0;
    for (; n < max && !c->q.empty(); ++n) {
      out[n] = c->q.front();
      c->q.pop_front();
    }
    return n;
  }

  std::mutex mu_;
  std::vector<std::unique_ptr<dev>> devs_;
  std::map<std::uint32_t, std::unique_ptr<qp>> qps_;
  std::uint32_t next_qpn_ = 0x100, next_key_ = 0;
  provider table_;
};

}  // namespace collx::net::verbs
