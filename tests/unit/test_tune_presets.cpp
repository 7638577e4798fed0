// The presets of tune/presets.hpp: the decisions practitioners report for
// those machines, as static_asserts on the model's choice, and the two-level
// prediction against hand-computed values.
//
// Where the model disagrees with a reported decision, the assert states what
// the model picks and the comment says why; no constant was tuned to agree.
// Most decisions are reported for NCCL, whose algorithms are ring, tree and
// NVLS; those asserts restrict the choice to that set (nccl_set), and the
// comments say what the full set of collx's algorithms picks.
#include <collx/transport/shm.hpp>
#include <collx/tune/explain.hpp>
#include <collx/tune/presets.hpp>
#include <collx/tune/select.hpp>

#include <catch2/catch.hpp>

using namespace collx;

// A named namespace: the unit tests build as one translation unit.
namespace tune_presets_test {

constexpr selection only(std::initializer_list<algo_id> ids) {
  selection s = selection::all();
  std::uint32_t mask = 0;
  for (algo_id a : ids) mask |= 1u << static_cast<int>(a);
  for (auto& a : s.algos) a &= mask;
  return s;
}
constexpr selection nccl_set = only({algo_id::ring, algo_id::tree, algo_id::nvls});

constexpr variant_choice pick(const tune::profile& m, int P, double bytes,
                              const selection& s = selection::all()) {
  return tune::fastest<transport::shm>(m, {coll::all_reduce, P, bytes}, {{}, s});
}
constexpr variant_choice v(algo_id a, proto_id p) { return {a, p}; }
constexpr double MiB = 1 << 20;

// 8x H100 with NVSwitch and multicast: large all_reduce -> NVLS. Holds
// among NCCL's algorithms at 256 MiB, but only just, and not in the full set
// or at 1 GiB. nvls's switch phase moves (1 + 1/8)·B per link direction at
// the multicast rate, 958 us at 256 MiB against the ring's 1,269 us of link
// time; but the staged schedule also copies B into the multicast-bound
// buffer before that phase and out of it after, not overlapped with it
// (320 us), where NCCL's NVLS pipeline overlaps its copies. Priced so, nvls
// is within 1 % of rhd and the ring, and slower per byte than both.
static_assert(pick(tune::h100_nvswitch, 8, 256 * MiB, nccl_set) == v(algo_id::nvls, proto_id::simple));
static_assert(pick(tune::h100_nvswitch, 8, 1024 * MiB, nccl_set) == v(algo_id::ring, proto_id::simple));
static_assert(pick(tune::h100_nvswitch, 8, 256 * MiB) == v(algo_id::rhd, proto_id::simple));
// With the user buffers registered and bound to the multicast object (single
// copy through the switch: algo::nvls::through_switch) there are no copies
// and two barriers: nvls takes large all_reduce in every set, 958 + 25 us
// against rhd's 1,288 at 256 MiB.
constexpr variant_choice pick_registered(double bytes) {
  return tune::fastest<transport::shm>(tune::h100_nvswitch, {coll::all_reduce, 8, bytes, true}, {});
}
static_assert(pick_registered(256 * MiB) == v(algo_id::nvls, proto_id::simple));
static_assert(pick_registered(1024 * MiB) == v(algo_id::nvls, proto_id::simple));
// Without a multicast address (the same machine, multicast off) nvls's
// switch channel is P-1 peer loads and stores: never the pick.
constexpr tune::profile h100_no_multicast = [] {
  tune::profile m = tune::h100_nvswitch;
  m.multicast_gbps = 0;
  return m;
}();
static_assert(pick(h100_no_multicast, 8, 256 * MiB, nccl_set) == v(algo_id::ring, proto_id::simple));
static_assert(tune::predict_us<algo::nvls, proto::simple>(h100_no_multicast,
                                                          {coll::all_reduce, 8, 256 * MiB}) >
              1.2 * tune::predict_us<algo::nvls, proto::simple>(tune::h100_nvswitch,
                                                                {coll::all_reduce, 8, 256 * MiB}));
// At 16 MiB the full set takes direct two-shot (2 steps, the ring's bytes);
// NCCL has no two-shot. Disagreement with NCCL, agreement with practice
// elsewhere (TensorRT-LLM's custom all_reduce is two-shot at mid sizes).
static_assert(pick(tune::h100_nvswitch, 8, 16 * MiB) == v(algo_id::direct, proto_id::simple));

// 8x A100 NVSwitch: mid-size all_reduce -> ring with LL128. Holds at 16 MiB
// among NCCL's algorithms without NVLS (Ampere has no multicast).
constexpr selection ring_tree = only({algo_id::ring, algo_id::tree});
static_assert(pick(tune::a100_nvswitch, 8, 16 * MiB, ring_tree) == v(algo_id::ring, proto_id::ll128));
static_assert(pick(tune::a100_nvswitch, 8, 64 * MiB, ring_tree) == v(algo_id::ring, proto_id::simple));
// Below ~8 MiB the model prefers tree: collx's tree is a double binary tree
// over all 8 ranks (2·log-depth steps), while NCCL's tree inside one node is
// a chain with as many steps as the ring; same bytes, fewer α.
static_assert(pick(tune::a100_nvswitch, 8, 2 * MiB, ring_tree) == v(algo_id::tree, proto_id::ll128));
// Full set: direct two-shot/LL128 at 2 MiB, as on the H100.
static_assert(pick(tune::a100_nvswitch, 8, 2 * MiB) == v(algo_id::direct, proto_id::ll128));

// PCIe: small messages -> LL, in every set (LL128 is off on PCIe).
static_assert(pick(tune::pcie_gen4_8gpu, 8, 8).proto == proto_id::ll);
static_assert(pick(tune::pcie_gen4_8gpu, 8, 4096).proto == proto_id::ll);
static_assert(pick(tune::pcie_gen4_8gpu, 8, 4096, nccl_set).proto == proto_id::ll);
static_assert(pick(tune::pcie_gen5_8gpu, 8, 8).proto == proto_id::ll);
static_assert(pick(tune::pcie_gen4_8gpu, 8, 64 * MiB).proto == proto_id::simple);

// 4 GPUs on NVLink bridges: pairs over NVLink, PCIe between the pairs. NCCL
// takes the ring for large sizes; the model takes the tree. The preset
// describes the pairs as two nodes of two (ranks_per_node 2), so collx's
// tree runs across them in its node shape (algo/tree.hpp): each tree
// crosses PCIe on one link, moving as many bytes per pair as the ring,
// which the model prices per node, in fewer steps (a latency of 14.8 µs
// against 21.2 with Simple). NCCL sees one node there, where its tree is a single chain, and
// prices the tree with factors that are not schedule terms (tree bus
// bandwidth ×0.92, treeCorrectionFactor).
static_assert(pick(tune::a100_nvlink_bridge_4gpu, 4, 8).proto == proto_id::ll);
static_assert(pick(tune::a100_nvlink_bridge_4gpu, 4, 256 * MiB, nccl_set) ==
              v(algo_id::tree, proto_id::simple));

// 32 nodes x 8 GPUs over IB: small and mid-size all_reduce -> tree. Holds
// among NCCL's algorithms (NVLS cannot cross nodes here).
static_assert(pick(tune::h100_ib_ndr, 256, 8, nccl_set) == v(algo_id::tree, proto_id::ll));
static_assert(pick(tune::h100_ib_ndr, 256, 1 * MiB, nccl_set).algo == algo_id::tree);
static_assert(pick(tune::h100_ib_ndr, 256, 16 * MiB, nccl_set).algo == algo_id::tree);
static_assert(pick(tune::a100_ib_hdr, 256, 1 * MiB, nccl_set).algo == algo_id::tree);
// ... very large -> ring: the model agrees from 1 GiB on NDR (NVLink-bound)
// and only from 64 GiB on HDR (NIC-bound; tree up to 32 GiB). Across nodes
// the tree runs in NCCL's shape (algo/tree.hpp: chains inside nodes), whose
// node heads send 2.5·bytes (half up, half to two child nodes and to the
// chain in one tree; half up in the other) against the ring's
// 2·(P−1)/P·bytes: on NVLink that difference repays the tree's fewer steps
// (35 against the ring's 510) within hundreds of megabytes. Through a
// node's NICs both send about 2·bytes (node_bytes: the tree 2·bytes, the
// ring 2·(P−1)/P·bytes, 0.4 % less), which takes tens of gigabytes. NCCL's
// tree loses earlier on factors that are not schedule terms (tree bus
// bandwidth ×0.92, per-channel caps perChMaxTreeBw, treeCorrectionFactor).
static_assert(pick(tune::h100_ib_ndr, 256, 512 * MiB, nccl_set).algo == algo_id::tree);
static_assert(pick(tune::h100_ib_ndr, 256, 1024 * MiB, nccl_set).algo == algo_id::ring);
static_assert(pick(tune::a100_ib_hdr, 256, 32768 * MiB, nccl_set).algo == algo_id::tree);
static_assert(pick(tune::a100_ib_hdr, 256, 65536 * MiB, nccl_set) == v(algo_id::ring, proto_id::simple));
// The full set takes direct for small messages (one round of P−1 messages
// costs one α in the model, whatever P; 255 concurrent peers do not in
// practice: per-message costs and incast are not terms of algo/cost.hpp),
// and rhd from mid sizes: direct sends (P − L)/(P − 1) of everything across
// nodes, rhd's nearest-first hypercube 2·(1 − L/P)·bytes per node in
// log2 P steps.
static_assert(pick(tune::h100_ib_ndr, 256, 8).algo == algo_id::direct);
static_assert(pick(tune::h100_ib_ndr, 256, 1 * MiB).algo == algo_id::rhd);
static_assert(pick(tune::h100_ib_ndr, 256, 16 * MiB).algo == algo_id::rhd);
// RoCE, priced with the same NET row: the same choices.
static_assert(pick(tune::h100_roce, 256, 1 * MiB, nccl_set) ==
              pick(tune::h100_ib_ndr, 256, 1 * MiB, nccl_set));

// Presets by name.
static_assert(tune::find_preset("h100_nvswitch") == &tune::h100_nvswitch);
static_assert(tune::find_preset("h100_nvswitc") == nullptr && tune::find_preset("h100_nvswitchx") == nullptr);

TEST_CASE("tune presets: one-node prediction equals the hand-computed terms", "[tune][presets]") {
  // Ring all_reduce, 8 ranks, 1 MiB, Simple on h100_nvswitch:
  // 14 steps x 3.4 us; 2·7/8 MiB and the pipeline's fill (a 64 KiB slot per
  // step: each step's 128 KiB is longer) at 370.8 GB/s; the 7/8 MiB reduced
  // cost nothing beyond their transfer: γ (3350/3 GB/s) is faster than NVLink.
  const tune::problem q{coll::all_reduce, 8, MiB};
  const tune::prediction p = tune::predict<algo::ring, proto::simple>(tune::h100_nvswitch, q);
  CHECK(p.latency_us == Approx(14 * 3.4));
  CHECK(p.bandwidth_us == Approx((2 * 7.0 / 8 * MiB + 14 * 65536.0) / 370.8e3));
  CHECK(p.reduction_us == 0);
  CHECK(p.total_us() == Approx(47.6 + 4.9488 + 2.4744).epsilon(1e-4));
  // Where γ is the slower, a reduced byte adds 1/γ − 1/link: the same call
  // with γ at 100 GB/s.
  tune::profile slow_gamma = tune::h100_nvswitch;
  slow_gamma.reduce_gbps = 100;
  CHECK(tune::predict<algo::ring, proto::simple>(slow_gamma, q).reduction_us ==
        Approx(7.0 / 8 * MiB * (1 / 100.0 - 1 / 370.8) / 1e3));
  // LL on the same link: 0.6 us per step, bandwidth capped at 141 GB/s, a
  // fill of one line's payload (8 B) per step.
  const tune::prediction l = tune::predict<algo::ring, proto::ll>(tune::h100_nvswitch, q);
  CHECK(l.latency_us == Approx(14 * 0.6));
  CHECK(l.bandwidth_us == Approx((2 * 7.0 / 8 * MiB + 14 * 8.0) / 141e3));
  // LL128 off on PCIe: unusable, never chosen.
  CHECK(tune::predict_us<algo::ring, proto::ll128>(tune::pcie_gen4_8gpu, q) == tune::unavailable_us);
}

TEST_CASE("tune presets: two-level prediction", "[tune][presets]") {
  // Ring all_reduce on 32 nodes x 8 ranks, 8 B, LL, h100_ib_ndr: its causal
  // chain of 2·255 steps runs through consecutive ranks, and one link in 8
  // crosses nodes: ⌈510 / 8⌉ = 64 steps at IB's 2.7 us (node_steps), the other
  // 446 at NVLink's 0.6 us.
  const tune::problem small{coll::all_reduce, 256, 8};
  const tune::prediction s = tune::predict<algo::ring, proto::ll>(tune::h100_ib_ndr, small);
  CHECK(s.latency_us == Approx(64 * 2.7 + 446 * 0.6));
  // 1 GiB, Simple: intra 2·255/256 GiB and 510 steps' fill of a 64 KiB slot
  // at 370.8 GB/s; each node sends what the ring's one link out of it
  // carries, 2·255/256 GiB (node_bytes), through 8 NICs of 48 GB/s (384):
  // the slower is the intra side.
  const double G = 1024 * MiB;
  const tune::problem big{coll::all_reduce, 256, G};
  const tune::prediction b = tune::predict<algo::ring, proto::simple>(tune::h100_ib_ndr, big);
  const double intra = (2 * 255.0 / 256 * G + 510 * 65536.0) / 370.8e3, inter = 2 * 255.0 / 256 * G / 384e3;
  CHECK(b.bandwidth_us == Approx(std::max(intra, inter)));
  // On HDR (24 GB/s per GPU) the NICs are the bottleneck.
  const tune::prediction h = tune::predict<algo::ring, proto::simple>(tune::a100_ib_hdr, big);
  CHECK(h.bandwidth_us == Approx(2 * 255.0 / 256 * G / 192e3));
  // A schedule that does not state node_bytes (rabenseifner) is priced by
  // its run on one rank per node: the 32 nodes' all_reduce sends 2·31/32 GiB.
  const algo::cost_terms top = algo::rabenseifner::cost(coll::all_reduce, 32, G);
  CHECK(algo::rabenseifner::cost(coll::all_reduce, 256, G, {.node_ranks = 8}).node_bytes < 0);
  CHECK(top.bytes_sent == Approx(2 * 31.0 / 32 * G));
  CHECK(tune::predict<algo::rabenseifner, proto::simple>(tune::a100_ib_hdr, big).bandwidth_us ==
        Approx(top.bytes_sent / 192e3));  // the NICs bind
  // Peer memory does not cross nodes.
  CHECK(tune::predict_us<algo::nvls, proto::simple>(tune::h100_ib_ndr, big) == tune::unavailable_us);
  // Up to one node's ranks, one level.
  CHECK(
      tune::predict_us<algo::ring, proto::ll>(tune::h100_ib_ndr, {coll::all_reduce, 8, 8}) ==
      Approx(14 * 0.6 +
             tune::predict<algo::ring, proto::ll>(tune::h100_ib_ndr, {coll::all_reduce, 8, 8}).bandwidth_us +
             tune::predict<algo::ring, proto::ll>(tune::h100_ib_ndr, {coll::all_reduce, 8, 8}).reduction_us));
}

}  // namespace tune_presets_test

namespace tune_presets_test {

TEST_CASE("tune::explain lists fastest()'s candidates, fastest first", "[tune][presets]") {
  for (const tune::named_preset& np : tune::presets)
    for (coll c :
         {coll::all_reduce, coll::all_gather, coll::reduce_scatter, coll::broadcast, coll::all_to_all})
      for (int P : {2, 8, 256})
        for (double bytes : {8.0, 65536.0, 64 * MiB}) {
          const tune::problem q{c, P, bytes};
          const std::vector<tune::explained> e = tune::explain<transport::shm>(*np.value, q);
          INFO(np.name << " " << name(c) << " P=" << P << " bytes=" << bytes);
          REQUIRE(!e.empty());
          CHECK(e.front().variant == tune::fastest<transport::shm>(*np.value, q));
          for (std::size_t i = 1; i < e.size(); ++i) CHECK(e[i - 1].time.total_us() <= e[i].time.total_us());
          // Every entry is what predict_us says for it, split consistently.
          for (const tune::explained& x : e)
            visit_variant<transport::shm>(c, x.variant.algo, x.variant.proto, [&]<class A, class Pr>() {
              CHECK(tune::predict_us<A, Pr>(*np.value, q) == x.time.total_us());
            });
        }
  // all_reduce on shm: every composable variant once (5 FIFO algorithms x 3 protocols + nvls).
  CHECK(tune::explain<transport::shm>(tune::shm_host, {coll::all_reduce, 4, 8}).size() == 16);
}

}  // namespace tune_presets_test

namespace tune_presets_test {

// Ranks that outnumber the CPUs: a barrier costs one context switch per rank
// sharing a CPU, a step one. On 4 ranks of 2 CPUs, broadcast of 8 B ran in
// 7.6–9.4 µs through nvls's two barriers and about 1 µs through ring's chain
// (bench/results/collectives_4proc_vs_ompi.md); priced at one switch per
// barrier, nvls won.
constexpr tune::problem oversubscribed_problem(coll c, int P, double bytes, double cpu_share) {
  tune::problem q{c, P, bytes, false, true};
  q.cpu_share = cpu_share;
  return q;
}
static_assert(
    tune::fastest<transport::shm>(tune::shm_host, oversubscribed_problem(coll::broadcast, 4, 8, 0.5)).algo ==
    algo_id::ring);
static_assert(tune::oversubscribed_barrier_switches(0.5) == 2 &&
              tune::oversubscribed_barrier_switches(0.25) == 4 &&
              tune::oversubscribed_barrier_switches(1) == 1);

TEST_CASE("oversubscribed: a barrier is priced one step per rank sharing a CPU", "[tune][presets]") {
  algo::cost_terms one_barrier{};
  one_barrier.barriers = 1;
  const int ch = proto::channel_of<proto::simple>;
  const double step = tune::shm_host.oversub_step_us + tune::shm_host.proto[ch].oversub_extra_us;
  for (double share : {1.0, 0.5, 1.0 / 3}) {
    INFO("cpu_share " << share);
    const tune::prediction p = tune::price_one_node(
        tune::shm_host, one_barrier, {.channel = ch, .oversubscribed = true, .cpu_share = share});
    CHECK(p.latency_us == Approx(step / share));
  }
}

}  // namespace tune_presets_test

namespace tune_presets_test {
// The tools' what-if share: this machine's CPUs over P, or two ranks per CPU.
static_assert(tune::assumed_oversubscribed_share(2, 4) == 0.5 &&
              tune::assumed_oversubscribed_share(2, 8) == 0.25 &&
              tune::assumed_oversubscribed_share(16, 4) == 0.5 &&
              tune::assumed_oversubscribed_share(0, 4) == 0.5);
}  // namespace tune_presets_test
