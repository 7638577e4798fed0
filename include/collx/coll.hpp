// collx/coll.hpp — collective kinds and the arguments a schedule receives.
#pragma once

#include <collx/config.hpp>

#include <cstddef>
#include <cstdint>

namespace collx {

/// The collectives. all_to_all and later kinds were appended so that earlier
/// values keep their numbers; send_recv is a group of point-to-point transfers
/// (communicator::send/recv between group_start and group_end).
enum class coll : std::uint8_t {
  all_reduce,
  all_gather,
  reduce_scatter,
  broadcast,
  reduce,
  all_to_all,
  all_to_allv,
  send_recv,
  barrier,
};

inline constexpr int coll_count = 9;

COLLX_HOST_DEVICE constexpr const char* name(coll c) {
  switch (c) {
    case coll::all_reduce: return "all_reduce";
    case coll::all_gather: return "all_gather";
    case coll::reduce_scatter: return "reduce_scatter";
    case coll::broadcast: return "broadcast";
    case coll::reduce: return "reduce";
    case coll::all_to_all: return "all_to_all";
    case coll::all_to_allv: return "all_to_allv";
    case coll::send_recv: return "send_recv";
    case coll::barrier: return "barrier";
  }
  return "invalid";
}

COLLX_HOST_DEVICE constexpr bool is_reduction(coll c) {
  return c == coll::all_reduce || c == coll::reduce_scatter || c == coll::reduce;
}

/// Per-peer layout of an all_to_allv, in elements of the schedule's value
/// type: rank j's block is send[send_displs[j], +send_counts[j]) going out and
/// recv[recv_displs[j], +recv_counts[j]) coming in. Plain pointers to P entries
/// each, so that a device schedule can read them from device memory.
struct peer_layout {
  const std::size_t* send_counts = nullptr;
  const std::size_t* send_displs = nullptr;
  const std::size_t* recv_counts = nullptr;
  const std::size_t* recv_displs = nullptr;
};

/// One point-to-point message of a send_recv group, in elements of the
/// schedule's value type (send buffers are only read).
struct p2p_message {
  void* buf = nullptr;
  std::size_t count = 0;
};

/// A send_recv group as seen from one rank: the messages to peer q are
/// sends[send_begin[q] .. send_begin[q+1]) in issue order, those from q
/// recvs[recv_begin[q] .. recv_begin[q+1]). P+1 offsets each.
struct p2p_plan {
  const p2p_message* sends = nullptr;
  const std::uint32_t* send_begin = nullptr;
  const p2p_message* recvs = nullptr;
  const std::uint32_t* recv_begin = nullptr;
};

/// What a schedule reports when ranks disagree on a transfer's size (a count
/// header that does not match what this rank expects). Lives in memory the
/// whole worker group sees; the schedule's receive headers land in `header`.
struct mismatch_report {
  /// Scratch for incoming header calls (algo::direct's message streams:
  /// 16 bytes of counts, then a short message itself). Consecutive headers
  /// alternate between the two: a worker of the group may still compare one
  /// header while a faster one already receives the next, and every receive
  /// ends with a group sync, so no worker is ever two headers ahead.
  std::uint64_t header[2][16] = {};
  int peer = -1;    // the peer whose header disagreed
  int message = 0;  // which message of that peer (send_recv groups)
  std::uint64_t expected = 0, got = 0;
  bool messages = false;  // got/expected are message counts, not element counts
  /// The counts agree, but the ends disagree on whether the message is read
  /// in place (their thresholds differ: stream_read_in_place_bytes); got:
  /// whether the sender offered it.
  bool read_in_place = false;
};

/// Bytes from which a message of an all_to_allv or send_recv stream is read
/// from the sender's buffer (algo::direct), given the communicator's
/// single-copy threshold (comm_options::single_copy_min_for; UINT64_MAX:
/// off) and whether the agreed contention share is above 0
/// (comm/contention.hpp). On a quiet machine a message must be 8 times the
/// threshold (2 MiB by default on process ranks; thread ranks' threshold is
/// 0: every message too long for its header is read so): a cross-memory-attach read is slower
/// than the two cache-resident copies of the pipelined FIFO path up to about
/// that size (bench/results/p2p_single_copy_2026-12-05.md); under contention
/// a read needs the peer on a CPU only for its header and its token, not at
/// every FIFO step, and wins from the threshold.
/// Every rank computes the same value (both inputs are agreed).
COLLX_HOST_DEVICE constexpr std::uint64_t stream_read_in_place_bytes(std::uint64_t single_copy_min,
                                                                     bool contended) {
  constexpr std::uint64_t quiet_factor = 8, off = ~std::uint64_t{0};
  if (single_copy_min == off || contended) return single_copy_min;
  return single_copy_min > off / quiet_factor ? off : single_copy_min * quiet_factor;
}

/// Whether L ranks per node describe M >= 2 nodes of L >= 2 ranks that P
/// ranks fill (the layout schedule_args::node_ranks and
/// algo::cost_context::node_ranks state; 0 or anything else: no layout).
COLLX_HOST_DEVICE constexpr bool fills_nodes(int P, int L) { return L >= 2 && P % L == 0 && P / L >= 2; }

/// What a schedule needs to know, in elements of its value type. `count` is
/// the per-call count with NCCL's conventions: all_reduce/broadcast/reduce the
/// buffer length; all_gather the per-rank send count; reduce_scatter the
/// per-rank receive count; all_to_all the count per peer. all_to_allv reads
/// `layout` and send_recv `plan` instead, and report disagreeing counts
/// through `report`.
///
/// `stride`: elements from one rank's block to the next in the blocked
/// buffers (all_gather's recv, reduce_scatter's send, all_to_all's both); 0
/// means `count`. A call split into stripes (collx/stripes.hpp) gives each stripe a
/// slice of every block, so its blocks lie `stride` apart while it moves
/// `count` elements of each; schedules address blocks through block().
template <class T>
struct schedule_args {
  const T* send = nullptr;
  T* recv = nullptr;
  std::size_t count = 0;
  int root = 0;
  int rank = 0;
  int nranks = 1;
  const peer_layout* layout = nullptr;
  const p2p_plan* plan = nullptr;
  mismatch_report* report = nullptr;
  std::size_t stride = 0;
  /// Ranks per node where the communicator's ranks fill M >= 2 nodes of
  /// node_ranks >= 2 ranks each, numbered node by node (rank = node ·
  /// node_ranks + local rank); 0 otherwise (one node, or no such layout).
  /// Topology-aware schedules shape themselves by it (algo::tree's
  /// all_reduce: a tree across nodes with chains inside); set by the
  /// communicator from its transport view (transport/proxied.hpp).
  int node_ranks = 0;
  /// all_to_allv and send_recv: messages of at least this many bytes to
  /// another rank are read from the sender's buffer where the primitives can
  /// (prims::read_peer); UINT64_MAX: never. Set by the communicator
  /// (stream_read_in_place_bytes), the same on every rank.
  std::uint64_t read_in_place_bytes = ~std::uint64_t{0};

  /// Elements between consecutive ranks' blocks.
  COLLX_HOST_DEVICE constexpr std::size_t block() const { return stride != 0 ? stride : count; }
};

}  // namespace collx
