// collx/comm/validate.hpp — argument checks of every communicator call, run
// before any byte moves.
//
// Each check throws collx::error naming the call, and usually the rank and
// the argument: status::invalid_argument for a bad value (null buffer with a
// non-zero count, root out of range, counts that overflow the addressable
// byte range, buffers that overlap other than in the documented in-place
// layout, a buffer in GPU memory), status::not_supported for a reduce_op
// the dtype lacks, and the
// communicator's error status (with its message) once it is in the error
// state. Messages are built only on failure: these checks run on every call.
//
// Nothing here synchronises with other ranks: a check sees only this rank's
// arguments (disagreements between ranks are the watch's job, comm/watch.hpp).
#pragma once

#include <collx/coll.hpp>
#include <collx/comm/p2p_group.hpp>
#include <collx/comm/state.hpp>
#include <collx/comm/watch.hpp>
#include <collx/detail/memory_kind.hpp>
#include <collx/dtype.hpp>
#include <collx/error.hpp>
#include <collx/reduce_op.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

namespace collx::comm {

/// Refuses work on a communicator in the error state, and collectives while
/// a point-to-point group is open.
template <class Transport>
[[noreturn]] COLLX_COLD void refuse_unusable(state<Transport>& s, const char* cn) {
  if (s.err != status::ok || detail::load_relaxed(s.view.abort_word()) != 0) {
    sync_error(s);
    throw_error(s.err, std::string(cn) + " (rank " + std::to_string(s.rank) +
                           "): communicator is in the error state after an earlier failure: " + s.err_msg);
  }
  throw_error(status::invalid_argument,
              std::string(cn) +
                  ": called inside group_start()/group_end(); only send and recv may be "
                  "grouped");
}

template <class Transport>
void check_usable(state<Transport>& s, const char* cn, bool collective) {
  if (s.err != status::ok || detail::load_relaxed(s.view.abort_word()) != 0 ||
      (collective && s.group_depth > 0)) [[unlikely]]
    refuse_unusable(s, cn);
}

/// Refuses a buffer the CPU cannot touch (GPU memory), asking the CUDA driver
/// once per new pointer (comm_options::check_pointers).
template <class Transport>
COLLX_COLD void check_new_buffer(state<Transport>& s, const char* cn, const char* which, const void* p) {
  const detail::pointer_kind k = detail::query_memory_kind(p);
  if (k.kind == detail::memory_kind::device) {
    char addr[2 + 2 * sizeof(void*) + 1];
    std::snprintf(addr, sizeof addr, "%p", p);
    throw_error(status::invalid_argument,
                std::string(cn) + " (rank " + std::to_string(s.rank) + "): " + which + " buffer " + addr +
                    " is CUDA device memory (GPU " + std::to_string(k.device) +
                    "); this communicator's ranks read and write buffers on the CPU. Use "
                    "collx::gpu::communicator (collx/cuda/communicator.hpp) for GPU buffers, or host, "
                    "pinned or managed memory (COLLX_CHECK_POINTERS=0 skips this check)");
  }
  s.host_buffers.remember(p, k.kind);
}

template <class Transport>
inline void check_buffer_memory(state<Transport>& s, const char* cn, const char* which, const void* p) {
  if (s.opt.check_pointers && s.host_buffers.find(p) == nullptr) [[unlikely]]
    check_new_buffer(s, cn, which, p);
}

inline void check_dtype(dtype dt, const char* cn) {
  require(is_valid(dt), cn, [&] {
    return std::string("dtype " + std::to_string(static_cast<int>(dt)) + " is not a collx dtype");
  });
}

/// Whether count × unit bytes fit the addressable range (ptrdiff_t). One
/// multiplication with an overflow flag: this runs on every call, and a
/// 64-bit division costs more than the rest of a call's checks.
inline bool bytes_addressable(std::size_t count, std::size_t unit) {
  std::size_t bytes = 0;
  return !__builtin_mul_overflow(count, unit, &bytes) &&
         bytes <= static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max());
}

/// A collective's arguments (all but all_to_allv and send/recv).
template <class Transport>
void validate(state<Transport>& s, coll c, const void* send, const void* recv, std::size_t count, dtype dt,
              reduce_op op, int root) {
  const char* cn = name(c);
  auto where = [&] { return std::string(cn) + " (rank " + std::to_string(s.rank) + ")"; };
  check_usable(s, cn, c != coll::send_recv);
  check_dtype(dt, cn);
  if (is_reduction(c)) {
    require(is_valid(op), cn, [&] {
      return std::string("reduce_op " + std::to_string(static_cast<int>(op)) + " is not a collx reduce_op");
    });
    if (!is_supported(op, dt))
      throw_error(status::not_supported,
                  where() + ": reduce_op " + name(op) + " is not supported for dtype " + name(dt));
  }
  if (c == coll::broadcast || c == coll::reduce)
    require(root >= 0 && root < s.size, cn, [&] {
      return std::string("root " + std::to_string(root) + " is out of range for " + std::to_string(s.size) +
                         " ranks");
    });
  // Element counts of each buffer, refusing products that overflow.
  const std::size_t esz = size_of(dt), P = static_cast<std::size_t>(s.size);
  require(bytes_addressable(count, esz * P), cn, [&] {
    return std::string("count " + std::to_string(count) + " overflows the addressable byte range");
  });
  std::size_t send_elems = count, recv_elems = count;
  if (c == coll::all_gather) recv_elems = count * P;
  if (c == coll::reduce_scatter) send_elems = count * P;
  if (c == coll::all_to_all) send_elems = recv_elems = count * P;
  const bool reads_send = c != coll::broadcast || s.rank == root;
  const bool writes_recv = c != coll::reduce || s.rank == root;
  if (count > 0) {
    require(!reads_send || send != nullptr, cn,
            [&] { return std::string("send buffer is null with count " + std::to_string(count)); });
    require(!writes_recv || recv != nullptr, cn,
            [&] { return std::string("recv buffer is null with count " + std::to_string(count)); });
    if (reads_send) check_buffer_memory(s, cn, "send", send);
    if (writes_recv && recv != send) check_buffer_memory(s, cn, "recv", recv);
  }
  if (count == 0 || !reads_send || !writes_recv) return;
  // Partial overlap of send and recv is never valid; only the in-place layout is.
  const auto* sb = static_cast<const std::byte*>(send);
  const auto* rb = static_cast<const std::byte*>(recv);
  const std::size_t sbytes = send_elems * esz, rbytes = recv_elems * esz;
  const bool overlap = sb < rb + rbytes && rb < sb + sbytes;
  if (!overlap) return;
  const std::size_t own = static_cast<std::size_t>(s.rank) * count * esz;
  bool in_place = false;
  switch (c) {
    case coll::all_gather: in_place = sb == rb + own; break;
    case coll::reduce_scatter: in_place = rb == sb + own; break;
    case coll::all_to_all: in_place = false; break;
    default: in_place = sb == rb; break;
  }
  require(in_place, cn, [&] {
    if (c == coll::all_to_all)
      return std::string("send and recv buffers overlap; all_to_all is out of place only");
    return std::string(
        "send and recv buffers overlap without being the in-place layout (see collx/communicator.hpp)");
  });
}

/// An all_to_allv's arguments: every count and displacement, every block
/// inside its buffer where the length is known, receive blocks disjoint, and
/// no send block overlapping a receive block.
template <class Transport>
void validate_v(state<Transport>& s, const buffer_desc& sb, const buffer_desc& rb, dtype dt) {
  const char* cn = "all_to_allv";
  check_usable(s, cn, true);
  check_dtype(dt, cn);
  const std::size_t esz = size_of(dt), P = static_cast<std::size_t>(s.size);
  const std::size_t limit = static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max()) / esz;
  using block = address_span;  // owner: the peer
  std::vector<block>* blocks = s.scratch.spans;
  blocks[0].clear();
  blocks[1].clear();
  const buffer_desc* sides[2] = {&sb, &rb};
  const char* side_name[2] = {"send", "recv"};
  for (int side = 0; side < 2; ++side) {
    const buffer_desc& b = *sides[side];
    const std::string sn = side_name[side];
    require(b.counts != nullptr, cn, [&] { return sn + "_counts is null"; });
    require(b.displs != nullptr, cn, [&] { return sn + "_displs is null"; });
    for (std::size_t j = 0; j < P; ++j) {
      const std::size_t c = b.counts[j], d = b.displs[j];
      auto entry = [&](const char* what, std::size_t val) {
        return sn + what + "[" + std::to_string(j) + "] = " + std::to_string(val);
      };
      require(c <= limit, cn, [&] {
        return entry("_counts", c) +
               " overflows the addressable byte range (a negative value cast to "
               "an unsigned type?)";
      });
      require(d <= limit, cn, [&] {
        return entry("_displs", d) +
               " overflows the addressable byte range (a negative value cast to "
               "an unsigned type?)";
      });
      require(d + c <= limit, cn, [&] {
        return entry("_displs", d) + " + " + entry("_counts", c) + " overflows the addressable byte range";
      });
      if (c == 0) continue;
      require(b.buf != nullptr, cn, [&] { return sn + " buffer is null with " + entry("_counts", c); });
      if (blocks[side].empty()) check_buffer_memory(s, cn, side_name[side], b.buf);
      require(b.length == buffer_desc::unknown_length || d + c <= b.length, cn, [&] {
        return "block of rank " + std::to_string(j) + " [" + std::to_string(d) + ", " +
               std::to_string(d + c) + ") lies outside the " + sn + " buffer of " + std::to_string(b.length) +
               " elements";
      });
      const auto base = reinterpret_cast<std::uintptr_t>(b.buf);
      blocks[side].push_back(block{base + d * esz, base + (d + c) * esz, j});
    }
  }
  // Receive blocks must be disjoint (each byte has one writer), and no send
  // block may overlap a receive block: the exchange is out of place.
  auto by_lo = [](const block& x, const block& y) { return x.lo < y.lo; };
  std::sort(blocks[1].begin(), blocks[1].end(), by_lo);
  for (std::size_t i = 1; i < blocks[1].size(); ++i)
    require(blocks[1][i - 1].hi <= blocks[1][i].lo, cn, [&] {
      return "recv blocks of ranks " + std::to_string(blocks[1][i - 1].owner) + " and " +
             std::to_string(blocks[1][i].owner) + " overlap";
    });
  for (const block& x : blocks[0]) {
    // The first receive block ending after x starts is the only candidate.
    auto it = std::partition_point(blocks[1].begin(), blocks[1].end(),
                                   [&](const block& y) { return y.hi <= x.lo; });
    require(it == blocks[1].end() || it->lo >= x.hi, cn, [&] {
      return "send block of rank " + std::to_string(x.owner) + " overlaps the recv block of rank " +
             std::to_string(it->owner) + "; all_to_allv is out of place only";
    });
  }
}

/// One send or recv as it is posted (queued or run as a group of one).
template <class Transport>
void validate_p2p(state<Transport>& s, const char* cn, const void* buf, std::size_t count, dtype dt,
                  int peer) {
  check_usable(s, cn, false);
  check_dtype(dt, cn);
  require(peer >= 0 && peer < s.size, cn, [&] {
    return "peer " + std::to_string(peer) + " is out of range for " + std::to_string(s.size) + " ranks";
  });
  require(bytes_addressable(count, size_of(dt)), cn,
          [&] { return "count " + std::to_string(count) + " overflows the addressable byte range"; });
  require(count == 0 || buf != nullptr, cn,
          [&] { return "buffer is null with count " + std::to_string(count); });
  if (count > 0) check_buffer_memory(s, cn, "the", buf);
}

/// A group's buffers: a receive buffer may not overlap any other buffer of
/// the group. `w` is working memory (its spans).
inline void validate_group(const std::vector<p2p_op>& ops, const char* cn, peer_scratch& w) {
  std::vector<address_span>&recvs = w.spans[0], &all = w.spans[1];
  recvs.clear();
  all.clear();
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].count == 0) continue;
    const auto lo = reinterpret_cast<std::uintptr_t>(ops[i].buf);
    const address_span sp{lo, lo + ops[i].count * size_of(ops[i].dt), i};
    all.push_back(sp);
    if (!ops[i].is_send) recvs.push_back(sp);
  }
  auto by_lo = [](const address_span& x, const address_span& y) { return x.lo < y.lo; };
  std::sort(recvs.begin(), recvs.end(), by_lo);
  auto describe = [&](std::size_t i) {
    return std::string(ops[i].is_send ? "send to " : "recv from ") + std::to_string(ops[i].peer);
  };
  for (const address_span& x : all) {
    auto it =
        std::partition_point(recvs.begin(), recvs.end(), [&](const address_span& y) { return y.hi <= x.lo; });
    for (; it != recvs.end() && it->lo < x.hi; ++it)
      require(it->owner == x.owner, cn, [&] {
        return "the buffer of the " + describe(it->owner) + " overlaps the buffer of the " +
               describe(x.owner) + " in the same group";
      });
  }
}

}  // namespace collx::comm
