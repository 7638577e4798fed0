// collx/tune/model.hpp — the α-β-γ model behind the automatic choice.
//
// predict_us<Algo, Proto>(profile, problem) prices an algorithm's constexpr
// cost terms (algo/cost.hpp) with a transport's measured parameters:
//
//   t = steps · α(proto) + bytes_sent / bw(proto)               connections
//     + barriers · barrier + peer_bytes / peer_bw + staged_bytes / copy_bw
//                                                               peer memory
//     + bytes_reduced / γ
//
// When ranks outnumber CPUs, a step or a barrier costs a context switch rather
// than a cache-line transfer, which is what makes few-step schedules win there.
// The model knows no algorithm: what a schedule does (nvls's staging, direct's
// one-shot/two-shot switch) is in its cost(), which gets from the problem what
// it may depend on (algo::cost_context: the protocol's chunk bytes from the
// real FIFO geometry, single copy). Everything is constexpr, so a choice over
// a preset profile can be static_asserted (tune/select.hpp).
//
// The profile's numbers are parameters, not thresholds: every crossover
// between variants falls out of the cost terms.
#pragma once

#include <collx/algo/cost.hpp>
#include <collx/coll.hpp>
#include <collx/options.hpp>
#include <collx/proto/list.hpp>
#include <collx/type_list.hpp>

#include <array>
#include <cstdint>

namespace collx::tune {

/// One protocol over one transport: per-step latency and the payload
/// bandwidth a connection streams at.
struct link_params {
  double alpha_us;
  double gbps;
};

/// A transport's parameters, measured on a machine.
struct profile {
  link_params proto[proto::channel_count];  // per compiled protocol, in channel order (proto/list.hpp)
  double barrier_us;       // one barrier of a peer-memory algorithm
  double peer_gbps;        // reading or writing peers' buffers
  double copy_gbps;        // a local copy (staging)
  double reduce_gbps;      // γ: bytes combined per second
  double oversub_step_us;  // a step when ranks outnumber CPUs (a context switch)
};

/// The shared-memory transport between CPU ranks, measured on 2 process
/// ranks of a 2-core AMD EPYC with bench/calibrate.sh and collx-model
/// calibrate (bench/results/tuner.md: the runs, how each number is derived,
/// and how much two runs differed). Cross-memory attach reads (peer_gbps)
/// measured slower than the ring's pipelined FIFO copies there, so the model
/// leaves large all_reduce to ring on that machine.
inline constexpr profile shm_host{
    .proto = {{0.80, 7.0}, {0.65, 0.58}, {0.78, 2.6}},
    .barrier_us = 0.5,
    .peer_gbps = 2.5,
    .copy_gbps = 25.0,
    .reduce_gbps = 19.6,
    .oversub_step_us = 12.0,
};

/// Per compiled protocol (channel order): payload bytes one primitive call
/// moves at most (prims::max_chunk() in bytes).
using chunk_table = std::array<double, proto::channel_count>;

/// Protocol P's chunk on FIFOs of `slots` slots of `slot_bytes` bytes: half
/// the FIFO (at least one slot), in payload bytes, as its engine cuts calls.
template <class P>
constexpr double chunk_bytes(double slot_bytes, std::uint32_t slots) {
  return slot_bytes * P::payload_efficiency * double(slots / 2 > 0 ? slots / 2 : 1);
}

/// The chunk table of FIFOs whose channel ch has slots(ch) slots of
/// slot_bytes(ch) bytes (a transport view's fifo_slots / fifo_slot_bytes).
template <class Slots, class SlotBytes>
constexpr chunk_table chunk_table_of(Slots slots, SlotBytes slot_bytes) {
  return [&]<class... Ps>(type_list<Ps...>) {
    return chunk_table{
        chunk_bytes<Ps>(double(slot_bytes(proto::channel_of<Ps>)), slots(proto::channel_of<Ps>))...};
  }(proto::compiled{});
}

/// The chunk table of a communicator made with default options.
inline constexpr chunk_table default_chunks = [] {
  constexpr comm_options o{};
  return chunk_table_of([&](int) { return o.fifo_slots; },
                        [&](int ch) { return o.slot_bytes[static_cast<std::size_t>(ch)]; });
}();

/// What is being asked: a collective of `bytes` (as nccl-tests counts them)
/// on `nranks` ranks, and how it would run on the communicator's transport.
struct problem {
  coll kind;
  int nranks;
  double bytes;
  bool single_copy = false;     // peer-memory algorithms read user buffers in place at this size
  bool oversubscribed = false;  // more ranks than CPUs on this node
  /// The FIFO geometry (comm/dispatch.hpp reads the transport's).
  chunk_table chunks = default_chunks;
};

/// Predicted time of <A, Pr> for the problem, in µs.
template <class A, class Pr>
constexpr double predict_us(const profile& m, const problem& q) {
  constexpr int ch = proto::channel_of<Pr>;
  const algo::cost_terms t =
      A::cost(q.kind, q.nranks, q.bytes, algo::cost_context{q.chunks[ch], q.single_copy});
  const link_params& l = m.proto[ch];
  const double step_us = q.oversubscribed ? m.oversub_step_us : l.alpha_us;
  const double barrier_us = q.oversubscribed ? m.oversub_step_us : m.barrier_us;
  return t.steps * step_us + t.bytes_sent / l.gbps / 1e3 + t.barriers * barrier_us +
         t.peer_bytes / m.peer_gbps / 1e3 + t.staged_bytes / m.copy_gbps / 1e3 +
         t.bytes_reduced / m.reduce_gbps / 1e3;
}

}  // namespace collx::tune
