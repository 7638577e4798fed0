// collx/algo/cost.hpp — the terms every algorithm's cost() returns, and what
// a cost may depend on besides the collective, the rank count and the size.
//
// Every algorithm's constexpr cost(coll, P, bytes, cost_context = {}) returns
// terms with one meaning (checked against the real schedules by
// tests/unit/test_cost.cpp). Through connections (FIFOs):
//   steps          the Lamport depth of the schedule run with unbounded chunks:
//                  each message is stamped one more than the largest stamp its
//                  sender had received before sending it (in program order);
//                  steps is the largest stamp any rank receives — the number of
//                  message latencies (α) on the critical path;
//   bytes_sent     the most bytes any one rank sends (β term), headers and
//                  tokens included.
// Through peer memory (needs_peer_memory), which has no connections:
//   barriers       barriers on the critical path (each one all-to-all latency);
//   peer_bytes     the most bytes any one rank loads from or stores to other
//                  ranks' buffers;
//   staged_bytes   the most bytes any one rank copies within its own memory to
//                  stage data through its registered buffer;
//   switch_bytes   with a multicast address (cost_context::multicast), the most
//                  bytes one rank's link to the switch carries in one direction
//                  for the switch channel's load-reduces and stores: a
//                  load-reduce of n bytes reads n from every rank and returns
//                  n to the caller, a store of n takes n from the caller and
//                  writes n into every rank (the switch combines and copies,
//                  so these bytes are neither peer_bytes nor bytes_reduced).
// Either way:
//   bytes_reduced  the most bytes any one rank combines with received data (γ);
//   local_bytes    the most bytes any one rank copies within its own memory in
//                  a pass of their own, outside any transfer: its own block
//                  placed into recv by a separate copy (once), a message
//                  through its loopback FIFO (twice: in and out). A copy fused
//                  with a send (copy_send writes the FIFO and recv from one
//                  read) or with a reduction costs nothing here, nor does one
//                  made while the rank waits for its peers (after its first
//                  send, before its last receive).
// Across nodes (cost_context::node_ranks: ranks placed node by node):
//   node_bytes     the most bytes the ranks of one node send to ranks of other
//                  nodes, together; < 0 where an algorithm does not state it
//                  (the model then estimates it from the schedule on one rank
//                  per node).
//   node_steps     the most messages between nodes on one causal chain (the
//                  Lamport depth counting only messages that cross nodes; of
//                  equally deep chains the longest): the steps paid at the
//                  inter-node α; < 0 where not stated (the model then takes
//                  the steps of the schedule on one rank per node).
// A message a rank sends itself (through its loopback FIFO) is a local copy:
// it carries its sender's stamp unchanged and is not a sent byte (it is
// local_bytes). Copies through a rank's registered buffer are staging; other
// copies within its own memory are local_bytes. With one rank every term is 0
// (every variant makes the same copy). The tuner (tune/model.hpp) prices each
// term with a transport's measured parameters and knows no algorithm.
#pragma once

#include <collx/coll.hpp>
#include <collx/config.hpp>

#include <limits>

namespace collx::algo {

/// The terms on the critical path of one collective call (see above).
/// Terms an algorithm does not incur stay 0.
struct cost_terms {
  double steps = 0, bytes_sent = 0, bytes_reduced = 0;
  double barriers = 0, peer_bytes = 0, staged_bytes = 0;
  double node_bytes = -1, node_steps = -1;
  double local_bytes = 0;
  double switch_bytes = 0;
};

/// Every byte the rank's memory system moves on the critical path: what it
/// sends, reads in peers' memory, stages, copies locally and reduces. The
/// tuner charges cache misses per touched byte (tune/model.hpp, tune/fit.hpp).
COLLX_HOST_DEVICE constexpr double touched_bytes(const cost_terms& t) {
  return t.bytes_sent + t.peer_bytes + t.staged_bytes + t.local_bytes + t.bytes_reduced + t.switch_bytes;
}

/// What a cost may depend on besides (collective, P, bytes): how the call
/// runs on its transport, as the tuner's problem states it. The defaults are
/// those of the terms' definitions above (unbounded chunks, staged).
struct cost_context {
  /// Payload bytes one primitive call of the variant's protocol moves at most
  /// (prims::max_chunk() in bytes), from the real FIFO geometry.
  double chunk_bytes = std::numeric_limits<double>::infinity();
  /// Peers' user buffers are readable in place at this size (single copy):
  /// peer-memory schedules skip their registered buffers.
  bool single_copy = false;
  /// Bytes of each rank's registered buffer, through which peer-memory
  /// schedules stage a call segment by segment (a barrier pair each); 0:
  /// unbounded, one segment.
  double peer_buffer_bytes = 0;
  /// Ranks per node as schedule_args::node_ranks states it (0: one node or
  /// no node-by-node layout): topology-aware schedules are costed in the
  /// shape they run in.
  int node_ranks = 0;
  /// The call is in place on every rank (all_gather: each rank's send is its
  /// own block of recv; broadcast: the root's send is its recv): a copy of
  /// the own data into place is skipped, so local_bytes leave it out, and
  /// nvls's in-place broadcast root takes a share of the copies. The dispatch
  /// states it for all_gather only, where it moves the choice (single copy in
  /// place has nothing left to copy of its own). Not for broadcast: only the
  /// root's buffers matter there, and the other ranks, which must choose
  /// alike, cannot know them when they choose (an MPI or NCCL broadcast
  /// ignores their send buffers), so the choice prices broadcast out of
  /// place. all_reduce: send is recv, which rules out nvls's one-shot
  /// (one_shot_bytes; GPU groups state it, tune/mesh_problem.hpp). Other
  /// collectives' costs ignore it.
  bool in_place = false;
  /// The registered buffers are bound to a multicast address (an NVSwitch
  /// multicast object; the profile has a multicast rate): the switch
  /// channel's operations are switch_bytes, and schedules that store through
  /// it (prims::mc_store_fans_out) take that path.
  bool multicast = false;
  /// A single-copy all_reduce of up to this many bytes, out of place, is
  /// one-shot (algo::nvls: each rank reduces the whole of every send; the
  /// transport's size, as GPU windows set it); 0: never.
  double one_shot_bytes = 0;
};

/// Whether x places P ranks node by node on >= 2 nodes of >= 2 ranks (the
/// layout node_bytes is stated for).
COLLX_HOST_DEVICE constexpr bool placed_in_nodes(int P, const cost_context& x) {
  return fills_nodes(P, x.node_ranks);
}

/// The least whole number >= v (v >= 0), usable in constant expressions.
COLLX_HOST_DEVICE constexpr double ceil_nonneg(double v) {
  const auto i = static_cast<unsigned long long>(v);
  return double(i) < v ? double(i + 1) : double(i);
}

}  // namespace collx::algo
