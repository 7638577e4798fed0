// collx/stripes.hpp — one call split into stripes (NCCL's channels).
//
// A GPU rank runs a collective as a kernel of S blocks; block s runs stripe s:
// the same schedule on its own slice of the data, over its own FIFOs of every
// connection (transport/shm.hpp lays out S copies per directed pair), so the
// stripes never wait on each other. On CPUs, exec::host_team runs each stripe
// as a team of threads, which is how the split is tested without a GPU.
// (collx says stripe where NCCL says channel: here a channel is the FIFO of
// one protocol within a connection, proto/channel.hpp.)
//
// How a call is sliced: every rank cuts the per-block count into S pieces at
// the same 512-byte boundaries (whole cache lines, 16-byte aligned for vector
// access), so the slices agree across ranks without communication. Stripe l
// moves elements [lo, lo + n) of every block: of the buffer for all_reduce,
// broadcast and reduce, of each rank's block for all_gather, reduce_scatter
// and all_to_all (schedule_args::stride keeps the blocks' spacing). A call
// smaller than S pieces leaves the upper stripes empty: they return at once
// and touch no counter, so small calls cost one stripe.
//
// Which schedules split: an algorithm says so with
// `static constexpr bool stripe_split(coll)`; without it, the contiguous
// collectives (all_reduce, broadcast, reduce) split unless the algorithm
// uses peer memory, peer user buffers or a switch channel. Those primitives
// are per stripe too (each stripe has its own share of the registered
// buffers, its own barrier lines and published user buffers), but a
// schedule must address blocks by the slice's stride and take its decisions
// on the whole call, so it opts in (algo::nvls does). A schedule that does
// not split runs whole on stripe 0 while the other stripes return.
#pragma once

#include <collx/coll.hpp>
#include <collx/config.hpp>
#include <collx/error.hpp>
#include <collx/needs.hpp>
#include <collx/prims.hpp>

#include <cstddef>

namespace collx {

/// Bytes of the unit stripes are cut in (see the header comment).
inline constexpr std::size_t stripe_grain_bytes = 512;

/// Blocks a GPU group gives each call, chosen from the group's placement alone
/// (every rank computes the same number, which the stripes of a call must
/// be): 32, the most NCCL gives a call on NVLink machines, and fewer where
/// ranks share a GPU, so that the blocks of all the ranks on one GPU number at
/// most 128 (two per SM on a GPU of 64 SMs; every launch still checks that
/// they can be resident at once and refuses otherwise). Measured on an H200,
/// 2 ranks sharing it, Simple ring all_reduce of 256 MiB
/// (bench/results/gpu-2026-12-04.md): busbw 36 GB/s with 4 stripes, 122 with
/// 16, 204 with 32 (run 2; run 3 gave 34, 114, 194).
COLLX_HOST_DEVICE constexpr int automatic_stripes(int max_ranks_per_device) {
  constexpr int most = 32, blocks_per_device = 128;
  const int r = max_ranks_per_device < 1 ? 1 : max_ranks_per_device;
  const int s = blocks_per_device / r;
  return s < 1 ? 1 : s > most ? most : s;
}

/// Whether Algo's schedule for c may be split into stripes.
template <class Algo>
COLLX_HOST_DEVICE constexpr bool splits_into_stripes(coll c) {
  if constexpr (requires { Algo::stripe_split(c); }) {
    return Algo::stripe_split(c);
  } else {
    using needs = algorithm_needs<Algo>;
    const bool contiguous = c == coll::all_reduce || c == coll::broadcast || c == coll::reduce;
    return contiguous && !needs::peer_memory && !needs::user_buffers && !needs::multicast;
  }
}

/// Elements [lo, lo + n) of each block that stripe `stripe` of `nstripes` moves, for
/// a per-block count of `count` elements of `elem_bytes` bytes.
struct stripe_slice {
  std::size_t lo = 0, n = 0;
};
COLLX_HOST_DEVICE constexpr stripe_slice slice_of_stripe(std::size_t count, std::size_t elem_bytes,
                                                         int stripe, int nstripes) {
  const std::size_t grain = elem_bytes >= stripe_grain_bytes ? 1 : stripe_grain_bytes / elem_bytes;
  const std::size_t units = (count + grain - 1) / grain, L = static_cast<std::size_t>(nstripes);
  const std::size_t l = static_cast<std::size_t>(stripe);
  auto edge = [&](std::size_t k) {
    const std::size_t e = units * k / L * grain;
    return e < count ? e : count;
  };
  return {edge(l), edge(l + 1) - edge(l)};
}

/// The arguments stripe `stripe` runs with when the call is split: a slice of
/// every block, blocks still `a.block()` apart.
template <class T>
COLLX_HOST_DEVICE constexpr schedule_args<T> stripe_args(const schedule_args<T>& a, int stripe,
                                                         int nstripes) {
  const stripe_slice s = slice_of_stripe(a.count, sizeof(T), stripe, nstripes);
  schedule_args<T> out = a;
  out.stride = a.block();
  out.count = s.n;
  if (out.send != nullptr) out.send += s.lo;
  if (out.recv != nullptr) out.recv += s.lo;
  return out;
}

/// Connections per direction a primitives object of Algo caches:
/// Algo::connections where the algorithm states how many peers it talks to
/// each way, else proto::default_connections. The caches are indexed by peer
/// at run time, so on a GPU they live in every thread's local memory.
template <class Algo>
inline constexpr std::size_t connections_of = proto::default_connections;
template <class Algo>
  requires requires { Algo::connections; }
inline constexpr std::size_t connections_of<Algo> = Algo::connections;

/// Runs stripe `stripe` of `nstripes` of one rank's call of <Algo, Proto> for
/// collective C: the whole group of the executor calls it with the same
/// arguments (one team per stripe; each stripe's teams on every rank together
/// make one instance of the schedule). `channel` is Proto's FIFO number
/// (proto::channel_of<Proto>, or the resolved protocol's for proto::runtime).
/// The view must have at least `nstripes` stripes: status::invalid_argument
/// otherwise, before any FIFO is touched.
template <class Algo, class Proto, coll C, class Exec, class View, class T, class Red>
COLLX_HOST_DEVICE status run_stripe(const Exec& ex, const View& view, const Red& red, int channel,
                                    const schedule_args<T>& whole, int stripe, int nstripes) {
  if (nstripes < 1 || stripe < 0 || stripe >= nstripes) return status::invalid_argument;
  if constexpr (requires { view.nstripes(); }) {
    if (nstripes > view.nstripes()) return status::invalid_argument;
  } else {
    if (nstripes > 1) return status::invalid_argument;
  }
  constexpr bool split = splits_into_stripes<Algo>(C);
  if (!split && stripe != 0) return status::ok;
  const int parts = split ? nstripes : 1;
  const schedule_args<T> a = parts > 1 ? stripe_args(whole, stripe, parts) : whole;
  // An empty slice moves nothing on any rank: its stripe makes no primitives
  // object, so its counters are untouched.
  if (parts > 1 && a.count == 0) return status::ok;
  prims<Proto, Exec, View, T, Red, connections_of<Algo>> p(ex, view, whole.rank, red, channel, stripe, parts);
  return Algo::template run<C>(p, a);
}

}  // namespace collx
