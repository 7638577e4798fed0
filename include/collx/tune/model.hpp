// collx/tune/model.hpp — the α-β-γ model behind the automatic choice.
//
// predict_us<Algo, Proto>(profile, problem) prices an algorithm's constexpr
// cost terms (algo/cost.hpp) with a machine's parameters (a profile: per link
// kind α and one-direction bandwidth, per protocol extra α and payload
// efficiency, γ, ranks per node), on one node:
//
//   t = call + steps · (α(link) + α(proto)) + (bytes_sent + fill) / (bw(link) · eff(proto))
//                                                               connections
//     + barriers · barrier + peer_bytes / peer_bw + staged_bytes / copy_bw
//                                    (peer_bw: single_copy_gbps when the call
//                                     reads peers' user buffers in place;
//                                     copy_gbps where they are mapped)     peer memory
//     + switch_bytes / multicast_bw     (a multicast address: multicast_gbps > 0)
//     + local_bytes / copy_bw                                   copies of its own
//     + bytes_reduced · max(0, 1/γ − 1/operand bw)          reduction
//     + (near_miss / near + miss / mem) · touched                caches
//   touched = bytes_sent + peer_bytes + staged_bytes + local_bytes + bytes_reduced + switch_bytes
//
// local_bytes are the copies a schedule makes of its own data in a pass of
// their own (the own block into recv before an exchange, a loopback FIFO). On
// 2 ranks ring's all_gather, which writes its block into recv as it sends it,
// took 938-998 µs at 16 MiB and rhd's and direct's, which copied it first,
// 1065-1180 µs, while every other term of the three is the same
// (bench/results/tuner_quality_notes.md, 2026-12-05).
//
// call is what every call costs whatever its schedule (argument and
// mismatch checks, the call record, the choice); with ranks outnumbering
// CPUs, oversub_call: the ranks of a call first have to meet, which costs
// context switches however few steps follow (4 ranks on 2 CPUs: 8 B
// all_reduce in one step 5 µs, in four steps 11 µs, bench/results/probe_bar.md).
//
// fill is what a pipeline does not hide: at every step on the critical path
// a receiver waits for the first granule its sender writes before it can
// use any of it (fill_bytes: steps · min(bytes per step, granule)). For
// Simple the granule is a FIFO slot, which its sender posts whole, so a
// message shorter than a slot is stored and then forwarded (its bytes are
// copied twice in turn, not once in a pipeline); LL and LL128 flag every
// line, so their granule is a line, except on a transport whose proxy
// delivers each step whole (delivers_whole_steps): there every protocol's
// granule is a slot. Without this term the model priced
// one-shot Simple schedules at 4-32 KiB 1.4-1.7x faster than they ran
// (bench/results/probe_repeatability.md).
//
// The last term is the caches, two levels: while a call's working set
// (every rank's input and output on the node) fits the near cache (the level
// below the last, all instances: a CPU's L2s), bytes move at the rates
// above, which a probe measures there; the share that misses it
// (near_miss = 1 − near cache / working set) also pays near_gbps, and the
// share that misses the last-level cache (miss) pays mem_gbps besides.
// Shared-memory bandwidth on a CPU falls several-fold between a 64 KiB and a
// 64 MiB call, and one β cannot describe both ends: fitted with one cache
// level, the peer and copy rates came out 3-4x below what staged copies
// of 4-32 KiB achieve in L2.
//
// When ranks outnumber CPUs, a step costs a context switch rather than a
// cache-line transfer (plus the protocol's oversub_extra_us), which is what
// makes few-step schedules win there, and every byte takes ranks / CPUs as
// long (problem::cpu_share). A barrier costs one context switch per rank
// sharing a CPU (ranks / CPUs of them): it completes only once every rank has
// run, while a step waits for one peer, and a sender whose FIFO has room does
// not wait at all (4 ranks on 2 CPUs, broadcast of 8 B: nvls's two barriers
// 7.6–9.4 µs, ring's chain about 1 µs, bench/results/collectives_4proc_vs_ompi.md).
//
// When other tasks take a share c of the ranks' CPUs (problem::contention),
// a rank runs a fraction 1 − c of the time, so everything it does takes
// 1 / (1 − c) as long. Worse, at every synchronisation with a peer (a step; a
// FIFO's worth of bytes sent, after which the sender stops until the receiver
// drains it; a barrier) the peer is off its CPU with probability c, and
// waiting for it costs about a scheduler time slice (problem::slice_us): the
// waiting rank spins, yields, and the task it yields to keeps the CPU for its
// slice. So contention favours schedules with few synchronisations that read
// peers' buffers in place over pipelined ones, several-fold at large sizes,
// which is what measurements under a busy loop per CPU show
// (bench/results/contention_notes.md).
// The model knows no algorithm: what a schedule does (nvls's staging, direct's
// one-shot/two-shot switch) is in its cost(), which gets from the problem what
// it may depend on (algo::cost_context: the protocol's chunk bytes from the
// real FIFO geometry, single copy). Everything is constexpr, so a choice over
// a preset profile can be static_asserted (tune/select.hpp), and the run-time
// choice calls the same functions with a loaded profile (tune/active.hpp).
// Across nodes, see predict() below.
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
#include <limits>

namespace collx::tune {

/// What joins two ranks. The model prices a link by its one-direction
/// latency and bandwidth; the kind names it in profiles and in explanations.
enum class link_kind : int { shm, nvlink, pcie, ib, roce, tcp };

inline constexpr const char* link_kind_names[] = {"shm", "nvlink", "pcie", "ib", "roce", "tcp"};
constexpr const char* name(link_kind k) { return link_kind_names[static_cast<int>(k)]; }

/// One link kind: per-step latency of its fastest protocol and the
/// one-direction bandwidth one rank streams at (GB/s = bytes per ns).
struct link {
  link_kind kind = link_kind::shm;
  double alpha_us = 0;
  double gbps = 0;
};

/// A protocol on any link: the latency it adds per step to the link's, and
/// the share of the link's bandwidth it delivers as payload (LL's flags halve
/// it on paper; polling costs more on CPUs). efficiency 0: the protocol is
/// not usable on this machine (its predictions are infinite).
struct proto_params {
  double extra_alpha_us = 0;
  double efficiency = 1;
  /// What a step adds to profile::oversub_step_us when ranks outnumber CPUs:
  /// protocols differ in how many waits a step makes (Simple's sender waits
  /// for credits, LL's writes flags and goes on), and each wait may be a
  /// context switch.
  double oversub_extra_us = 0;
};

/// A machine as the model sees it, two levels deep: ranks_per_node ranks
/// share a node and talk over `intra`; nodes talk over `inter`, each rank
/// through its share of the node's NICs (inter.gbps per rank). With
/// ranks_per_node 0 every rank is on one node. Measured by collx-probe for
/// this machine (tune/profile_file.hpp), preset for others (tune/presets.hpp).
struct profile {
  link intra;
  link inter{link_kind::tcp, 0, 0};
  int ranks_per_node = 0;
  proto_params proto[proto::channel_count];  // per compiled protocol, in channel order (proto/list.hpp)
  double barrier_us = 0;                     // one barrier of a peer-memory algorithm
  double call_us = 0;           // what every call costs besides its schedule (checks, the call record)
  double oversub_call_us = 0;   // the same when ranks outnumber CPUs (the ranks' first meeting)
  double peer_gbps = 0;         // reading or writing peers' buffers (a switch channel's emulated copies)
  double single_copy_gbps = 0;  // reading peers' user buffers in place (cross-memory attach for process
                                // ranks; problem::single_copy); 0: at peer_gbps
  double copy_gbps = 0;         // a local copy (staging)
  double reduce_gbps = 0;       // γ: bytes combined per second
  double oversub_step_us = 0;   // a step when ranks outnumber CPUs (a context switch)
  double cache_bytes = 0;       // the node's last-level cache (all of it); 0: no cache term
  double mem_gbps = 0;          // extra rate for bytes that miss it; 0: no cache term
  double near_cache_bytes = 0;  // the level below it (all instances); 0: no near-cache term
  double near_gbps = 0;         // extra rate for bytes that miss the near cache; 0: no near-cache term
  /// One-direction rate of a rank's link for traffic through a multicast
  /// address (an NVSwitch multicast object: algo::cost_terms::switch_bytes);
  /// 0: the ranks have none, and a switch channel's operations are peer
  /// loads and stores at peer_gbps (algo::cost_context::multicast).
  double multicast_gbps = 0;

  /// Per-step latency and payload bandwidth of protocol channel ch on link l.
  constexpr double alpha_us(const link& l, int ch) const { return l.alpha_us + proto[ch].extra_alpha_us; }
  constexpr double gbps(const link& l, int ch) const { return l.gbps * proto[ch].efficiency; }
  /// Nodes that P ranks fill.
  constexpr int nodes(int P) const {
    return ranks_per_node > 0 && P > ranks_per_node ? (P + ranks_per_node - 1) / ranks_per_node : 1;
  }
};

/// The shared-memory transport between CPU ranks, measured on 2 process
/// ranks of a 2-core AMD EPYC with bench/calibrate.sh and collx-model
/// calibrate (bench/results/tuner.md: the runs, how each number is derived,
/// and how much two runs differed). The link is LL's latency and Simple's
/// bandwidth; the other protocols are offsets and shares of them (α: Simple
/// 0.80, LL 0.65, LL128 0.78 µs; GB/s: 7.0, 0.58, 2.6). Cross-memory attach
/// reads (peer_gbps) measured slower than the ring's pipelined FIFO copies
/// there, so the model leaves large all_reduce to ring on that machine.
inline constexpr profile shm_host{
    .intra = {link_kind::shm, 0.65, 7.0},
    .proto = {{0.15, 1.0}, {0.0, 0.58 / 7.0}, {0.13, 2.6 / 7.0}},
    .barrier_us = 0.5,
    .peer_gbps = 2.5,
    .copy_gbps = 25.0,
    .reduce_gbps = 19.6,
    .oversub_step_us = 12.0,
};

/// Bytes a call touches on one node: every rank's input and output (FIFOs
/// and staging are small beside them), for `local` ranks of the node, with
/// `bytes` counted as nccl-tests does (tune/model.hpp's problem).
constexpr double working_set_bytes(coll c, int local, double bytes) {
  switch (c) {
    case coll::all_gather:
    case coll::reduce_scatter:
    case coll::reduce:
      return bytes * (local + 1);  // one side is bytes / P per rank (reduce: the root's output)
    default: return 2 * bytes * local;
  }
}

/// Share of a working set's bytes that miss a cache of cache_bytes (0: no
/// cache term): an LRU cache streaming twice its size misses half.
constexpr double cache_miss(double cache_bytes, double working_set) {
  return cache_bytes > 0 && working_set > cache_bytes ? 1 - cache_bytes / working_set : 0;
}

/// Share of a call's bytes that miss the last-level cache of profile m
/// (0 where m has no cache term).
constexpr double miss_share(const profile& m, double working_set) {
  return m.mem_gbps > 0 ? cache_miss(m.cache_bytes, working_set) : 0;
}

/// Share of a call's bytes that miss the near cache of profile m (0 where m
/// has no near-cache term).
constexpr double near_miss_share(const profile& m, double working_set) {
  return m.near_gbps > 0 ? cache_miss(m.near_cache_bytes, working_set) : 0;
}

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
inline constexpr chunk_table default_chunks =
    chunk_table_of([](int) { return comm_options::default_fifo_slots; },
                   [](int ch) { return proto::channels[static_cast<std::size_t>(ch)].default_slot_bytes; });

/// Protocol P's granule on slots of `slot_bytes` bytes: the payload bytes a
/// receiver waits for before it can use any of them (see fill above): a
/// slot where P posts whole slots (P::posts_whole_slots) or the transport
/// delivers whole steps (`whole_steps`: a proxy), else a line.
template <class P>
constexpr double granule_bytes(double slot_bytes, bool whole_steps = false) {
  if constexpr (requires { requires P::posts_whole_slots; }) return slot_bytes * P::payload_efficiency;
  else return (whole_steps ? slot_bytes : double(P::channel.line_bytes)) * P::payload_efficiency;
}

/// The granule table of FIFOs whose channel ch has slots of slot_bytes(ch)
/// bytes, on a transport that delivers whole steps or not.
template <class SlotBytes>
constexpr chunk_table granule_table_of(SlotBytes slot_bytes, bool whole_steps = false) {
  return [&]<class... Ps>(type_list<Ps...>) {
    return chunk_table{granule_bytes<Ps>(double(slot_bytes(proto::channel_of<Ps>)), whole_steps)...};
  }(proto::compiled{});
}

/// The granule table of a communicator made with default options.
inline constexpr chunk_table default_granules =
    granule_table_of([](int ch) { return proto::channels[static_cast<std::size_t>(ch)].default_slot_bytes; });

/// Bytes a schedule's pipeline does not hide (the fill term above): at each
/// of its steps, the first granule of that step's message (its bytes taken
/// as bytes_sent / steps).
constexpr double fill_bytes(const algo::cost_terms& t, double granule) {
  if (!(t.steps > 0) || !(t.bytes_sent > 0)) return 0;
  const double per_step = t.bytes_sent / t.steps;
  return t.steps * (per_step < granule ? per_step : granule);
}

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
  /// CPUs per rank on this node when oversubscribed (CPUs / ranks, < 1): the
  /// ranks' copies and reductions share the CPUs, so every byte takes
  /// 1 / cpu_share as long. 1 otherwise.
  double cpu_share = 1;
  /// Share of CPU time the ranks lose to other tasks (comm/contention.hpp
  /// measures and agrees it), when not oversubscribed: see price_one_node.
  double contention = 0;
  /// The scheduler's time slice on this node (scheduler_slice_us), µs: what
  /// waiting for a peer that is off its CPU costs under contention.
  double slice_us = 1500;
  /// Each rank's registered buffer, through which peer-memory schedules
  /// stage (algo::cost_context); 0: unbounded.
  double peer_buffer_bytes = 0;
  /// Per protocol, the payload bytes a receiver waits for before it can use
  /// any (granule_table_of; the fill term).
  chunk_table granules = default_granules;
  /// Some peer's steps arrive whole through a proxy (delivers_whole_steps;
  /// comm/dispatch.hpp, steps_arrive_whole): every protocol's step then waits
  /// for what Simple's does (on_whole_steps).
  bool whole_steps = false;
  /// The call is in place on every rank (algo::cost_context::in_place; the
  /// dispatch states it for all_gather only, collx-explain --in-place for any).
  bool in_place = false;
  /// With single_copy: every buffer of the call lies in symmetric memory that
  /// every peer mapped (communicator::alloc_symmetric), so peers' buffers are
  /// read and written by memcpy through a mapping, priced at copy_gbps instead
  /// of single_copy_gbps (cross-memory attach).
  bool mapped_peers = false;
  /// With single_copy: an all_reduce of up to this many bytes, out of place,
  /// is one-shot (algo::cost_context::one_shot_bytes; GPU windows); 0: never.
  double one_shot_bytes = 0;
};

/// Profile m as a transport that delivers whole steps sees it: a receiver
/// waits for the proxy's whole step whatever the protocol, so no protocol's
/// step is quicker than Simple's (LL's cheaper signal is of no use there:
/// all_reduce 16-32 B over veth, LL 3.9-4.3 us against Simple's 3.7-4.0,
/// bench/results/net_ll.md). Bandwidths and the rest are unchanged.
constexpr profile on_whole_steps(profile m) {
  const proto_params simple = m.proto[proto::channel_of<proto::simple>];
  for (proto_params& p : m.proto) {
    if (p.extra_alpha_us < simple.extra_alpha_us) p.extra_alpha_us = simple.extra_alpha_us;
    if (p.oversub_extra_us < simple.oversub_extra_us) p.oversub_extra_us = simple.oversub_extra_us;
  }
  return m;
}

/// Linux's default time slice on a node of `ncpus` CPUs, µs: 0.75 ms scaled
/// by 1 + log2(CPUs, at most 8) (the scheduler's base slice, and CFS's minimum
/// granularity before it, under the default logarithmic tunable scaling).
constexpr double scheduler_slice_us(int ncpus) {
  int factor = 1;
  for (int n = ncpus < 8 ? ncpus : 8; n > 1; n /= 2) ++factor;
  return 750.0 * factor;
}

/// Contention as price_one_node takes it: the share of CPU time other tasks
/// take (0: none), the slice a wait for a peer off its CPU costs, and the
/// payload bytes a connection's FIFO holds (a sender stops after that many).
struct contended {
  double share = 0;
  double slice_us = 0;
  double fifo_bytes = 0;
};

/// A prediction split by what it pays for, in µs: per-step latencies and
/// barriers; bytes over links, peers' memory and staging copies; reduction.
struct prediction {
  double latency_us = 0, bandwidth_us = 0, reduction_us = 0;
  constexpr double total_us() const { return latency_us + bandwidth_us + reduction_us; }
};

inline constexpr double unavailable_us = std::numeric_limits<double>::infinity();

/// The time reductions of `bytes_reduced` bytes add to a call, µs. Every
/// reduction is fused with the transfer that brings its operand
/// (recv_reduce_copy, recv_reduce_send; a peer-memory schedule's loads) and
/// runs while the bytes stream in, so it costs only what γ takes beyond that
/// transfer's rate, operand_gbps: nothing where γ is the faster (measured on
/// CPU ranks, an all_reduce moves its bytes as fast as an all_gather does;
/// NCCL's model has no reduction term at all).
constexpr double reduction_us(const profile& m, double bytes_reduced, double operand_gbps) {
  if (bytes_reduced <= 0) return 0;
  const double extra = 1 / m.reduce_gbps - (operand_gbps > 0 ? 1 / operand_gbps : 0);
  return extra > 0 ? bytes_reduced * extra / 1e3 : 0;
}

/// Context switches an oversubscribed barrier costs (in oversubscribed step
/// units): one per rank sharing a CPU, ranks / CPUs = 1 / cpu_share, at least 1.
constexpr double oversubscribed_barrier_switches(double cpu_share) {
  return cpu_share > 0 && cpu_share < 1 ? 1 / cpu_share : 1;
}

/// The CPU share (problem::cpu_share) a what-if question "P ranks,
/// oversubscribed" means on a node of `cpus` CPUs: cpus / P where they are
/// fewer than P, else two ranks per CPU. For the tools' --oversubscribed;
/// communicators know their own share (comm/state.hpp).
constexpr double assumed_oversubscribed_share(int cpus, int P) {
  return cpus > 0 && cpus < P ? double(cpus) / P : 0.5;
}

/// How a one-node call runs, besides what its schedule does (its cost
/// terms): what price_one_node needs of the problem.
struct call_shape {
  int channel = 0;              // the protocol's channel
  bool oversubscribed = false;  // problem::oversubscribed
  double miss = 0;              // share of bytes missing the last-level cache (miss_share)
  double near_miss = 0;         // share of bytes missing the near cache (near_miss_share)
  double cpu_share = 1;         // problem::cpu_share
  bool single_copy = false;     // problem::single_copy
  double fill_bytes = 0;        // the pipeline's fill (fill_bytes())
  contended busy{};             // problem::contention
  bool mapped_peers = false;    // problem::mapped_peers
};

/// A one-node call's terms priced under profile m: t's steps and barriers at
/// protocol channel ch's latency (when oversubscribed: a context switch per
/// step, oversubscribed_barrier_switches() per barrier),
/// its bytes and its fill at their rates, and the shares that miss the caches
/// at theirs, each byte's time over the rank's share of a CPU
/// (problem::cpu_share), and stretched by contention (problem::contention;
/// see the header comment). Shared by predict() and the fit (tune/fit.hpp).
constexpr prediction price_one_node(const profile& m, const algo::cost_terms& t, const call_shape& s) {
  const int ch = s.channel;
  const bool oversubscribed = s.oversubscribed, single_copy = s.single_copy;
  const double cpu_share = s.cpu_share, miss = s.miss;
  const contended& busy = s.busy;
  const double per_byte = cpu_share > 0 && cpu_share < 1 ? 1 / cpu_share : 1;
  // Contention (see the header comment): everything takes `alone` as long,
  // and each synchronisation waits `wait` on average.
  const double c = !oversubscribed && busy.share > 0 && busy.share < 1 ? busy.share : 0;
  const double alone = 1 / (1 - c), wait = c * busy.slice_us;
  prediction r{};
  if (m.proto[ch].efficiency <= 0 && t.bytes_sent > 0) {  // the protocol is off on this machine
    r.bandwidth_us = unavailable_us;
    return r;
  }
  const double peer_gbps = single_copy && s.mapped_peers && m.copy_gbps > 0 ? m.copy_gbps
                           : single_copy && m.single_copy_gbps > 0          ? m.single_copy_gbps
                                                                            : m.peer_gbps;
  r.reduction_us =
      alone * per_byte * reduction_us(m, t.bytes_reduced, t.bytes_sent > 0 ? m.gbps(m.intra, ch) : peer_gbps);
  const double oversub_us = m.oversub_step_us + m.proto[ch].oversub_extra_us;
  const double step_us = oversubscribed ? oversub_us : alone * m.alpha_us(m.intra, ch) + wait;
  const double barrier_us =
      oversubscribed ? oversub_us * oversubscribed_barrier_switches(cpu_share) : alone * m.barrier_us + wait;
  r.latency_us =
      (oversubscribed ? m.oversub_call_us : alone * m.call_us) + t.steps * step_us + t.barriers * barrier_us;
  if (c > 0 && busy.fifo_bytes > 0) r.latency_us += t.bytes_sent / busy.fifo_bytes * wait;  // FIFO refills
  if (t.bytes_sent > 0) r.bandwidth_us += (t.bytes_sent + s.fill_bytes) / m.gbps(m.intra, ch) / 1e3;
  r.bandwidth_us += t.peer_bytes / peer_gbps / 1e3 + t.staged_bytes / m.copy_gbps / 1e3;
  if (t.switch_bytes > 0) r.bandwidth_us += t.switch_bytes / m.multicast_gbps / 1e3;
  if (m.copy_gbps > 0) r.bandwidth_us += t.local_bytes / m.copy_gbps / 1e3;
  const double touched = algo::touched_bytes(t);
  if (miss > 0 && m.mem_gbps > 0) r.bandwidth_us += miss * touched / m.mem_gbps / 1e3;  // no rate: no term
  if (s.near_miss > 0 && m.near_gbps > 0) r.bandwidth_us += s.near_miss * touched / m.near_gbps / 1e3;
  r.bandwidth_us *= alone * per_byte;
  return r;
}

/// The prediction of <A, Pr> for the problem under profile m.
///
/// One node (P ≤ ranks_per_node, or ranks_per_node 0): every term at the
/// intra link (price_one_node). Several nodes: the ranks are placed node by
/// node (cost_context::node_ranks), the shape topology-aware schedules run in
/// (the tree's chains inside nodes, rhd's nearest partners first). The steps
/// that cross nodes (node_steps where the schedule states them, else those
/// of the schedule run on one rank per node) are paid at the inter link, the
/// rest at the intra link; the bytes one node sends to the others (the
/// schedule's node_bytes where it states them, else those of the schedule
/// on one rank per node) go through the node's NICs (inter.gbps ×
/// ranks_per_node) while every
/// rank's bytes go through its intra link, concurrently (pipelined), so the
/// slower of the two counts. Peer-memory algorithms reach one node only.
/// The cache term is priced on one node only.
template <class A, class Pr>
constexpr prediction predict(const profile& m, const problem& q);

namespace detail {
template <class A, class Pr>
constexpr prediction predict_on(const profile& m, const problem& q) {
  constexpr int ch = proto::channel_of<Pr>;
  algo::cost_context ctx{q.chunks[ch], q.single_copy, q.peer_buffer_bytes};
  ctx.in_place = q.in_place;
  ctx.multicast = m.multicast_gbps > 0;
  ctx.one_shot_bytes = q.one_shot_bytes;
  const int nodes = m.nodes(q.nranks);
  // Across nodes, topology-aware schedules run in their node shape (the tree).
  algo::cost_context placed = ctx;
  if (nodes > 1) placed.node_ranks = m.ranks_per_node;
  const algo::cost_terms t = A::cost(q.kind, q.nranks, q.bytes, placed);
  if (nodes <= 1) {
    const double ws = working_set_bytes(q.kind, q.nranks, q.bytes);
    return price_one_node(m, t,
                          {ch, q.oversubscribed, miss_share(m, ws), near_miss_share(m, ws), q.cpu_share,
                           q.single_copy, fill_bytes(t, q.granules[ch]),
                           contended{q.contention, q.slice_us, 2 * q.chunks[ch]}, q.mapped_peers});
  }
  prediction r{};
  r.reduction_us = reduction_us(m, t.bytes_reduced, m.gbps(m.intra, ch));
  if ((m.proto[ch].efficiency <= 0 && t.bytes_sent > 0) || t.barriers > 0 || t.peer_bytes > 0 ||
      t.staged_bytes > 0) {
    r.bandwidth_us = unavailable_us;
    return r;
  }
  const algo::cost_terms top = A::cost(q.kind, nodes, q.bytes, ctx);
  // Steps paid at the inter link: stated by the schedule (node_steps), else
  // those of its schedule on one rank per node.
  const double inter_steps = t.node_steps >= 0 ? t.node_steps : (top.steps < t.steps ? top.steps : t.steps);
  r.latency_us = inter_steps * m.alpha_us(m.inter, ch) + (t.steps - inter_steps) * m.alpha_us(m.intra, ch);
  const double intra_us = (t.bytes_sent + fill_bytes(t, q.granules[ch])) / m.gbps(m.intra, ch) / 1e3;
  // What one node sends to the others: stated by the schedule (algo/cost.hpp,
  // node_bytes), else what its node-level schedule sends per rank.
  const double node_bytes = t.node_bytes >= 0 ? t.node_bytes : top.bytes_sent;
  const double inter_us = node_bytes / (m.gbps(m.inter, ch) * m.ranks_per_node) / 1e3;
  if (t.bytes_sent > 0) r.bandwidth_us += intra_us > inter_us ? intra_us : inter_us;
  if (m.copy_gbps > 0) r.bandwidth_us += t.local_bytes / m.copy_gbps / 1e3;
  return r;
}
}  // namespace detail

template <class A, class Pr>
constexpr prediction predict(const profile& m, const problem& q) {
  return q.whole_steps ? detail::predict_on<A, Pr>(on_whole_steps(m), q) : detail::predict_on<A, Pr>(m, q);
}

/// Predicted time of <A, Pr> for the problem, in µs.
template <class A, class Pr>
constexpr double predict_us(const profile& m, const problem& q) {
  return predict<A, Pr>(m, q).total_us();
}

}  // namespace collx::tune
