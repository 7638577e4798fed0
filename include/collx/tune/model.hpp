// collx/tune/model.hpp — the α-β-γ model behind the automatic choice.
//
// predict_us<Algo, Proto>(profile, problem) turns an algorithm's constexpr
// cost terms (algo/cost.hpp: steps on the critical path, bytes sent, bytes
// reduced) into microseconds with a transport's measured parameters:
//
//   t = steps · α(proto) + bytes_sent / bw(proto) + bytes_reduced / γ
//
// Algorithms that move data through peer memory (needs_peer_memory: nvls) pay barriers instead
// of protocol steps, and, when they stage through the registered buffers
// instead of reading peers' user buffers in place (single copy), the two
// local copies of staging. When ranks outnumber CPUs, a step costs a context
// switch rather than a cache-line transfer, which is what makes few-step
// schedules win there. Everything is constexpr: a kernel can take its variant
// as a type from a preset profile, and tests can static_assert a choice.
//
// The profile's numbers are parameters, not thresholds: every crossover
// between variants falls out of the cost terms.
#pragma once

#include <collx/coll.hpp>
#include <collx/needs.hpp>
#include <collx/proto/ids.hpp>
#include <collx/proto/list.hpp>

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

/// What is being asked: a collective of `bytes` (as nccl-tests counts them)
/// on `nranks` ranks.
struct problem {
  coll kind;
  int nranks;
  double bytes;
  bool single_copy;     // peer-memory algorithms read user buffers in place at this size
  bool oversubscribed;  // more ranks than CPUs on this node
};

/// Bytes a staged peer-memory schedule copies locally (into the registered
/// buffer and out of it).
constexpr double staging_bytes(coll c, int P, double bytes) {
  switch (c) {
    // Loads from peers' buffers are the cost terms' bytes_sent; these are the rest.
    case coll::all_reduce: return 2 * bytes;          // all in, all out of the own buffer
    case coll::reduce_scatter: return bytes;          // P blocks in
    case coll::all_gather: return 2 * bytes / P;      // own block in and out
    case coll::broadcast: return bytes;               // the root's copy in
    case coll::all_to_all: return bytes + bytes / P;  // P blocks in, the own one out
    default: return 0;
  }
}

/// Predicted time of <A, Pr> for the problem, in µs.
template <class A, class Pr>
constexpr double predict_us(const profile& m, const problem& q) {
  const auto t = A::cost(q.kind, q.nranks, q.bytes);
  const double reduce_us = t.bytes_reduced / m.reduce_gbps / 1e3;
  if constexpr (algorithm_needs<A>::peer_memory) {
    // Single copy publishes the user buffers first: one more barrier.
    const double steps = t.steps + (q.single_copy ? 1 : 0);
    const double step_us = q.oversubscribed ? m.oversub_step_us : m.barrier_us;
    const double staged = q.single_copy ? 0 : staging_bytes(q.kind, q.nranks, q.bytes);
    return steps * step_us + t.bytes_sent / m.peer_gbps / 1e3 + staged / m.copy_gbps / 1e3 + reduce_us;
  } else {
    const link_params& l = m.proto[proto::channel_of<Pr>];
    const double step_us = q.oversubscribed ? m.oversub_step_us : l.alpha_us;
    return t.steps * step_us + t.bytes_sent / l.gbps / 1e3 + reduce_us;
  }
}

}  // namespace collx::tune
