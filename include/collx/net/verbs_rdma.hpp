// collx/net/verbs_rdma.hpp — the verbs provider over rdma-core's libibverbs
// (real InfiniBand HCAs, RoCE NICs, Soft-RoCE).
//
// Compiled when COLLX_HAVE_IBVERBS is defined (link collx::ibverbs, which
// CMake offers when it finds libibverbs); otherwise system_provider() throws
// status::not_supported saying so. Each function maps onto the verbs call of
// the same meaning; failures throw status::system_error naming the call and
// errno. Completion channels are non-blocking, so drain_cq_events never
// blocks.
#pragma once

#include <collx/error.hpp>
#include <collx/net/verbs.hpp>

#if defined(COLLX_HAVE_IBVERBS)
#include <fcntl.h>
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstring>
#endif

namespace collx::net::verbs {

#if defined(COLLX_HAVE_IBVERBS)
namespace rdma_detail {

[[noreturn]] inline void fail(const char* call, int err) {
  throw_error(status::system_error, std::string("ib transport: ") + call + " failed: " + std::strerror(err));
}

struct cq_box {
  ibv_comp_channel* ch = nullptr;
  ibv_cq* cq = nullptr;
};

inline std::uint32_t mtu_bytes(ibv_mtu m) {
  switch (m) {
    case IBV_MTU_256: return 256;
    case IBV_MTU_512: return 512;
    case IBV_MTU_1024: return 1024;
    case IBV_MTU_2048: return 2048;
    default: return 4096;
  }
}
inline ibv_mtu mtu_enum(std::uint32_t b) {
  return b >= 4096   ? IBV_MTU_4096
         : b >= 2048 ? IBV_MTU_2048
         : b >= 1024 ? IBV_MTU_1024
         : b >= 512  ? IBV_MTU_512
                     : IBV_MTU_256;
}

inline wc_status status_of(ibv_wc_status s) {
  switch (s) {
    case IBV_WC_SUCCESS: return wc_status::success;
    case IBV_WC_LOC_LEN_ERR: return wc_status::loc_len_err;
    case IBV_WC_LOC_PROT_ERR: return wc_status::loc_prot_err;
    case IBV_WC_WR_FLUSH_ERR: return wc_status::wr_flush_err;
    case IBV_WC_REM_ACCESS_ERR: return wc_status::rem_access_err;
    case IBV_WC_RETRY_EXC_ERR: return wc_status::retry_exc_err;
    case IBV_WC_RNR_RETRY_EXC_ERR: return wc_status::rnr_retry_exc_err;
    default: return wc_status::general_err;
  }
}

inline std::vector<device_info> devices(void*) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  std::vector<device_info> v;
  if (list == nullptr) return v;
  for (int i = 0; i < n; ++i) v.push_back({ibv_get_device_name(list[i]), 1});
  ibv_free_device_list(list);
  return v;
}

inline handle open(void*, const std::string& name) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr) fail("ibv_get_device_list", errno);
  ibv_context* ctx = nullptr;
  for (int i = 0; i < n && ctx == nullptr; ++i)
    if (name == ibv_get_device_name(list[i])) ctx = ibv_open_device(list[i]);
  const int err = errno;
  ibv_free_device_list(list);
  if (ctx == nullptr) fail(("ibv_open_device(" + name + ")").c_str(), err);
  return ctx;
}

inline port_info query_port(handle h, int port, int gid_index) {
  auto* ctx = static_cast<ibv_context*>(h);
  ibv_port_attr a{};
  if (int rc = ibv_query_port(ctx, static_cast<std::uint8_t>(port), &a); rc != 0) fail("ibv_query_port", rc);
  port_info p;
  p.active = a.state == IBV_PORT_ACTIVE;
  p.ethernet = a.link_layer == IBV_LINK_LAYER_ETHERNET;
  p.lid = a.lid;
  p.mtu = mtu_bytes(a.active_mtu);
  const int gi = gid_index >= 0 ? gid_index : 0;
  ibv_gid g{};
  if (ibv_query_gid(ctx, static_cast<std::uint8_t>(port), gi, &g) == 0) std::memcpy(p.gid, g.raw, 16);
  return p;
}

inline handle create_cq(handle h, int depth) {
  auto* ctx = static_cast<ibv_context*>(h);
  auto* b = new cq_box;
  b->ch = ibv_create_comp_channel(ctx);
  if (b->ch == nullptr) {
    delete b;
    fail("ibv_create_comp_channel", errno);
  }
  ::fcntl(b->ch->fd, F_SETFL, ::fcntl(b->ch->fd, F_GETFL) | O_NONBLOCK);
  b->cq = ibv_create_cq(ctx, depth, nullptr, b->ch, 0);
  if (b->cq == nullptr) {
    const int err = errno;
    ibv_destroy_comp_channel(b->ch);
    delete b;
    fail("ibv_create_cq", err);
  }
  return b;
}

inline void destroy_cq(handle h) {
  auto* b = static_cast<cq_box*>(h);
  ibv_destroy_cq(b->cq);
  ibv_destroy_comp_channel(b->ch);
  delete b;
}

inline void drain_events(handle h) {
  auto* b = static_cast<cq_box*>(h);
  ibv_cq* cq = nullptr;
  void* ctx = nullptr;
  unsigned n = 0;
  while (ibv_get_cq_event(b->ch, &cq, &ctx) == 0) ++n;
  if (n != 0) ibv_ack_cq_events(b->cq, n);
}

inline handle create_qp(handle pd, handle cqh, const qp_caps& caps, std::uint32_t* qpn) {
  auto* b = static_cast<cq_box*>(cqh);
  ibv_qp_init_attr a{};
  a.send_cq = b->cq;
  a.recv_cq = b->cq;
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = caps.max_send_wr;
  a.cap.max_recv_wr = caps.max_recv_wr;
  a.cap.max_send_sge = 1;
  a.cap.max_recv_sge = 1;
  a.cap.max_inline_data = 0;
  ibv_qp* qp = ibv_create_qp(static_cast<ibv_pd*>(pd), &a);
  if (qp == nullptr) fail("ibv_create_qp", errno);
  *qpn = qp->qp_num;
  return qp;
}

inline void connect_qp(handle h, const qp_connect& how, const qp_address& local, const qp_address& remote) {
  auto* qp = static_cast<ibv_qp*>(h);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = static_cast<std::uint8_t>(how.port);
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
  if (int rc = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
      rc != 0)
    fail("ibv_modify_qp(INIT)", rc);
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = mtu_enum(remote.mtu);
  a.dest_qp_num = remote.qpn;
  a.rq_psn = remote.psn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.port_num = static_cast<std::uint8_t>(how.port);
  a.ah_attr.sl = how.service_level;
  if (how.gid_index >= 0) {
    a.ah_attr.is_global = 1;
    std::memcpy(a.ah_attr.grh.dgid.raw, remote.gid, 16);
    a.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(how.gid_index);
    a.ah_attr.grh.hop_limit = 255;
    a.ah_attr.grh.traffic_class = how.traffic_class;
  } else {
    a.ah_attr.dlid = remote.lid;
  }
  if (int rc = ibv_modify_qp(qp, &a,
                             IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
      rc != 0)
    fail("ibv_modify_qp(RTR)", rc);
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = how.timeout;
  a.retry_cnt = how.retry_cnt;
  a.rnr_retry = how.rnr_retry;
  a.sq_psn = local.psn;
  a.max_rd_atomic = 1;
  if (int rc = ibv_modify_qp(qp, &a,
                             IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                 IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
      rc != 0)
    fail("ibv_modify_qp(RTS)", rc);
}

inline int post_send(handle h, const send_wr* wrs, int n) {
  auto* qp = static_cast<ibv_qp*>(h);
  for (int i = 0; i < n; ++i) {
    ibv_sge sg{wrs[i].local.addr, wrs[i].local.length, wrs[i].local.lkey};
    ibv_send_wr w{};
    ibv_send_wr* bad = nullptr;
    w.wr_id = wrs[i].wr_id;
    w.sg_list = &sg;
    w.num_sge = 1;
    w.send_flags = wrs[i].signaled ? IBV_SEND_SIGNALED : 0;
    switch (wrs[i].op) {
      case wr_opcode::send: w.opcode = IBV_WR_SEND; break;
      case wr_opcode::rdma_write: w.opcode = IBV_WR_RDMA_WRITE; break;
      case wr_opcode::rdma_write_with_imm:
        w.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
        w.imm_data = htobe32(wrs[i].imm);
        break;
    }
    w.wr.rdma.remote_addr = wrs[i].remote_addr;
    w.wr.rdma.rkey = wrs[i].rkey;
    if (int rc = ibv_post_send(qp, &w, &bad); rc != 0) return rc;
  }
  return 0;
}

inline int post_recv(handle h, const recv_wr* wrs, int n) {
  for (int i = 0; i < n; ++i) {
    ibv_sge sg{wrs[i].local.addr, wrs[i].local.length, wrs[i].local.lkey};
    ibv_recv_wr w{};
    ibv_recv_wr* bad = nullptr;
    w.wr_id = wrs[i].wr_id;
    w.sg_list = &sg;
    w.num_sge = 1;
    if (int rc = ibv_post_recv(static_cast<ibv_qp*>(h), &w, &bad); rc != 0) return rc;
  }
  return 0;
}

inline int poll_cq(handle h, completion* out, int max) {
  ibv_wc wc[32];
  const int n = ibv_poll_cq(static_cast<cq_box*>(h)->cq, max < 32 ? max : 32, wc);
  for (int i = 0; i < n; ++i) {
    completion& c = out[i];
    c.wr_id = wc[i].wr_id;
    c.status = status_of(wc[i].status);
    c.byte_len = wc[i].byte_len;
    c.qpn = wc[i].qp_num;
    c.has_imm = (wc[i].wc_flags & IBV_WC_WITH_IMM) != 0;
    c.imm = c.has_imm ? be32toh(wc[i].imm_data) : 0;
    switch (wc[i].opcode) {
      case IBV_WC_SEND: c.op = wc_opcode::send; break;
      case IBV_WC_RDMA_WRITE: c.op = wc_opcode::rdma_write; break;
      case IBV_WC_RECV_RDMA_WITH_IMM: c.op = wc_opcode::recv_rdma_with_imm; break;
      default: c.op = wc_opcode::recv; break;
    }
  }
  return n < 0 ? 0 : n;
}

}  // namespace rdma_detail

/// rdma-core's provider (one per process).
inline const provider& system_provider() {
  static const provider p = [] {
    namespace d = rdma_detail;
    provider t;
    t.name = "rdma-core";
    t.devices = &d::devices;
    t.open = &d::open;
    t.close = [](handle h) { ibv_close_device(static_cast<ibv_context*>(h)); };
    t.query_port = &d::query_port;
    t.alloc_pd = [](handle h) -> handle {
      ibv_pd* pd = ibv_alloc_pd(static_cast<ibv_context*>(h));
      if (pd == nullptr) d::fail("ibv_alloc_pd", errno);
      return pd;
    };
    t.dealloc_pd = [](handle h) { ibv_dealloc_pd(static_cast<ibv_pd*>(h)); };
    t.reg_mr = [](handle pd, void* addr, std::size_t len, unsigned acc, std::uint32_t* lkey,
                  std::uint32_t* rkey) -> handle {
      int flags = 0;
      if (acc & local_write) flags |= IBV_ACCESS_LOCAL_WRITE;
      if (acc & remote_write) flags |= IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
      if (acc & remote_read) flags |= IBV_ACCESS_REMOTE_READ;
      ibv_mr* mr = ibv_reg_mr(static_cast<ibv_pd*>(pd), addr, len, flags);
      if (mr == nullptr) d::fail("ibv_reg_mr", errno);
      *lkey = mr->lkey;
      *rkey = mr->rkey;
      return mr;
    };
    t.dereg_mr = [](handle h) { ibv_dereg_mr(static_cast<ibv_mr*>(h)); };
    t.create_cq = &d::create_cq;
    t.destroy_cq = &d::destroy_cq;
    t.cq_fd = [](handle h) { return static_cast<d::cq_box*>(h)->ch->fd; };
    t.arm_cq = [](handle h) { ibv_req_notify_cq(static_cast<d::cq_box*>(h)->cq, 0); };
    t.drain_cq_events = &d::drain_events;
    t.create_qp = &d::create_qp;
    t.connect_qp = &d::connect_qp;
    t.destroy_qp = [](handle h) { ibv_destroy_qp(static_cast<ibv_qp*>(h)); };
    t.post_send = &d::post_send;
    t.post_recv = &d::post_recv;
    t.poll_cq = &d::poll_cq;
    return t;
  }();
  return p;
}

#else

/// Built without rdma-core: the ib transport needs a provider given in
/// net::ib_options::provider (net/fake_verbs.hpp for tests).
[[noreturn]] inline const provider& system_provider() {
  throw_error(status::not_supported,
              "COLLX_NET=ib: collx was built without rdma-core's libibverbs (install libibverbs-dev and link "
              "collx::ibverbs)");
}

#endif

}  // namespace collx::net::verbs
