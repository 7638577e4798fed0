// collx/hier.hpp — a communicator over several nodes that keeps intra-node
// traffic on shared memory: hierarchical collectives built from a node
// communicator (shm, process ranks of one host) and a cross communicator
// (the ranks with the same local index on every node, over the network),
// next to the flat network communicator of every rank.
//
//   collx::hier_communicator c = collx::hier::from_env();   // as net::from_env
//
// Nodes: ranks whose host id is equal share a node; the host id is
// COLLX_HOSTID when set (to play several nodes on one host in tests, as
// NCCL_HOSTID does), else the host name and kernel boot id. The hierarchical
// path needs M >= 2 nodes of L >= 2 ranks each, every node the same L, and
// global ranks numbered node by node (rank = node · L + local rank), as
// collxrun --nnodes and torchrun number them; otherwise every call runs flat
// (hierarchical() says why).
//
// Hierarchical schedules (counts in elements, S the call's bytes):
//   all_reduce   node reduce_scatter (shm) → cross all_reduce of the node's
//                1/L share (network) → node all_gather (shm); the count's
//                remainder modulo L: node all_reduce → cross all_reduce
//   all_gather   cross all_gather (network) → node all_gather (shm) →
//                reorder to global rank order
//   broadcast    cross broadcast among the root's local index (network) →
//                node broadcast (shm)
//   reduce_scatter  blocks regrouped by local index → node reduce_scatter
//                (shm: each local rank gets its M blocks summed over the
//                node) → cross reduce_scatter (network)
//   reduce       node reduce to the root's local index (shm) → cross reduce
//                to the root's node (network)
//   all_to_all   blocks regrouped by local index → node all_to_all (shm) →
//                regrouped by node → cross all_to_all (network): M − 1
//                network messages of L blocks each instead of P − L of one
// all_to_allv, send/recv and barrier run on the flat communicator. Which path a call takes: the model's
// choice (hier_cost / flat_cost below, a tune::profile's two links; the
// preset tune::cpu_nodes_tcp unless hier_options::model says otherwise), or
// COLLX_HIER=0 (always flat) / 1 (always hierarchical when possible).
//
// Errors: as the communicators it is made of; a failure in one of them
// leaves that one in the error state and the call throws its error (the
// others stay usable, but the hierarchical communicator should be
// destroyed: the ranks may have stopped at different steps).
// Thread-safety: as basic_communicator (one thread per rank at a time).
#pragma once

#include <collx/detail/debug.hpp>
#include <collx/net.hpp>
#include <collx/process.hpp>
#include <collx/tune/presets.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace collx {

namespace hier {

/// Predicted µs of a flat ring all_reduce of `bytes` over P ranks of M nodes
/// (every step crosses the network: the ring's slowest link).
constexpr double flat_all_reduce_us(const tune::profile& m, int P, double bytes) {
  if (P < 2) return 0;
  const double steps = 2.0 * (P - 1);
  return steps * m.inter.alpha_us + steps / P * bytes / (m.inter.gbps * 1e3);
}

/// Predicted µs of the hierarchical all_reduce: L ranks per node, M nodes.
constexpr double hier_all_reduce_us(const tune::profile& m, int L, int M, double bytes) {
  double t = 0;
  if (L > 1) t += 2.0 * (L - 1) * m.intra.alpha_us + 2.0 * (L - 1) / L * bytes / (m.intra.gbps * 1e3);
  if (M > 1) t += 2.0 * (M - 1) * m.inter.alpha_us + 2.0 * (M - 1) / M * (bytes / L) / (m.inter.gbps * 1e3);
  return t;
}

/// Predicted µs of a flat ring all_gather of `bytes` per rank.
constexpr double flat_all_gather_us(const tune::profile& m, int P, double bytes) {
  return P < 2 ? 0 : (P - 1) * (m.inter.alpha_us + bytes / (m.inter.gbps * 1e3));
}

/// Hierarchical all_gather: the cross step moves `bytes` per node peer, the
/// node step M·bytes per local peer, then one local copy of everything.
constexpr double hier_all_gather_us(const tune::profile& m, int L, int M, double bytes) {
  return (M - 1) * (m.inter.alpha_us + bytes / (m.inter.gbps * 1e3)) +
         (L - 1) * (m.intra.alpha_us + M * bytes / (m.intra.gbps * 1e3)) +
         L * M * bytes / (m.intra.gbps * 1e3);
}

/// Predicted µs of a flat all_to_all of `bytes` per peer: P − 1 network messages.
constexpr double flat_all_to_all_us(const tune::profile& m, int P, double bytes) {
  return P < 2 ? 0 : (P - 1) * (m.inter.alpha_us + bytes / (m.inter.gbps * 1e3));
}

/// Hierarchical all_to_all: L − 1 node messages of M blocks, M − 1 network
/// messages of L blocks (aggregated per node), two regrouping copies.
constexpr double hier_all_to_all_us(const tune::profile& m, int L, int M, double bytes) {
  return (L - 1) * (m.intra.alpha_us + M * bytes / (m.intra.gbps * 1e3)) +
         (M - 1) * (m.inter.alpha_us + L * bytes / (m.inter.gbps * 1e3)) +
         2.0 * L * M * bytes / (m.intra.gbps * 1e3);
}

// On CPU nodes over TCP, two nodes of two ranks: the hierarchical all_reduce
// wins from small sizes on (it crosses the network in 2 steps, not 6).
static_assert(hier_all_reduce_us(tune::cpu_nodes_tcp, 2, 2, 8) <
              flat_all_reduce_us(tune::cpu_nodes_tcp, 4, 8));
static_assert(hier_all_reduce_us(tune::cpu_nodes_tcp, 2, 2, 1 << 20) <
              flat_all_reduce_us(tune::cpu_nodes_tcp, 4, 1 << 20));

/// How a hierarchical communicator decides.
struct hier_options {
  enum class mode : std::uint8_t { automatic, flat, hierarchical };
  mode use = mode::automatic;
  tune::profile model = tune::cpu_nodes_tcp;

  /// COLLX_HIER: 0 flat, 1 hierarchical where possible; unset or "auto": the model.
  static hier_options from_env() {
    hier_options o;
    if (const char* v = std::getenv("COLLX_HIER"); v != nullptr && *v != '\0') {
      const std::string s = v;
      if (s == "0") o.use = mode::flat;
      else if (s == "1") o.use = mode::hierarchical;
      else if (s != "auto")
        throw_error(status::invalid_argument, "COLLX_HIER='" + s + "': expected 0, 1 or auto");
    }
    return o;
  }
};

using net::host_id;

}  // namespace hier

class hier_communicator {
 public:
  /// Builds the node and cross communicators over an existing flat one
  /// (collective over all of its ranks).
  hier_communicator(net_communicator flat, const comm_options& opt = comm_options::from_env(),
                    const net::net_options& no = net::net_options::from_env(),
                    const hier::hier_options& ho = hier::hier_options::from_env())
      : flat_(std::move(flat)), ho_(ho) {
    const int P = flat_.size(), g = flat_.rank();
    // 1. Who shares a node: the host ids, hashed (a 64-byte record each).
    struct record {
      std::uint64_t hash;
      char name[56];
    };
    const std::string id = hier::host_id();
    record mine{};
    mine.hash = net::host_hash(id);
    std::snprintf(mine.name, sizeof mine.name, "%s", id.c_str());
    std::vector<record> all(static_cast<std::size_t>(P));
    flat_.all_gather(reinterpret_cast<const std::uint8_t*>(&mine),
                     reinterpret_cast<std::uint8_t*>(all.data()), sizeof(record));
    std::vector<int> node_of(static_cast<std::size_t>(P), -1);
    std::vector<std::uint64_t> nodes;
    std::vector<int> per_node;
    for (int r = 0; r < P; ++r) {
      int n = 0;
      while (n < static_cast<int>(nodes.size()) && nodes[static_cast<std::size_t>(n)] != all[r].hash) ++n;
      if (n == static_cast<int>(nodes.size())) nodes.push_back(all[r].hash), per_node.push_back(0);
      node_of[static_cast<std::size_t>(r)] = n;
      ++per_node[static_cast<std::size_t>(n)];
    }
    M_ = static_cast<int>(nodes.size());
    L_ = per_node[0];
    bool ok = M_ >= 2 && L_ >= 2;
    for (int n = 0; n < M_ && ok; ++n) ok = per_node[static_cast<std::size_t>(n)] == L_;
    for (int r = 0; r < P && ok; ++r) ok = node_of[static_cast<std::size_t>(r)] == r / L_;
    if (!ok) {
      why_flat_ = std::to_string(M_) + " node(s) of " + std::to_string(L_) +
                  (M_ < 2 || L_ < 2 ? " rank(s): the hierarchy needs >= 2 nodes of >= 2 ranks"
                                    : " ranks: needs equal nodes and ranks numbered node by node");
      debug();
      return;
    }
    node_ = g / L_;
    local_ = g % L_;
    // 2. Ids: each node's local rank 0 starts the node's root (loopback);
    // node 0's local rank l starts the root of cross communicator l, on the
    // address the network transport uses.
    struct ids {
      unique_id node_id;
      unique_id cross_id;
    };
    ids my{};
    if (local_ == 0) my.node_id = get_unique_id();
    if (node_ == 0) {
      bootstrap_options bo;
      bo.address = net::pick_interface(no.socket.ifname.empty() ? nullptr : no.socket.ifname.c_str(),
                                       no.socket.family.empty() ? nullptr : no.socket.family.c_str(),
                                       net::list_interfaces())
                       .host;
      if (const std::size_t pct = bo.address.find('%'); pct != std::string::npos) bo.address.resize(pct);
      my.cross_id = get_unique_id(bo);
    }
    std::vector<ids> every(static_cast<std::size_t>(P));
    flat_.all_gather(reinterpret_cast<const std::uint8_t*>(&my),
                     reinterpret_cast<std::uint8_t*>(every.data()), sizeof(ids));
    // 3. Both communicators, in the same order on every rank.
    node_comm_.emplace(init_rank(L_, every[static_cast<std::size_t>(node_ * L_)].node_id, local_, opt));
    cross_comm_.emplace(net::init_rank(M_, every[static_cast<std::size_t>(local_)].cross_id, node_, opt, no));
    debug();
  }

  hier_communicator(hier_communicator&&) noexcept = default;
  hier_communicator& operator=(hier_communicator&&) noexcept = default;

  int rank() const { return flat_.rank(); }
  int size() const { return flat_.size(); }
  int nodes() const { return M_; }
  int local_size() const { return node_comm_ ? L_ : 1; }
  int local_rank() const { return node_comm_ ? local_ : 0; }
  /// Whether hierarchical schedules are possible; if not, why_flat() says why.
  bool hierarchical() const { return node_comm_.has_value(); }
  const std::string& why_flat() const { return why_flat_; }
  /// Overrides how calls choose (hier_options::use) from now on.
  void set_mode(hier::hier_options::mode m) { ho_.use = m; }
  /// Whether the last collective took the hierarchical path.
  bool last_was_hierarchical() const { return last_hier_; }

  net_communicator& flat() { return flat_; }
  communicator& node() { return *node_comm_; }
  net_communicator& cross() { return *cross_comm_; }

  /// Whether a call of `kind` moving `bytes` (per rank) takes the hierarchy.
  bool use_hierarchy(coll kind, double bytes) const {
    if (!node_comm_ || ho_.use == hier::hier_options::mode::flat) return false;
    if (ho_.use == hier::hier_options::mode::hierarchical) return true;
    switch (kind) {
      case coll::all_reduce:
        return hier::hier_all_reduce_us(ho_.model, L_, M_, bytes) <
               hier::flat_all_reduce_us(ho_.model, size(), bytes);
      case coll::all_gather:
        return hier::hier_all_gather_us(ho_.model, L_, M_, bytes) <
               hier::flat_all_gather_us(ho_.model, size(), bytes);
      case coll::reduce_scatter:  // the all_reduce's first half: same ratio of terms
        return hier::hier_all_reduce_us(ho_.model, L_, M_, bytes) <
               hier::flat_all_reduce_us(ho_.model, size(), bytes);
      case coll::all_to_all:
        return hier::hier_all_to_all_us(ho_.model, L_, M_, bytes) <
               hier::flat_all_to_all_us(ho_.model, size(), bytes);
      case coll::broadcast:
      case coll::reduce: return true;  // M + L − 2 hops, of which M − 1 cross the network, not P − 1
      default: return false;
    }
  }

  void all_reduce(const void* send, void* recv, std::size_t count, dtype dt, reduce_op op) {
    const std::size_t es = size_of(dt);
    last_hier_ = use_hierarchy(coll::all_reduce, double(count * es));
    if (!last_hier_) return flat_.all_reduce(send, recv, count, dt, op);
    const std::size_t q = count / static_cast<std::size_t>(L_), rem = count % static_cast<std::size_t>(L_);
    const std::size_t body = q * static_cast<std::size_t>(L_);
    auto* out = static_cast<std::byte*>(recv);
    const auto* in = static_cast<const std::byte*>(send);
    if (q > 0) {
      std::byte* part = scratch(q * es);
      on_node([&] { node_comm_->reduce_scatter(send, part, q, dt, op); });  // my 1/L of the node's sum
      on_cross([&] { cross_comm_->all_reduce(part, part, q, dt, op); });    // … summed over nodes
      on_node([&] { node_comm_->all_gather(part, recv, q, dt); });          // every share, in order
    }
    if (rem > 0) {
      on_node([&] { node_comm_->all_reduce(in + body * es, out + body * es, rem, dt, op); });
      on_cross([&] { cross_comm_->all_reduce(out + body * es, out + body * es, rem, dt, op); });
    }
  }

  void all_gather(const void* send, void* recv, std::size_t count, dtype dt) {
    const std::size_t es = size_of(dt), blk = count * es;
    last_hier_ = use_hierarchy(coll::all_gather, double(blk));
    if (!last_hier_) return flat_.all_gather(send, recv, count, dt);
    const std::size_t M = static_cast<std::size_t>(M_), L = static_cast<std::size_t>(L_);
    std::byte* t = scratch(blk * M * (L + 1));
    std::byte* by_node = t;             // [m]: rank (m, local_)'s block
    std::byte* by_local = t + blk * M;  // [l][m]: rank (m, l)'s block
    on_cross([&] { cross_comm_->all_gather(send, by_node, count, dt); });
    on_node([&] { node_comm_->all_gather(by_node, by_local, count * M, dt); });
    auto* out = static_cast<std::byte*>(recv);
    for (std::size_t l = 0; l < L; ++l)
      for (std::size_t m = 0; m < M; ++m)
        if (blk != 0) std::memcpy(out + (m * L + l) * blk, by_local + (l * M + m) * blk, blk);
  }

  void broadcast(const void* send, void* recv, std::size_t count, dtype dt, int root) {
    require(root >= 0 && root < size(), "broadcast", "root " + std::to_string(root) + " is out of range");
    last_hier_ = use_hierarchy(coll::broadcast, double(count * size_of(dt)));
    if (!last_hier_) return flat_.broadcast(send, recv, count, dt, root);
    const int rn = root / L_, rl = root % L_;
    if (local_ == rl)
      on_cross([&] { cross_comm_->broadcast(rank() == root ? send : recv, recv, count, dt, rn); });
    on_node([&] { node_comm_->broadcast(recv, recv, count, dt, rl); });
  }

  void reduce_scatter(const void* send, void* recv, std::size_t recvcount, dtype dt, reduce_op op) {
    const std::size_t es = size_of(dt), blk = recvcount * es;
    last_hier_ = use_hierarchy(coll::reduce_scatter, double(blk * std::size_t(size())));
    if (!last_hier_) return flat_.reduce_scatter(send, recv, recvcount, dt, op);
    const std::size_t M = static_cast<std::size_t>(M_), L = static_cast<std::size_t>(L_);
    std::byte* by_local = scratch(blk * M * (L + 1));  // [l][m]: the block for rank (m, l)
    std::byte* mine = by_local + blk * M * L;          // [m]: my node's sum of blocks (m, local_)
    const auto* in = static_cast<const std::byte*>(send);
    for (std::size_t l = 0; l < L; ++l)
      for (std::size_t m = 0; m < M; ++m)
        if (blk != 0) std::memcpy(by_local + (l * M + m) * blk, in + (m * L + l) * blk, blk);
    on_node([&] {
      node_comm_->reduce_scatter(by_local, mine, recvcount * M, dt, op);
    });  // shm: summed over the node
    on_cross([&] { cross_comm_->reduce_scatter(mine, recv, recvcount, dt, op); });  // network: over the nodes
  }
  void reduce(const void* send, void* recv, std::size_t count, dtype dt, reduce_op op, int root) {
    require(root >= 0 && root < size(), "reduce", "root " + std::to_string(root) + " is out of range");
    last_hier_ = use_hierarchy(coll::reduce, double(count * size_of(dt)));
    if (!last_hier_) return flat_.reduce(send, recv, count, dt, op, root);
    const int rn = root / L_, rl = root % L_;
    std::byte* part = scratch(count * size_of(dt));  // written at local rank rl only
    on_node(
        [&] { node_comm_->reduce(send, part, count, dt, op, rl); });  // the node's sum, at its local rank rl
    if (local_ == rl) on_cross([&] { cross_comm_->reduce(part, recv, count, dt, op, rn); });
  }
  void all_to_all(const void* send, void* recv, std::size_t count, dtype dt) {
    const std::size_t blk = count * size_of(dt);
    last_hier_ = use_hierarchy(coll::all_to_all, double(blk));
    if (!last_hier_) return flat_.all_to_all(send, recv, count, dt);
    const std::size_t M = static_cast<std::size_t>(M_), L = static_cast<std::size_t>(L_);
    std::byte* a = scratch(2 * blk * M * L);  // a: [l][m] to node peers; b: what they sent me
    std::byte* b = a + blk * M * L;
    const auto* in = static_cast<const std::byte*>(send);
    auto* out = static_cast<std::byte*>(recv);
    auto copy = [blk](std::byte* d, const std::byte* s) {
      if (blk != 0) std::memcpy(d, s, blk);
    };
    // Per node peer l, the M blocks bound for ranks (m, l): one node message each.
    for (std::size_t l = 0; l < L; ++l)
      for (std::size_t m = 0; m < M; ++m) copy(a + (l * M + m) * blk, in + (m * L + l) * blk);
    on_node(
        [&] { node_comm_->all_to_all(a, b, count * M, dt); });  // b[l][m]: from (my node, l) to (m, local_)
    // Per node m, the L blocks this node sends to (m, local_): one network message each.
    for (std::size_t m = 0; m < M; ++m)
      for (std::size_t l = 0; l < L; ++l) copy(a + (m * L + l) * blk, b + (l * M + m) * blk);
    on_cross([&] {
      cross_comm_->all_to_all(a, out, count * L, dt);
    });  // out[m][l]: from (m, l), in global rank order
  }
  void barrier() { flat_.barrier(); }

  template <class T>
  void all_reduce(const T* send, T* recv, std::size_t count, reduce_op op) {
    all_reduce(static_cast<const void*>(send), static_cast<void*>(recv), count, dtype_of<T>, op);
  }
  template <class T>
  void all_gather(const T* send, T* recv, std::size_t count) {
    all_gather(static_cast<const void*>(send), static_cast<void*>(recv), count, dtype_of<T>);
  }
  template <class T>
  void reduce_scatter(const T* send, T* recv, std::size_t recvcount, reduce_op op) {
    reduce_scatter(static_cast<const void*>(send), static_cast<void*>(recv), recvcount, dtype_of<T>, op);
  }
  template <class T>
  void reduce(const T* send, T* recv, std::size_t count, reduce_op op, int root) {
    reduce(static_cast<const void*>(send), static_cast<void*>(recv), count, dtype_of<T>, op, root);
  }
  template <class T>
  void all_to_all(const T* send, T* recv, std::size_t count) {
    all_to_all(static_cast<const void*>(send), static_cast<void*>(recv), count, dtype_of<T>);
  }
  template <class T>
  void broadcast(const T* send, T* recv, std::size_t count, int root) {
    broadcast(static_cast<const void*>(send), static_cast<void*>(recv), count, dtype_of<T>, root);
  }

  /// Destroys the sub-communicators and the flat one (collective).
  void destroy() {
    if (cross_comm_) cross_comm_->destroy();
    if (node_comm_) node_comm_->destroy();
    flat_.destroy();
  }

 private:
  /// Runs one step on the node or cross communicator; its failure is
  /// rethrown (same status) naming the step and how that communicator's
  /// ranks map to global ranks, since its message numbers them its own way.
  template <class F>
  void on_node(F&& f) {
    step("node (shared memory, node " + std::to_string(node_) + ": its rank r is global rank " +
             std::to_string(node_ * L_) + " + r)",
         f);
  }
  template <class F>
  void on_cross(F&& f) {
    step("cross-node (network, local index " + std::to_string(local_) + ": its rank m is global rank m*" +
             std::to_string(L_) + " + " + std::to_string(local_) + ")",
         f);
  }
  template <class F>
  void step(const std::string& which, F& f) {
    try {
      f();
    } catch (const error& e) {
      std::string w = e.what();
      if (w.rfind("collx: ", 0) == 0) w.erase(0, 7);
      throw error(e.code(), "hierarchical call (global rank " + std::to_string(rank()) + " of " +
                                std::to_string(size()) + "): its " + which + " step failed: " + w);
    }
  }

  std::byte* scratch(std::size_t bytes) {
    if (scratch_.size() < bytes) scratch_.resize(bytes);
    return scratch_.data();
  }
  void debug() const {
    if (!collx::detail::debug_enabled() || flat_.rank() != 0) return;
    if (node_comm_)
      std::fprintf(stderr, "collx: hierarchical: %d nodes x %d ranks (shm inside, network across)\n", M_, L_);
    else std::fprintf(stderr, "collx: hierarchical: flat only, %s\n", why_flat_.c_str());
  }

  net_communicator flat_;
  hier::hier_options ho_;
  int M_ = 1, L_ = 1, node_ = 0, local_ = 0;
  std::optional<communicator> node_comm_;
  std::optional<net_communicator> cross_comm_;
  std::string why_flat_;
  std::vector<std::byte> scratch_;
  bool last_hier_ = false;
};

namespace hier {

/// As net::from_env, then the hierarchy (see the header comment).
inline hier_communicator from_env(const comm_options& opt = comm_options::from_env(),
                                  const net::net_options& no = net::net_options::from_env(),
                                  const hier_options& ho = hier_options::from_env()) {
  return hier_communicator(net::from_env(opt, no), opt, no, ho);
}

}  // namespace hier
}  // namespace collx
