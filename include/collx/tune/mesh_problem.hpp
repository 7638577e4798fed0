// collx/tune/mesh_problem.hpp — the model's problem for one call of a mesh
// group (GPU ranks), as the group would run it.
//
// gpu::communicator's automatic choice prices a call with:
//   * the group's FIFO geometry (the protocols' chunks and granules);
//   * the staging buffer nvls goes through, segment by segment, two
//     barriers each (mesh_layout: 1 MiB per rank by default, so a 256 MiB
//     staged all_reduce is 512 barriers, not 2);
//   * the call's registered windows: single copy, and all_reduce one-shot up
//     to mesh_one_shot_bytes where no rank is in place;
//   * whether the buffers the call would go through are bound to a
//     multicast object: the staging buffers (the group's), or with single
//     copy every window side nvls's switch path uses
//     (algo::nvls::sides_on_switch), and for reductions whether the switch
//     computes this type and operator (transport::switch_reduces); elsewhere
//     the profile's multicast rate is not used.
// What is priced is what the kernel will decide, from the same facts.
//
// The choice must be the same on every rank. These facts are, wherever the
// ranks' calls are alike (a registered call is registered on every rank, or
// the kernels refuse it with status::mismatch: transport/mesh.hpp,
// may_load_peers). No CUDA here: collx-explain --mesh prices with it, and the
// unit tests check it on CPUs.
#pragma once

#include <collx/algo/direct.hpp>
#include <collx/algo/nvls.hpp>
#include <collx/algo/ring.hpp>
#include <collx/algo/tree.hpp>
#include <collx/coll.hpp>
#include <collx/options.hpp>
#include <collx/proto/ids.hpp>
#include <collx/selection.hpp>
#include <collx/transport/mesh.hpp>
#include <collx/tune/model.hpp>
#include <collx/type_list.hpp>

#include <array>
#include <cstdint>

namespace collx::tune {

/// Algorithms a GPU group's automatic choice picks from (each instantiated
/// per protocol and reduction for the element type of a call): the ring and
/// double binary tree, as NCCL's, the direct exchange, and nvls (peer
/// memory: through the switch where the group or the call's windows have a
/// multicast object, over registered windows in place).
using mesh_algorithms = type_list<algo::ring, algo::tree, algo::direct, algo::nvls>;

/// The allow-set of those algorithms (collx-explain --gpu; tests).
constexpr selection mesh_selection() {
  selection s = selection::all();
  std::uint32_t mask = 0;
  [&]<class... As>(type_list<As...>) { ((mask |= 1u << static_cast<int>(As::id)), ...); }(mesh_algorithms{});
  for (auto& a : s.algos) a &= mask;
  return s;
}

/// The layout of a mesh group of `nranks` with FIFOs of `slots` slots of
/// slot_bytes (per protocol channel) and `stripes` stripes: what
/// gpu::communicator makes from its options (the defaults here are its
/// defaults). The staging buffer is transport::shm_layout's
/// peer_buffer_bytes(): 1 MiB per rank unless a FIFO is larger.
constexpr transport::mesh_layout mesh_layout_of(
    int nranks, std::uint32_t slots = comm_options::default_fifo_slots,
    const std::array<std::uint32_t, proto::channel_count>& slot_bytes = comm_options::default_slot_bytes(),
    int stripes = 1) {
  return transport::mesh_layout::make(transport::shm_layout::make(
      static_cast<std::uint32_t>(nranks), slots, slot_bytes.data(), proto::channel_count, stripes));
}

/// Largest registered all_reduce (bytes per rank) run one-shot on a mesh
/// group of `nranks` (algo::nvls): on 2 ranks always (the same bytes read as
/// two-shot, one barrier fewer); up to 512 KiB on 3-4 ranks and 256 KiB on
/// 5-8; never above. These are the limits vLLM's custom all-reduce measured
/// for its one-stage kernel on NVLink (csrc/custom_all_reduce.cuh); collx
/// has not measured its own yet.
constexpr std::uint64_t mesh_one_shot_bytes(int nranks) {
  return nranks <= 2 ? ~std::uint64_t{0} : nranks <= 4 ? 512 * 1024 : nranks <= 8 ? 256 * 1024 : 0;
}

/// What one rank's call offers besides its collective and size.
struct mesh_call {
  /// Send and recv lie in complete registered windows (single copy from
  /// min_bytes; GPU windows: from 0).
  bool registered = false;
  std::uint64_t min_bytes = 0;
  /// That side's window is bound to a multicast object.
  bool send_bound = false, recv_bound = false;
  /// all_reduce: send is recv; all_gather: send is this rank's block of recv.
  bool in_place = false;
  /// Reductions: the switch computes this element type and operator
  /// (transport::switch_reduces); where it does not, nvls loads every peer.
  bool switch_reduces = true;

  friend constexpr bool operator==(const mesh_call&, const mesh_call&) = default;
};

/// The problem of collective c of `bytes` (as nccl-tests counts them) for a
/// rank of a mesh group of layout l whose call offers `call`.
constexpr problem mesh_problem(const transport::mesh_layout& l, coll c, double bytes, const mesh_call& call) {
  const transport::shm_layout& f = l.fifos;
  problem q{c, static_cast<int>(f.nranks), bytes};
  q.single_copy = q.nranks > 1 && call.registered && bytes >= double(call.min_bytes);
  q.chunks =
      chunk_table_of([&](int ch) { return f.fifo[ch].slots; }, [&](int ch) { return f.fifo[ch].slot_bytes; });
  q.granules = granule_table_of([&](int ch) { return f.fifo[ch].slot_bytes; });
  q.peer_buffer_bytes = double(f.peer_buffer_bytes());
  q.in_place = call.in_place && (c == coll::all_gather || c == coll::all_reduce);
  q.one_shot_bytes = q.single_copy ? double(mesh_one_shot_bytes(q.nranks)) : 0;
  return q;
}

/// Whether the call of problem q goes through a multicast object: staged,
/// where the group's staging buffers are bound to one (group_multicast);
/// with single copy, where every window side the switch path uses is bound.
/// Reductions only where the switch computes them.
constexpr bool mesh_multicast(const problem& q, const mesh_call& call, bool group_multicast) {
  if (is_reduction(q.kind) && !call.switch_reduces) return false;
  if (!q.single_copy) return group_multicast;
  const algo::nvls::switch_sides s = algo::nvls::sides_on_switch(q.kind);
  return (s.send || s.recv) && (!s.send || call.send_bound) && (!s.recv || call.recv_bound);
}

/// Profile m as a call sees it: its multicast rate only where the call goes
/// through a multicast object (mesh_multicast).
constexpr profile mesh_profile(profile m, bool through_multicast) {
  if (!through_multicast) m.multicast_gbps = 0;
  return m;
}

}  // namespace collx::tune
