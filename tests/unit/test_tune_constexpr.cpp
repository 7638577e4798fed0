// The automatic choice at compile time (tune/select.hpp): the picks for the
// measured shm preset are static_asserted, a kernel takes its variant as
// types, and the fold enumerates each variant once (peer-memory algorithms
// have no protocol axis). Every check here is a static_assert; the test case
// only makes the file a test.
#include <collx/needs.hpp>
#include <collx/transport/proxied.hpp>
#include <collx/transport/shm.hpp>
#include <collx/tune/presets.hpp>
#include <collx/tune/select.hpp>

#include <catch2/catch.hpp>

#include <type_traits>

using namespace collx;

namespace {

constexpr variant_choice pick(coll c, int P, double bytes, const tune::request& r = {},
                              bool oversubscribed = false) {
  return tune::fastest<transport::shm>(tune::shm_host, {c, P, bytes, false, oversubscribed}, r);
}
constexpr variant_choice v(algo_id a, proto_id p) { return {a, p}; }

// tune::shm_host, all_reduce (these are the picks collx-model prints).
// P = 2: LL's lower step latency for a few bytes, Simple once bytes count,
// rhd from 32 KiB (ring ties with it at P = 2 and goes last).
static_assert(pick(coll::all_reduce, 2, 8) == v(algo_id::direct, proto_id::ll));
static_assert(pick(coll::all_reduce, 2, 1024) == v(algo_id::direct, proto_id::simple));
static_assert(pick(coll::all_reduce, 2, 1 << 20) == v(algo_id::rhd, proto_id::simple));
// P = 4: rhd once bytes count. Direct two-shot, one step fewer, also passes
// its own block through its loopback FIFO (local_bytes: in and out), which
// costs more than the step at 4 MiB.
static_assert(pick(coll::all_reduce, 4, 8) == v(algo_id::direct, proto_id::ll));
static_assert(pick(coll::all_reduce, 4, 64 << 10) == v(algo_id::rhd, proto_id::simple));
static_assert(pick(coll::all_reduce, 4, 4 << 20) == v(algo_id::rhd, proto_id::simple));
static_assert(tune::predict_us<algo::direct, proto::simple>(tune::shm_host, {coll::all_reduce, 4, 4 << 20}) -
                  tune::predict_us<algo::rhd, proto::simple>(tune::shm_host, {coll::all_reduce, 4, 4 << 20}) <
              2.0 * (4 << 20) / 4 / tune::shm_host.copy_gbps / 1e3);
// Oversubscribed: a step is a context switch, the fewest steps win.
static_assert(pick(coll::all_reduce, 4, 8, {}, true) == v(algo_id::direct, proto_id::simple));

// The cache term (tune/model.hpp): a working set within the cache pays
// nothing; beyond it, the share that misses pays memory's rate on every byte.
constexpr tune::profile cached = [] {
  tune::profile m = tune::shm_host;
  m.cache_bytes = 32 << 20, m.mem_gbps = 2.0;
  return m;
}();
static_assert(tune::working_set_bytes(coll::all_reduce, 2, 1 << 20) == 4 << 20);
static_assert(tune::working_set_bytes(coll::all_gather, 2, 1 << 20) == 3 << 20);
static_assert(tune::miss_share(cached, 32 << 20) == 0);
static_assert(tune::miss_share(cached, 64 << 20) == 0.5);
static_assert(tune::miss_share(tune::h100_nvswitch, 1e12) == 0);  // no cache term
// all_reduce of 16 MiB on 2 ranks: 64 MiB touched, half of it missing:
// ring sends 16 MiB and reduces 8 MiB per rank → 24 MiB × ½ / 2 GB/s.
constexpr tune::problem ar16m{coll::all_reduce, 2, 16 << 20};
constexpr double cache_extra_us =
    tune::predict<algo::ring, proto::simple>(cached, ar16m).bandwidth_us -
    tune::predict<algo::ring, proto::simple>(tune::shm_host, ar16m).bandwidth_us;
static_assert(cache_extra_us > 0.5 * (24 << 20) / 2.0 / 1e3 * (1 - 1e-12) &&
              cache_extra_us < 0.5 * (24 << 20) / 2.0 / 1e3 * (1 + 1e-12));
static_assert(
    tune::predict<algo::ring, proto::simple>(cached, {coll::all_reduce, 2, 4 << 20}).total_us() ==
    tune::predict<algo::ring, proto::simple>(tune::shm_host, {coll::all_reduce, 2, 4 << 20}).total_us());

// Oversubscribed, ranks share CPUs: every byte takes 1 / cpu_share as long;
// steps cost a context switch either way.
constexpr tune::problem ar1m_over{coll::all_reduce, 4, 1 << 20, false, true};
constexpr tune::problem ar1m_over_half = [] {
  tune::problem q = ar1m_over;
  q.cpu_share = 0.5;
  return q;
}();
static_assert(tune::predict<algo::ring, proto::simple>(tune::shm_host, ar1m_over_half).bandwidth_us ==
              2 * tune::predict<algo::ring, proto::simple>(tune::shm_host, ar1m_over).bandwidth_us);
static_assert(tune::predict<algo::ring, proto::simple>(tune::shm_host, ar1m_over_half).reduction_us ==
              2 * tune::predict<algo::ring, proto::simple>(tune::shm_host, ar1m_over).reduction_us);
static_assert(tune::predict<algo::ring, proto::simple>(tune::shm_host, ar1m_over_half).latency_us ==
              tune::predict<algo::ring, proto::simple>(tune::shm_host, ar1m_over).latency_us);

// The allow-set is an input: without direct, the next best.
constexpr selection without_direct = [] {
  selection s = selection::all();
  s.algos[static_cast<int>(coll::all_reduce)] &= ~(1u << static_cast<int>(algo_id::direct));
  return s;
}();
static_assert(pick(coll::all_reduce, 2, 8, {{}, without_direct}).algo != algo_id::direct);
// A requested algorithm keeps its name; only its protocol is chosen.
static_assert(pick(coll::all_reduce, 2, 8, {{algo_id::tree, proto_id::automatic}}).algo == algo_id::tree);
// Nothing allowed serves: the automatic fields come back.
static_assert(pick(coll::all_reduce, 2, 8, {{algo_id::bruck, proto_id::automatic}}).proto ==
              proto_id::automatic);

// COLLX_PROTO does not restrict peer-memory algorithms: with LL only and
// peers as fast as copies, nvls (one variant, named Simple) still wins large
// single-copy calls.
constexpr selection ll_only = [] {
  selection s = selection::all();
  for (auto& p : s.protos) p = 1u << static_cast<int>(proto_id::ll);
  return s;
}();
constexpr tune::profile fast_peers = [] {
  tune::profile m = tune::shm_host;
  m.peer_gbps = m.copy_gbps;
  return m;
}();
static_assert(tune::fastest<transport::shm>(fast_peers, {coll::all_reduce, 2, double(1 << 26), true},
                                            {{}, ll_only}) == v(algo_id::nvls, proto_id::simple));
// … while it does restrict the FIFO algorithms (direct/simple without it).
constexpr variant_choice direct_auto{algo_id::direct, proto_id::automatic};
static_assert(pick(coll::all_reduce, 2, 1024, {direct_auto}) == v(algo_id::direct, proto_id::simple));
static_assert(pick(coll::all_reduce, 2, 1024, {direct_auto, ll_only}) == v(algo_id::direct, proto_id::ll));

// The FIFO geometry is part of the problem: direct's all_reduce is one-shot
// while the vector fits one chunk of its protocol's FIFO, as its schedule.
constexpr tune::problem at_4m{coll::all_reduce, 4, double(4 << 20)};
constexpr tune::problem at_4m_big_fifo = [] {
  tune::problem q = at_4m;
  q.chunks[proto::channel_of<proto::simple>] = double(8 << 20);
  return q;
}();
static_assert(tune::default_chunks[proto::channel_of<proto::simple>] == 256 * 1024);  // 8 slots of 64 KiB
static_assert(tune::predict_us<algo::direct, proto::simple>(tune::shm_host, at_4m_big_fifo) >
              tune::predict_us<algo::direct_two_shot, proto::simple>(tune::shm_host, at_4m));
static_assert(tune::predict_us<algo::direct, proto::simple>(tune::shm_host, at_4m) ==
              tune::predict_us<algo::direct_two_shot, proto::simple>(tune::shm_host, at_4m));

// The pipeline's fill (tune/model.hpp): Simple's receiver waits for a whole
// slot, LL's and LL128's for a line.
static_assert(tune::default_granules[proto::channel_of<proto::simple>] == 64 * 1024);
static_assert(tune::default_granules[proto::channel_of<proto::ll>] == 8);
static_assert(tune::default_granules[proto::channel_of<proto::ll128>] == 120);
// Where a proxy delivers each step whole (transport::proxied), LL's receiver
// waits for its whole slot too: 8 KiB of lines, 4 KiB of payload.
constexpr auto proxied_granules = tune::granule_table_of(
    [](int ch) { return proto::channels[static_cast<std::size_t>(ch)].default_slot_bytes; },
    transport_offers<transport::proxied>::whole_steps);
static_assert(proxied_granules[proto::channel_of<proto::ll>] == 4096);
static_assert(proxied_granules[proto::channel_of<proto::simple>] == 64 * 1024);
static_assert(!transport_offers<transport::shm>::whole_steps);
// ... and no protocol's step is quicker than Simple's there: the proxied
// transport, which offers LL, takes Simple where shared memory takes LL.
static_assert(tune::fastest<transport::proxied>(tune::shm_host, {coll::all_reduce, 2, 8}).proto ==
              proto_id::ll);
constexpr tune::problem proxied_8b = [] {
  tune::problem q{coll::all_reduce, 2, 8};
  q.granules = proxied_granules;
  q.whole_steps = true;
  return q;
}();
static_assert(tune::fastest<transport::proxied>(tune::shm_host, proxied_8b).proto == proto_id::simple);
static_assert(tune::predict_us<algo::direct, proto::ll>(tune::shm_host, proxied_8b) >=
              tune::predict_us<algo::direct, proto::simple>(tune::shm_host, proxied_8b));
// A message shorter than the granule is stored and forwarded: all of it
// again; a longer one pays one granule per step.
static_assert(tune::fill_bytes({.steps = 1, .bytes_sent = 4096}, 65536) == 4096);
static_assert(tune::fill_bytes({.steps = 2, .bytes_sent = 2 << 20}, 65536) == 2 * 65536);
static_assert(tune::fill_bytes({.steps = 0, .bytes_sent = 0}, 65536) == 0);
// So one-shot direct/Simple at 4 KiB on 2 ranks takes twice its bytes' time
// over the link, and direct/LL does not (both also copy their own input
// through the loopback FIFO: local_bytes, in and out).
constexpr tune::problem at_4k{coll::all_reduce, 2, 4096};
constexpr tune::profile no_latency = [] {
  tune::profile m = tune::shm_host;
  m.intra.alpha_us = 0;
  for (auto& p : m.proto) p.extra_alpha_us = 0;
  m.reduce_gbps = 1e9;  // no reduction term
  return m;
}();
static_assert(tune::predict_us<algo::direct, proto::simple>(no_latency, at_4k) ==
              2 * 4096 / no_latency.gbps(no_latency.intra, proto::channel_of<proto::simple>) / 1e3 +
                  2 * 4096 / no_latency.copy_gbps / 1e3);
static_assert(tune::predict_us<algo::direct, proto::ll>(no_latency, at_4k) ==
              (4096 + 8) / no_latency.gbps(no_latency.intra, proto::channel_of<proto::ll>) / 1e3 +
                  2 * 4096 / no_latency.copy_gbps / 1e3);

// A kernel's variant as types, for a compile-time problem.
using small_v = tune::best_t<coll::all_reduce, 8, 2, tune::shm_host, transport::shm>;
static_assert(std::is_same_v<small_v::algorithm, algo::direct> &&
              std::is_same_v<small_v::protocol, proto::ll>);
using large_v = tune::best_t<coll::all_reduce, std::size_t{1} << 20, 2, tune::shm_host, transport::shm>;
static_assert(std::is_same_v<large_v, tune::variant_t<algo::rhd, proto::simple>>);
static_assert(large_v::value == v(algo_id::rhd, proto_id::simple));
// The value is structural: it can be a template argument itself.
template <variant_choice V>
constexpr algo_id algo_of = V.algo;
static_assert(algo_of<tune::best<coll::all_gather, 8, 4, tune::shm_host, transport::shm>::value> ==
              algo_id::direct);

// Each variant once: nvls under Simple only, FIFO algorithms under every
// compiled protocol; the runtime fold (visit_variant) agrees.
constexpr int visits(coll c, algo_id a) {
  int n = 0;
  for (proto_id p : {proto_id::simple, proto_id::ll, proto_id::ll128})
    visit_variant<transport::shm>(c, a, p, [&]<class, class>() { ++n; });
  return n;
}
static_assert(visits(coll::all_reduce, algo_id::nvls) == 1);
static_assert(visits(coll::all_reduce, algo_id::ring) == protocols::size);
static_assert(visits(coll::all_gather, algo_id::tree) == 0);
static_assert(protocol_of_id(algo_id::nvls, proto_id::ll128) == proto_id::simple);
static_assert(protocol_of_id(algo_id::ring, proto_id::ll128) == proto_id::ll128);
static_assert(std::is_same_v<protocol_of<algo::nvls, proto::ll>, proto::simple>);

// Symmetric memory (tune::problem::mapped_peers): single-copy reads are a
// memcpy through a mapping, priced at copy_gbps instead of cross-memory
// attach's rate, and nvls wins on 2 process ranks at 1 MiB, where the preset
// leaves it to FIFO schedules otherwise.
constexpr tune::problem single_copy_problem(coll c, double bytes, bool mapped) {
  tune::problem q{c, 2, bytes, true};
  q.mapped_peers = mapped;
  return q;
}
static_assert(tune::fastest<transport::shm>(tune::shm_host,
                                            single_copy_problem(coll::all_gather, 1 << 20, true))
                  .algo == algo_id::nvls);
static_assert(tune::fastest<transport::shm>(tune::shm_host,
                                            single_copy_problem(coll::all_gather, 1 << 20, false))
                  .algo != algo_id::nvls);
static_assert(
    tune::predict_us<algo::nvls, proto::simple>(tune::shm_host,
                                                single_copy_problem(coll::all_reduce, 1 << 20, true)) <
    tune::predict_us<algo::nvls, proto::simple>(tune::shm_host,
                                                single_copy_problem(coll::all_reduce, 1 << 20, false)));
// Without single copy the flag changes nothing: nvls stages through its buffers.
static_assert(tune::predict_us<algo::nvls, proto::simple>(tune::shm_host,
                                                          [] {
                                                            tune::problem q{coll::all_gather, 2, 1 << 20};
                                                            q.mapped_peers = true;
                                                            return q;
                                                          }()) ==
              tune::predict_us<algo::nvls, proto::simple>(tune::shm_host, {coll::all_gather, 2, 1 << 20}));

constexpr int candidates(coll c) {
  int n = 0;
  tune::select_detail::for_each_variant<false>([&]<class A, class P>() {
    if (A::implements(c) && composable<A, P, transport::shm>) ++n;
  });
  return n;
}
// all_reduce: ring, tree, rhd, rabenseifner, direct × 3 protocols, nvls once.
static_assert(candidates(coll::all_reduce) == 5 * protocols::size + 1);

}  // namespace

TEST_CASE("tune: the choice is a constant expression", "[tune][selection]") {
  SUCCEED("checked by static_assert at compile time");
}
