// collx/algo/tree.hpp — the double binary tree.
//
// Two complementary binary trees each carry half of the data, so that every
// rank is an inner node in at most one of them and the leaves' idle links of
// one tree do the work of the other (NCCL's double binary tree). Tree 1 is the
// in-order binary tree on the ranks (root 0 with one child); tree 2 is its
// mirror (r → P-1-r) for even P, or its shift by one rank for odd P.
//
// all_reduce reduces every chunk up both trees to their roots and then
// broadcasts it down; broadcast only goes down, reduce only goes up. For the
// rooted collectives the trees are built on ranks relabelled relative to the
// root (v = rank - root mod P): tree 1 is the in-order tree on v (rooted at
// v = 0), tree 2 hangs the in-order tree of v = 1..P-1 (whose inner nodes are
// the leaves of tree 1) below v = 0. Data moves in chunks of at most
// max_chunk() elements, the chunks of the two trees interleaved.
//
// Across nodes (schedule_args::node_ranks = L: M >= 2 nodes of L >= 2 ranks,
// numbered node by node), all_reduce runs NCCL's shape: the double binary
// tree is built on the M nodes, and inside each node the ranks form a chain
// hanging from the node's head, which also links to the head of the parent
// node and of up to two child nodes. Tree 1's chain is tree 0's reversed
// (head local rank 0 in tree 0, L − 1 in tree 1), so no rank is a head in
// both. Each tree then crosses between nodes on M − 1 links, the fewest a
// tree can (the flat shape on 2 nodes of 2 ranks crosses on 2 of its 3),
// and a node's chain never does. Broadcast and reduce keep the flat shape.
//
// Bounded FIFOs cannot deadlock: every rank runs the same sequence of
// (phase, chunk, tree) steps; in one step a rank receives only from its
// children (up) or its parent (down) and sends the other way, so within a step
// waits point down (up phase) or up (down phase) a tree, and a send blocks only
// on a message of an earlier step (each call moves at most half a FIFO).
// Hence the blocked rank of the earliest step nearest the data source could
// always progress. (Across nodes the two trees' steps of one chunk come in
// an order of each rank's own; tree_first says why that stays safe.)
//
// Working memory: an inner node with two children combines them before
// sending up. all_reduce does that in recv (overwritten by the final value on
// the way down); reduce may not touch recv on non-root ranks and uses the
// rank's scratch buffer (prims.buffer(rank)), so its chunks are also at most
// buffer_elems().
//
// On 2 ranks the rooted pair is one tree twice (twin_trees): broadcast and
// reduce then run ring's chain, one message per chunk instead of one per
// half on the same connection.
//
// Determinism: every element's final value is computed once, at the root of
// its tree, in an order fixed by the tree shape, then copied down; all_reduce
// results are therefore bitwise identical on every rank and across calls.
#pragma once

#include <collx/algo/cost.hpp>
#include <collx/algo/ids.hpp>
#include <collx/algo/ring.hpp>
#include <collx/coll.hpp>
#include <collx/config.hpp>
#include <collx/error.hpp>
#include <collx/prims.hpp>

#include <cstddef>

namespace collx::algo {

struct tree {
  static constexpr algo_id id = algo_id::tree;
  static constexpr const char* name = collx::name(id);
  static constexpr bool deterministic = true;

  COLLX_HOST_DEVICE static constexpr bool implements(coll c) {
    return c == coll::all_reduce || c == coll::broadcast || c == coll::reduce;
  }

  /// A node's links in one tree (-1: none); kids[0..nkids) are valid. At
  /// most 2 kids in the flat shape, 3 for a node's head across nodes (two
  /// child nodes' heads, then the next rank of its chain).
  struct links {
    int parent = -1;
    int kids[3] = {-1, -1, -1};
    int nkids = 0;
  };

  /// The in-order binary tree on labels 0..n-1 (NCCL's btree): label 0 is the
  /// root with one child, the highest power of two below n.
  COLLX_HOST_DEVICE static constexpr links btree(int n, int x) {
    links t;
    if (n <= 1) return t;
    int bit = 1;
    while (bit < n && (bit & x) == 0) bit <<= 1;
    if (x == 0) {
      t.kids[t.nkids++] = bit >> 1;
      return t;
    }
    t.parent = (x ^ bit) | (bit << 1);
    if (t.parent >= n) t.parent = x ^ bit;
    int low = bit >> 1;
    if (low != 0) t.kids[t.nkids++] = x - low;
    while (low != 0 && x + low >= n) low >>= 1;
    if (low != 0) t.kids[t.nkids++] = x + low;
    return t;
  }

  /// Tree `which` (0 or 1) of the unrooted pair, on ranks (all_reduce).
  COLLX_HOST_DEVICE static constexpr links dtree(int P, int r, int which) {
    if (which == 0) return btree(P, r);
    // Tree 2: mirror for even P, shift by one for odd P.
    const bool mirror = P % 2 == 0;
    auto to = [&](int y) { return y < 0 ? -1 : (mirror ? P - 1 - y : (y + 1) % P); };
    links t = btree(P, mirror ? P - 1 - r : (r - 1 + P) % P);
    t.parent = to(t.parent);
    for (int k = 0; k < t.nkids; ++k) t.kids[k] = to(t.kids[k]);
    return t;
  }

  /// Tree `which` of the rooted pair, on labels v = rank - root mod P (both trees
  /// rooted at v = 0, which has one child in each).
  COLLX_HOST_DEVICE static constexpr links rooted(int P, int v, int which) {
    if (which == 0) return btree(P, v);
    links t;
    if (v == 0) {
      if (P > 1) t.kids[t.nkids++] = 1;
      return t;
    }
    t = btree(P - 1, v - 1);
    t.parent = t.parent < 0 ? 0 : t.parent + 1;
    for (int k = 0; k < t.nkids; ++k) t.kids[k] += 1;
    return t;
  }

  /// Whether the two trees of collective c on P ranks are the same tree, run
  /// then as ring's chain (its cost terms equal the pair's). Only the rooted
  /// pair on P = 2 is (both trees are root → the other rank): from P = 3 the
  /// root's child differs (tree 0: the highest power of two below P, tree 1:
  /// label 1), and the unrooted pair's roots differ for every P ≥ 2.
  COLLX_HOST_DEVICE static constexpr bool twin_trees(coll c, int P) {
    return c != coll::all_reduce && P == 2;
  }

  /// Whether ranks_per_node L describes M >= 2 nodes of L >= 2 ranks (the
  /// shape across nodes applies), for collective c on P ranks.
  COLLX_HOST_DEVICE static constexpr bool across_nodes(coll c, int P, int L) {
    return c == coll::all_reduce && fills_nodes(P, L);
  }

  /// Tree `which` across nodes (all_reduce): the double binary tree on the
  /// P / L nodes, a chain inside each node from its head (local rank 0 in
  /// tree 0, L − 1 in tree 1); a head's kids are its child nodes' heads,
  /// then the next rank of its chain.
  COLLX_HOST_DEVICE static constexpr links node_chain(int P, int L, int rank, int which) {
    const int M = P / L, n = rank / L;
    // Position in the node's chain (0: the head) and back to a rank.
    const int pos = which == 0 ? rank % L : L - 1 - rank % L;
    auto at = [&](int node, int p) { return node * L + (which == 0 ? p : L - 1 - p); };
    links t;
    const links across = dtree(M, n, which);
    if (pos > 0) t.parent = at(n, pos - 1);
    else if (across.parent >= 0) t.parent = at(across.parent, 0);
    if (pos == 0)
      for (int k = 0; k < across.nkids; ++k) t.kids[t.nkids++] = at(across.kids[k], 0);
    if (pos + 1 < L) t.kids[t.nkids++] = at(n, pos + 1);
    return t;
  }

  /// The links of `rank` in tree `which` for collective c, as ranks; L: ranks
  /// per node (schedule_args::node_ranks; 0: the flat shape).
  COLLX_HOST_DEVICE static constexpr links node(coll c, int P, int rank, int root, int which, int L = 0) {
    if (across_nodes(c, P, L)) return node_chain(P, L, rank, which);
    if (c == coll::all_reduce) return dtree(P, rank, which);
    links t = rooted(P, (rank - root + P) % P, which);
    auto to = [&](int v) { return v < 0 ? -1 : (v + root) % P; };
    t.parent = to(t.parent);
    for (int k = 0; k < t.nkids; ++k) t.kids[k] = to(t.kids[k]);
    return t;
  }

  /// α-β-γ terms for `bytes` on P ranks.
  ///
  /// steps: the Lamport depth of the schedule run as one chunk per tree — every
  /// message is stamped one more than the largest stamp its sender had received
  /// before sending it, and steps is the largest stamp any rank receives, i.e.
  /// the number of dependent message latencies on the critical path. For the
  /// tree that is about twice the height (up, then down) for all_reduce and
  /// the height for broadcast/reduce, stretched where a rank's work in one tree
  /// waits for its work in the other (one rank serves both trees in order).
  /// bytes_sent / bytes_reduced: the most any one rank sends / reduces (each
  /// tree carries bytes/2; a rank sends its half up once and down once per child).
  static constexpr int max_cost_ranks = 4096;
  COLLX_HOST_DEVICE static constexpr cost_terms cost(coll c, int P, double bytes,
                                                     const cost_context& x = {}) {
    if (P <= 1 || !implements(c) || P > max_cost_ranks) return {0, 0, 0};
    const int L = across_nodes(c, P, x.node_ranks) ? x.node_ranks : 0;
    int clk[max_cost_ranks] = {}, start[max_cost_ranks] = {};
    const int steps = lamport_depth(c, P, L, clk, start, {});
    int sent = 0, reduced = 0;  // in halves
    for (int r = 0; r < P; ++r) {
      int s = 0, red = 0;
      for (int w = 0; w < 2; ++w) {
        const links t = node(c, P, r, 0, w, L);
        if (c != coll::broadcast && t.parent >= 0) ++s;
        if (c != coll::reduce) s += t.nkids;
        if (c != coll::broadcast) red += t.nkids;
      }
      sent = s > sent ? s : sent;
      reduced = red > reduced ? red : reduced;
    }
    cost_terms t{double(steps), sent * bytes / 2, reduced * bytes / 2};
    // Halves sent to another node, per node, in the shape that runs (all_reduce:
    // the rooted trees' links depend on the root).
    if (c == coll::all_reduce && placed_in_nodes(P, x)) {
      const int N = x.node_ranks;
      int most = 0;
      for (int n = 0; n < P / N; ++n) {
        int out = 0;
        for (int r = n * N; r < (n + 1) * N; ++r)
          for (int w = 0; w < 2; ++w) {
            const links l = node(c, P, r, 0, w, L);
            if (l.parent >= 0 && l.parent / N != n) ++out;
            for (int k = 0; k < l.nkids; ++k) out += l.kids[k] / N != n;
          }
        most = out > most ? out : most;
      }
      t.node_bytes = most * bytes / 2;
      // Messages between nodes on the critical path: the same clock, each
      // crossing weighted 2^16 so that the deepest chain in crossings wins.
      t.node_steps = lamport_depth(c, P, L, clk, start, {N, 1 << 16}) >> 16;
    }
    return t;
  }

  template <coll C, class Prims, class T>
  COLLX_HOST_DEVICE static status run(Prims& p, const schedule_args<T>& a) {
    static_assert(implements(C), "algo::tree does not implement this collective (see C above)");
    return run_impl<C>(p, a);
  }

 private:
  template <coll C, class Prims, class T>
  COLLX_HOST_DEVICE static status run_impl(Prims& p, const schedule_args<T>& a) {
    const int P = a.nranks;
    if (P == 1) return p.local_copy(a.send, a.recv, a.count, C != coll::broadcast);
    // Twin trees are one chain: halves on its one connection would each pay
    // a step, so the chain runs as ring's (the same messages, one schedule).
    if constexpr (C != coll::all_reduce)
      if (twin_trees(C, P)) return ring::run<C>(p, a);
    const links t[2] = {node(C, P, a.rank, a.root, 0, a.node_ranks),
                        node(C, P, a.rank, a.root, 1, a.node_ranks)};
    const std::size_t half = a.count / 2;
    const std::size_t lo[2] = {0, half}, len[2] = {half, a.count - half};
    std::size_t chunk = p.max_chunk();
    if constexpr (C == coll::reduce) {
      const std::size_t s = p.buffer_elems();
      chunk = s < chunk ? s : chunk;
    }
    // Both trees' chunks, interleaved: (chunk k of tree 0, chunk k of tree 1), k = 0, 1, ...;
    // across nodes a rank takes first the tree where its step waits for nothing (tree_first).
    const std::size_t steps = (len[1] + chunk - 1) / chunk;
    const bool shaped = across_nodes(C, P, a.node_ranks);
    const int up_first = shaped ? tree_first(t, true) : 0, down_first = shaped ? tree_first(t, false) : 0;
    if constexpr (C != coll::broadcast) {
      for (std::size_t k = 0; k < steps; ++k)
        for (int i = 0; i < 2; ++i) {
          const int w = up_first ^ i;
          const std::size_t b = k * chunk;
          if (b >= len[w]) continue;
          const std::size_t o = lo[w] + b, m = len[w] - b < chunk ? len[w] - b : chunk;
          COLLX_TRY(up<C>(p, a, t[w], o, m));
        }
    }
    if constexpr (C != coll::reduce) {
      for (std::size_t k = 0; k < steps; ++k)
        for (int i = 0; i < 2; ++i) {
          const int w = down_first ^ i;
          const std::size_t b = k * chunk;
          if (b >= len[w]) continue;
          const std::size_t o = lo[w] + b, m = len[w] - b < chunk ? len[w] - b : chunk;
          COLLX_TRY(down<C>(p, a, t[w], o, m));
        }
    }
    return status::ok;
  }

  /// Across nodes, which tree a rank serves first in each chunk of a phase
  /// (up: the one where it is a leaf, sending without a wait; down: the one
  /// it is the root of, likewise), else tree 0. Interleaved strictly, one
  /// node's head waits for the other tree's chunk to arrive over the network
  /// before it sends its own, so the two directions of a link took turns (all_reduce
  /// over a 1 Gbit/s link, 2 nodes of 2: twice the hierarchy's time).
  /// No deadlock: every rank's first step is tree 0's or one that receives
  /// nothing, so tree 0's steps complete (by induction along tree 0), then
  /// tree 1's; no connection carries both trees in one phase here (a rank's
  /// two parents, or two sets of kids, differ), so messages stay in order.
  COLLX_HOST_DEVICE static constexpr int tree_first(const links* t, bool up) {
    if (up) return t[1].nkids == 0 && t[0].nkids > 0 ? 1 : 0;
    return t[1].parent < 0 && t[0].parent >= 0 ? 1 : 0;
  }

  COLLX_HOST_DEVICE static constexpr int root_of(coll c, int P, int which, int L = 0) {
    for (int r = 0; r < P; ++r)
      if (node(c, P, r, 0, which, L).parent < 0) return r;
    return 0;
  }
  COLLX_HOST_DEVICE static constexpr int tree_first_of(coll c, int P, int r, int L, bool up) {
    const links t[2] = {node(c, P, r, 0, 0, L), node(c, P, r, 0, 1, L)};
    return tree_first(t, up);
  }
  // What a message adds to a Lamport stamp: 1, plus `cross` when it goes
  // between nodes of N ranks (cross = 2^16: stamps count crossings first).
  struct stamping {
    int N = 0, cross = 0;
    COLLX_HOST_DEVICE constexpr int hop(int from, int to) const {
      return 1 + (N > 0 && to >= 0 && from / N != to / N ? cross : 0);
    }
  };
  // The largest stamp of the schedule's phases, in order: up tree 0, up tree
  // 1, down tree 0, down tree 1 (clk, start: scratch of P entries). Across
  // nodes a rank that serves tree 1 first (tree_first) does so with the clock
  // it had before the phase: its tree-1 leaf send (up) or root send (down)
  // receives nothing, so only its start counts.
  COLLX_HOST_DEVICE static constexpr int lamport_depth(coll c, int P, int L, int* clk, int* start,
                                                       stamping h) {
    for (int r = 0; r < P; ++r) clk[r] = 0;
    for (int w = 0; w < 2 && c != coll::broadcast; ++w) {
      if (w == 0)
        for (int r = 0; r < P; ++r) start[r] = clk[r];
      lamport_up(c, P, w, root_of(c, P, w, L), clk, L, L != 0 && w == 1 ? start : nullptr, h);
    }
    for (int w = 0; w < 2 && c != coll::reduce; ++w) {
      if (w == 0)
        for (int r = 0; r < P; ++r) start[r] = clk[r];
      const int r = root_of(c, P, w, L);
      const bool early = L != 0 && w == 1 && tree_first_of(c, P, r, L, false) == 1;
      lamport_down(c, P, w, r, clk[r], clk, L, early ? start[r] : -1, h);
    }
    int most = 0;
    for (int r = 0; r < P; ++r) most = clk[r] > most ? clk[r] : most;
    return most;
  }
  // Up phase: x receives from its kids, then sends; returns the stamp of what it sends.
  // start (tree 1 across nodes): a leaf that sends tree 1 first sends at its start clock.
  COLLX_HOST_DEVICE static constexpr int lamport_up(coll c, int P, int w, int x, int* clk, int L,
                                                    const int* start, stamping h) {
    const links t = node(c, P, x, 0, w, L);
    if (start != nullptr && t.nkids == 0 && tree_first_of(c, P, x, L, true) == 1)
      return start[x] + h.hop(x, t.parent);
    for (int k = 0; k < t.nkids; ++k) {
      const int s = lamport_up(c, P, w, t.kids[k], clk, L, start, h);
      clk[x] = s > clk[x] ? s : clk[x];
    }
    return clk[x] + h.hop(x, t.parent);
  }
  // Down phase: x receives `stamp` from its parent (the root: its own clock), then sends to its kids.
  // send_clock >= 0: x sends at that clock (a root that serves this tree first), not its current one.
  COLLX_HOST_DEVICE static constexpr void lamport_down(coll c, int P, int w, int x, int stamp, int* clk,
                                                       int L, int send_clock, stamping h) {
    clk[x] = stamp > clk[x] ? stamp : clk[x];
    const int from = send_clock >= 0 ? send_clock : clk[x];
    const links t = node(c, P, x, 0, w, L);
    for (int k = 0; k < t.nkids; ++k)
      lamport_down(c, P, w, t.kids[k], from + h.hop(x, t.kids[k]), clk, L, -1, h);
  }

  // Reduces elements [o, o+m) from the children into the parent (or, at the
  // root, into recv with post()).
  template <coll C, class Prims, class T>
  COLLX_HOST_DEVICE static status up(Prims& p, const schedule_args<T>& a, const links& t, std::size_t o,
                                     std::size_t m) {
    const T* src = a.send + o;
    if (t.parent < 0) {  // root: the final value lands in recv
      T* r = a.recv + o;
      for (int k = 0; k + 1 < t.nkids; ++k)
        COLLX_TRY(p.recv_reduce_copy(t.kids[k], k == 0 ? src : r, r, m, false));
      return p.recv_reduce_copy(t.kids[t.nkids - 1], t.nkids == 1 ? src : r, r, m);
    }
    if (t.nkids == 0) return p.send(t.parent, src, m);
    if (t.nkids == 1) return p.recv_reduce_send(t.kids[0], t.parent, src, m);
    // The kids but the last combine into working memory; the last one's sum goes up.
    T* w = C == coll::reduce ? p.buffer(a.rank) : a.recv + o;
    for (int k = 0; k + 1 < t.nkids; ++k)
      COLLX_TRY(p.recv_reduce_copy(t.kids[k], k == 0 ? src : w, w, m, false));
    return p.recv_reduce_send(t.kids[t.nkids - 1], t.parent, w, m);
  }

  // Sends elements [o, o+m) of the result from the root down to the leaves.
  template <coll C, class Prims, class T>
  COLLX_HOST_DEVICE static status down(Prims& p, const schedule_args<T>& a, const links& t, std::size_t o,
                                       std::size_t m) {
    T* dst = a.recv + o;
    if (t.parent < 0) {
      if constexpr (C == coll::broadcast) COLLX_TRY(p.copy_send(t.kids[0], a.send + o, dst, m));
      else COLLX_TRY(p.send(t.kids[0], dst, m));
    } else if (t.nkids == 0) {
      return p.recv(t.parent, dst, m);
    } else {
      COLLX_TRY(p.recv_copy_send(t.parent, t.kids[0], dst, m));
    }
    for (int k = 1; k < t.nkids; ++k) COLLX_TRY(p.send(t.kids[k], dst, m));
    return status::ok;
  }
};

}  // namespace collx::algo
