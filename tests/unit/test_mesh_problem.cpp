// The model's problem for a call of a GPU (mesh) group, as
// gpu::communicator's automatic choice prices it (tune/mesh_problem.hpp):
// the group's FIFO geometry and staging buffer, the call's registered
// windows, and which buffers are bound to a multicast object. The prices
// are checked against hand-computed terms; the choices among the GPU's
// automatic algorithms are stated as static_asserts.
#include <collx/transport/mesh.hpp>
#include <collx/tune/mesh_problem.hpp>
#include <collx/tune/presets.hpp>
#include <collx/tune/select.hpp>

#include <catch2/catch.hpp>

using namespace collx;

// A named namespace: the unit tests build as one translation unit.
namespace mesh_problem_test {

constexpr double KiB = 1024, MiB = 1 << 20;

// The GPU's automatic candidates (gpu::automatic_algorithms).
constexpr selection gpu_set = tune::mesh_selection();

// A group of P GPUs made with the default options.
constexpr transport::mesh_layout layout(int P) { return tune::mesh_layout_of(P); }

// Staged (no windows), registered windows, and windows bound to a multicast object.
constexpr tune::mesh_call staged{};
constexpr tune::mesh_call windows{.registered = true};
constexpr tune::mesh_call bound{.registered = true, .send_bound = true, .recv_bound = true};

// The GPU's choice for collective c of `bytes` on P ranks whose call offers
// `call`, on a group with or without multicast staging buffers.
constexpr variant_choice gpu_pick(const tune::profile& preset, coll c, int P, double bytes,
                                  const tune::mesh_call& call, bool group_multicast) {
  const tune::problem q = tune::mesh_problem(layout(P), c, bytes, call);
  const tune::profile m = tune::mesh_profile(preset, tune::mesh_multicast(q, call, group_multicast));
  return tune::fastest<transport::mesh>(m, q, {{}, gpu_set});
}
constexpr bool is_nvls(variant_choice v) { return v.algo == algo_id::nvls; }

TEST_CASE("mesh problem: the group's FIFO geometry, staging buffer and windows", "[mesh_problem]") {
  const int P = GENERATE(2, 4, 8);
  const transport::mesh_layout l = layout(P);
  // Default options: the chunks and granules of a communicator made with
  // default options (the host's constants), a 1 MiB staging buffer.
  const tune::problem q = tune::mesh_problem(l, coll::all_reduce, 64 * MiB, staged);
  CHECK(q.nranks == P);
  CHECK(q.bytes == 64 * MiB);
  for (int ch = 0; ch < proto::channel_count; ++ch) {
    CHECK(q.chunks[ch] == tune::default_chunks[ch]);
    CHECK(q.granules[ch] == tune::default_granules[ch]);
  }
  CHECK(q.peer_buffer_bytes == MiB);
  CHECK_FALSE(q.single_copy);
  CHECK(q.one_shot_bytes == 0);
  // Registered: single copy, one-shot up to the group's size.
  const tune::problem w = tune::mesh_problem(l, coll::all_reduce, 64 * KiB, windows);
  CHECK(w.single_copy);
  CHECK(w.one_shot_bytes == double(tune::mesh_one_shot_bytes(P)));
  // Single copy from the windows' threshold only.
  CHECK_FALSE(tune::mesh_problem(l, coll::all_reduce, 64 * KiB, {.registered = true, .min_bytes = 1 << 20})
                  .single_copy);
  // In place is stated for all_reduce (it rules out one-shot) and all_gather.
  CHECK(tune::mesh_problem(l, coll::all_reduce, MiB, {.in_place = true}).in_place);
  CHECK(tune::mesh_problem(l, coll::all_gather, MiB, {.in_place = true}).in_place);
  CHECK_FALSE(tune::mesh_problem(l, coll::reduce_scatter, MiB, {.in_place = true}).in_place);
}

TEST_CASE("mesh problem: staged nvls pays two barriers per staging buffer segment", "[mesh_problem]") {
  // 256 MiB through a 1 MiB buffer: 256 segments, 512 barriers where one
  // unbounded segment pays 2; nothing else differs.
  const tune::profile& m = tune::h100_nvswitch;
  const tune::problem q = tune::mesh_problem(layout(8), coll::all_reduce, 256 * MiB, staged);
  tune::problem one = q;
  one.peer_buffer_bytes = 0;
  const double extra =
      tune::predict_us<algo::nvls, proto::simple>(m, q) - tune::predict_us<algo::nvls, proto::simple>(m, one);
  CHECK(extra == Approx((512 - 2) * m.barrier_us));
}

TEST_CASE("mesh problem: the multicast rate applies only to buffers bound to a multicast object",
          "[mesh_problem]") {
  const tune::problem staged_q = tune::mesh_problem(layout(8), coll::all_reduce, MiB, staged);
  CHECK(tune::mesh_multicast(staged_q, staged, true));
  CHECK_FALSE(tune::mesh_multicast(staged_q, staged, false));
  // The switch does not compute this reduction: nvls loads every peer.
  CHECK_FALSE(tune::mesh_multicast(staged_q, {.switch_reduces = false}, true));
  CHECK(tune::mesh_multicast(tune::mesh_problem(layout(8), coll::all_gather, MiB, staged),
                             {.switch_reduces = false}, true));
  // Single copy: every side the switch path uses must be bound, whatever the group has.
  const auto through = [](coll c, tune::mesh_call call) {
    return tune::mesh_multicast(tune::mesh_problem(layout(8), c, MiB, call), call, true);
  };
  CHECK(through(coll::all_reduce, bound));
  CHECK_FALSE(through(coll::all_reduce, windows));
  CHECK_FALSE(through(coll::all_reduce, {.registered = true, .send_bound = true}));
  CHECK_FALSE(through(coll::all_reduce, {.registered = true, .recv_bound = true}));
  CHECK(through(coll::reduce_scatter, {.registered = true, .send_bound = true}));
  CHECK_FALSE(through(coll::reduce_scatter, {.registered = true, .recv_bound = true}));
  CHECK(through(coll::all_gather, {.registered = true, .recv_bound = true}));
  CHECK(through(coll::broadcast, {.registered = true, .recv_bound = true}));
  CHECK_FALSE(through(coll::all_gather, {.registered = true, .send_bound = true}));
  CHECK_FALSE(through(coll::all_to_all, bound));  // no switch path
  CHECK(tune::mesh_profile(tune::h100_nvswitch, false).multicast_gbps == 0);
  CHECK(tune::mesh_profile(tune::h100_nvswitch, true).multicast_gbps == tune::h100_nvswitch.multicast_gbps);
}

TEST_CASE("mesh problem: a registered all_reduce is one-shot up to the group's size, out of place",
          "[mesh_problem]") {
  // A100 NVSwitch (no multicast), 8 ranks, 128 KiB registered: one-shot reads
  // 7 copies of the whole, two barriers; in place it is two-shot, 2·7/8 of
  // it read, three barriers.
  const tune::profile& m = tune::a100_nvswitch;
  const double b = 128 * KiB;
  const tune::problem one = tune::mesh_problem(layout(8), coll::all_reduce, b, windows);
  const tune::problem two =
      tune::mesh_problem(layout(8), coll::all_reduce, b, {.registered = true, .in_place = true});
  const tune::prediction p1 = tune::predict<algo::nvls, proto::simple>(m, one);
  const tune::prediction p2 = tune::predict<algo::nvls, proto::simple>(m, two);
  CHECK(p1.latency_us - p2.latency_us == Approx(-m.barrier_us));
  CHECK(p1.bandwidth_us / p2.bandwidth_us == Approx(4.0));  // 7b read against 2·7b/8
}

// The choices the GPU's automatic candidates make on 8x H100 with NVSwitch
// (bench/results/gpu_choice_model_2026-12-07.md has the tables).
// Staged nvls goes through a 1 MiB buffer, two barriers per MiB, so it never
// wins a large call: the ring or direct does.
static_assert(!is_nvls(gpu_pick(tune::h100_nvswitch, coll::all_reduce, 8, 256 * MiB, staged, true)));
static_assert(!is_nvls(gpu_pick(tune::h100_nvswitch, coll::all_reduce, 8, 16 * MiB, staged, true)));
// The user's buffers bound to a multicast object (alloc_window): nvls
// through the switch, no copies, two barriers, from 16 MiB up.
static_assert(is_nvls(gpu_pick(tune::h100_nvswitch, coll::all_reduce, 8, 16 * MiB, bound, true)));
static_assert(is_nvls(gpu_pick(tune::h100_nvswitch, coll::all_reduce, 8, 1024 * MiB, bound, true)));
// reduce_scatter and all_gather through the switch carry B per link
// direction where the ring carries (P-1)/P·B, at 0.85 of its rate: never
// nvls, bound or not.
static_assert(!is_nvls(gpu_pick(tune::h100_nvswitch, coll::all_gather, 8, 256 * MiB, bound, true)));
static_assert(!is_nvls(gpu_pick(tune::h100_nvswitch, coll::reduce_scatter, 8, 256 * MiB, bound, true)));
// Windows not bound (cudaMalloc'd buffers registered): a small all_reduce
// is one-shot, but its two barriers (12.5 us each on this preset, not
// measured on a GPU) lose to direct's LL exchange.
static_assert(!is_nvls(gpu_pick(tune::h100_nvswitch, coll::all_reduce, 8, 64 * KiB, windows, true)));
// Without multicast (A100) staged nvls loads every peer through a 1 MiB
// buffer: never chosen for a large call.
static_assert(!is_nvls(gpu_pick(tune::a100_nvswitch, coll::all_reduce, 8, 256 * MiB, staged, false)));

}  // namespace mesh_problem_test
