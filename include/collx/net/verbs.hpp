// collx/net/verbs.hpp — the slice of the InfiniBand verbs API the ib
// transport uses, as a table of function pointers.
//
// The transport (net/ib_proxy.hpp) never calls libibverbs directly: it calls
// a `verbs::provider`. Two implement it:
//   net/verbs_rdma.hpp   rdma-core's libibverbs (real HCAs, RoCE, Soft-RoCE);
//                        needs <infiniband/verbs.h> and -libverbs
//                        (CMake: collx::ibverbs)
//   net/fake_verbs.hpp   an in-process fabric with RC semantics and injected
//                        faults, for testing the transport where there is no
//                        RDMA device
// The types are collx's own (plain values and opaque handles), so the
// transport and the fake compile without rdma-core's headers.
//
// Semantics the transport relies on, as reliable connected (RC) queue pairs
// give them: work requests of one QP execute in order; an RDMA WRITE WITH
// IMMEDIATE places its bytes in the remote memory before the remote's
// receive completion (which carries the immediate) is polled; each such
// write and each SEND consumes one receive request posted on the remote QP;
// a remote key or range that does not match the remote's registration fails
// the write (remote access error) and moves both QPs to the error state; a
// QP in the error state completes every outstanding and new request with a
// flush error. An 8-byte, 8-byte-aligned write is seen whole.
//
// Errors: setup functions throw collx::error (status::system_error, or
// not_supported where no device is) naming the call; the data path returns
// an errno-like int (post_*) or a completion status.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace collx::net::verbs {

using handle = void*;

enum class wr_opcode : std::uint8_t { rdma_write, rdma_write_with_imm, send };
enum class wc_opcode : std::uint8_t { send, rdma_write, recv, recv_rdma_with_imm };

enum class wc_status : std::uint8_t {
  success,
  loc_len_err,        // a received SEND longer than the receive buffer
  loc_prot_err,       // a local address outside the lkey's registration
  wr_flush_err,       // the QP is in the error state
  rem_access_err,     // the remote key or range does not match
  retry_exc_err,      // transport retries exhausted: peer or link gone
  rnr_retry_exc_err,  // the receiver posted no receive in time
  general_err,
};

inline const char* to_string(wc_status s) {
  switch (s) {
    case wc_status::success: return "success";
    case wc_status::loc_len_err: return "local length error";
    case wc_status::loc_prot_err: return "local protection error (address outside the lkey's registration)";
    case wc_status::wr_flush_err: return "work request flushed (queue pair in the error state)";
    case wc_status::rem_access_err: return "remote access error (remote key or range not registered there)";
    case wc_status::retry_exc_err: return "transport retry counter exceeded (the peer or the link is gone)";
    case wc_status::rnr_retry_exc_err: return "receiver-not-ready retry counter exceeded";
    case wc_status::general_err: return "general error";
  }
  return "unknown status";
}

/// Memory registration access flags.
enum access : unsigned { local_write = 1u, remote_write = 2u, remote_read = 4u };

struct sge {
  std::uint64_t addr = 0;
  std::uint32_t length = 0;
  std::uint32_t lkey = 0;
};

struct send_wr {
  std::uint64_t wr_id = 0;
  wr_opcode op = wr_opcode::send;
  sge local{};
  std::uint64_t remote_addr = 0;  // RDMA writes
  std::uint32_t rkey = 0;         // RDMA writes
  std::uint32_t imm = 0;          // rdma_write_with_imm
  bool signaled = true;
};

struct recv_wr {
  std::uint64_t wr_id = 0;
  sge local{};
};

struct completion {
  std::uint64_t wr_id = 0;
  wc_status status = wc_status::success;
  wc_opcode op = wc_opcode::send;
  std::uint32_t byte_len = 0;
  std::uint32_t imm = 0;
  bool has_imm = false;
  std::uint32_t qpn = 0;
};

/// What a port reports (query_port).
struct port_info {
  bool active = false;
  bool ethernet = false;  // RoCE: addressed by GID only
  std::uint16_t lid = 0;
  std::uint8_t gid[16]{};
  std::uint32_t mtu = 4096;  // active MTU in bytes
};

/// What a QP's peer needs to connect to it (exchanged through the bootstrap).
struct qp_address {
  std::uint16_t lid = 0;
  std::uint8_t gid[16]{};
  std::uint32_t qpn = 0;
  std::uint32_t psn = 0;
  std::uint32_t mtu = 4096;
};

struct qp_caps {
  std::uint32_t max_send_wr = 256, max_recv_wr = 256;
};

/// Connection parameters (RESET → INIT → RTR → RTS).
struct qp_connect {
  int port = 1;
  int gid_index = -1;         // < 0: LID addressing (IB); >= 0: GID (RoCE v2)
  std::uint8_t timeout = 18;  // local ACK timeout, 4.096 µs · 2^timeout
  std::uint8_t retry_cnt = 7;
  std::uint8_t rnr_retry = 7;  // 7: retry forever
  std::uint8_t service_level = 0;
  std::uint8_t traffic_class = 0;
};

struct device_info {
  std::string name;
  int nports = 1;
};

/// The table. `self` is the provider's own state, passed to the functions
/// that take no handle.
struct provider {
  const char* name = "";
  void* self = nullptr;
  std::vector<device_info> (*devices)(void* self) = nullptr;
  handle (*open)(void* self, const std::string& device) = nullptr;
  void (*close)(handle ctx) = nullptr;
  port_info (*query_port)(handle ctx, int port, int gid_index) = nullptr;
  handle (*alloc_pd)(handle ctx) = nullptr;
  void (*dealloc_pd)(handle pd) = nullptr;
  /// Registers [addr, addr + len); *lkey, *rkey receive the keys.
  handle (*reg_mr)(handle pd, void* addr, std::size_t len, unsigned access, std::uint32_t* lkey,
                   std::uint32_t* rkey) = nullptr;
  void (*dereg_mr)(handle mr) = nullptr;
  /// A completion queue with an event file descriptor (completion channel):
  /// after arm_cq, the fd becomes readable when a completion arrives.
  handle (*create_cq)(handle ctx, int depth) = nullptr;
  void (*destroy_cq)(handle cq) = nullptr;
  int (*cq_fd)(handle cq) = nullptr;
  void (*arm_cq)(handle cq) = nullptr;
  /// Consumes the fd's pending events (non-blocking).
  void (*drain_cq_events)(handle cq) = nullptr;
  handle (*create_qp)(handle pd, handle cq, const qp_caps& caps, std::uint32_t* qpn) = nullptr;
  void (*connect_qp)(handle qp, const qp_connect& how, const qp_address& local,
                     const qp_address& remote) = nullptr;
  void (*destroy_qp)(handle qp) = nullptr;
  int (*post_send)(handle qp, const send_wr* wrs, int n) = nullptr;
  int (*post_recv)(handle qp, const recv_wr* wrs, int n) = nullptr;
  int (*poll_cq)(handle cq, completion* out, int max) = nullptr;
};

}  // namespace collx::net::verbs
