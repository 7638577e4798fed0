// Every algorithm's constexpr cost() against its real schedule: the schedule
// runs on P thread ranks over a counting prims whose connections are unbounded
// in-memory queues. Each rank records the bytes it sends and reduces, and
// messages carry Lamport stamps (one more than the largest stamp the sender had
// received), so the largest stamp received is the schedule's step count as
// algo/cost.hpp defines it. Chunks are unbounded, as in that definition,
// except where a test bounds them to check a cost that depends on the FIFO
// geometry (cost_context::chunk_bytes).
// A message to the sending rank itself (direct's loopback) is a local copy:
// its stamp is the sender's own and its bytes are not sent bytes but local
// bytes, in and out; so is a copy between the rank's own user buffers, unless
// it is made while the rank waits for its peers (after its first send, before
// its last receive).
// Peer memory (needs_peer_memory) has its own terms: barriers, loads/stores of
// other ranks' buffers (peer bytes) and copies into or out of the rank's own
// registered buffer (staged bytes). Single copy (cost_context::single_copy)
// runs where the prims offer it: the ranks publish their user buffers, which
// peers then load in place (thread ranks) or read through the transport
// (process ranks, read_user); both count as peer bytes.
// Every collective an algorithm implements is run: all_to_allv with equal
// blocks, send_recv as one message to the next rank and one from the previous
// (the benchmark's pattern), barrier on 1-byte tokens (as the communicator).
#include <collx/variants.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace collx;

namespace {

/// Memory nothing reads or writes (the prims only compare addresses), left
/// untouched so that it costs no page faults.
template <class T>
struct untouched {
  explicit untouched(std::size_t len) : n(len), p(std::make_unique_for_overwrite<T[]>(len)) {}
  std::size_t n;
  std::unique_ptr<T[]> p;
  T* data() const { return p.get(); }
  std::size_t size() const { return n; }
};

struct network {
  network(int n, std::size_t scratch_bytes) : P(n), sync(n) {
    for (int r = 0; r < n; ++r) buffers.emplace_back(scratch_bytes / 8);
  }
  /// Lamport stamp that counts the messages crossing nodes first (compared
  /// lexicographically: the chain with most crossings, then the longest).
  struct node_stamp {
    int across = 0, all = 0;
    bool operator<(const node_stamp& o) const { return across != o.across ? across < o.across : all < o.all; }
  };
  struct message {
    std::size_t n;
    int stamp;
    std::vector<unsigned char> payload;  // a small send()'s data, for the receiving recv()
    node_stamp node{};
  };
  int P;
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::pair<int, int>, std::deque<message>> queues;
  std::barrier<> sync;
  std::vector<untouched<std::uint64_t>> buffers;  // peer memory, 8-byte aligned
  std::vector<std::string> errors;
  std::size_t chunk = std::size_t(1) << 40;  // max_chunk() in elements: unbounded
  int node_ranks = 0;                        // > 0: ranks placed node by node, counted across nodes
  // Single copy: whether schedules may read user buffers in place, whether
  // those are loadable (else read_user), and each rank's published buffers.
  bool single_copy = false, loadable = true, writable = true;
  struct span {
    const unsigned char* lo = nullptr;
    std::size_t bytes = 0;
  };
  std::vector<span> user_send = std::vector<span>(64), user_recv = std::vector<span>(64);
  // A multicast address over the buffers (cost_context::multicast): bytes each
  // rank's link carries to and from the switch.
  bool multicast = false;
  // Single-copy all_reduce up to this many bytes is one-shot (prims'
  // single_copy_one_shot_bytes; cost_context::one_shot_bytes).
  std::uint64_t one_shot = 0;
  std::vector<double> switch_in = std::vector<double>(64), switch_out = std::vector<double>(64);
};

// Element values are not modelled (the matrix tests check them), only counts
// and stamps, except that send() of up to 128 bytes carries its data to a plain
// recv() (count headers must arrive).
template <class T>
class counting_prims {
 public:
  using value_type = T;
  counting_prims(network& net, int rank) : net_(net), rank_(rank) {}

  std::size_t max_chunk() const { return net_.chunk; }
  double sent = 0, reduced = 0, peer_bytes = 0, staged = 0;  // bytes
  double loopback_bytes = 0;                                 // through the own loopback FIFO, in and out
  int received = 0;                                          // messages from other ranks
  // Copies between the own user buffers, with the messages sent and received before each.
  struct own_copy {
    int sent_before, received_before;
    double bytes;
  };
  std::vector<own_copy> own_copies;
  /// local_bytes (algo/cost.hpp): the loopback bytes, and the own copies not
  /// hidden by a wait, i.e. all but those made after the rank's first send
  /// and before its last receive (the peers are writing meanwhile).
  double local() const {
    double b = loopback_bytes;
    for (const own_copy& c : own_copies)
      if (!(c.sent_before > 0 && c.received_before < received)) b += c.bytes;
    return b;
  }
  double across = 0;  // bytes sent to ranks of other nodes (network::node_ranks)
  int clock = 0, barriers = 0;
  int messages = 0;                  // sent to other ranks
  network::node_stamp node_clock{};  // its across: node_steps (network::node_ranks)

  status send(int to, const T* src, std::size_t n) { return out(to, n, src); }
  status recv(int from, T* dst, std::size_t n) { return in(from, n, dst); }
  status recv_reduce_send(int from, int to, const T*, std::size_t n) {
    COLLX_TRY(in(from, n));
    reduced += bytes(n);
    return out(to, n);
  }
  status recv_reduce_copy(int from, const T*, T*, std::size_t n, bool = true) {
    COLLX_TRY(in(from, n));
    reduced += bytes(n);
    return status::ok;
  }
  status recv_reduce(int from, const T*, T*, std::size_t n) {
    COLLX_TRY(in(from, n));
    reduced += bytes(n);
    return status::ok;
  }
  status recv_reduce_copy_send(int from, int to, const T*, T*, std::size_t n) {
    COLLX_TRY(in(from, n));
    reduced += bytes(n);
    return out(to, n);
  }
  status recv_copy_send(int from, int to, T*, std::size_t n) {
    COLLX_TRY(in(from, n));
    return out(to, n);
  }
  status copy_send(int to, const T*, T*, std::size_t n) { return out(to, n); }
  // Peer memory: loads from and stores to another rank's buffer are peer
  // bytes, a copy between the own registered buffer and other own memory is
  // staging, a barrier is a barrier (no message, no step).
  status local_copy(const T* src, T* dst, std::size_t n, bool finish) {
    if (src == dst && !finish) return status::ok;  // in place: nothing moves (prims.hpp)
    peer_bytes += bytes((peer(src) ? n : 0) + (peer(dst) ? n : 0));
    if (!peer(src) && !peer(dst) && (own(src) || own(dst))) staged += bytes(n);
    if (!peer(src) && !peer(dst) && !own(src) && !own(dst))
      own_copies.push_back({messages, received, bytes(n)});
    return status::ok;
  }
  T* buffer(int q) { return reinterpret_cast<T*>(net_.buffers[static_cast<std::size_t>(q)].data()); }
  std::size_t buffer_elems() const { return net_.buffers[0].size() * 8 / sizeof(T); }
  status local_reduce(const T* a, const T* b, T* dst, std::size_t n, bool) {
    peer_bytes += bytes((peer(a) ? n : 0) + (peer(b) ? n : 0) + (peer(dst) ? n : 0));
    reduced += bytes(n);
    return status::ok;
  }
  static constexpr int reduce_many_max = 8;
  status local_reduce_many(const T* const* src, int k, T* dst, std::size_t n, bool) {
    for (int j = 0; j < k; ++j) peer_bytes += bytes(peer(src[j]) ? n : 0);
    peer_bytes += bytes(peer(dst) ? n : 0);
    reduced += bytes(n * static_cast<std::size_t>(k - 1));
    return status::ok;
  }
  // Switch channel: without a multicast address a load-reduce loads (and
  // combines) every peer's copy, a store writes every peer's. With one, the
  // switch reads every rank's copy (out of each rank's link) and returns the
  // result (into the caller's), or takes the caller's data and writes every
  // rank's copy.
  static constexpr bool multicast = true;
  bool mc_store_fans_out() const { return net_.multicast; }
  status mc_load_reduce(std::size_t, T*, std::size_t n, bool) {
    if (net_.multicast) return through_switch(n, false);
    peer_bytes += bytes(n * static_cast<std::size_t>(net_.P - 1));
    reduced += bytes(n * static_cast<std::size_t>(net_.P - 1));
    return status::ok;
  }
  // Registered buffers bound to the multicast address (single copy with one).
  bool user_multicast(bool) const { return net_.multicast; }
  status mc_user_load_reduce(std::size_t, T*, std::size_t n, bool) { return through_switch(n, false); }
  status mc_user_store(std::size_t, const T*, std::size_t n) { return through_switch(n, true); }
  status mc_store(std::size_t, const T*, std::size_t n) {
    if (net_.multicast) return through_switch(n, true);
    peer_bytes += bytes(n * static_cast<std::size_t>(net_.P - 1));
    return status::ok;
  }
  status barrier() {
    net_.sync.arrive_and_wait();
    ++barriers;
    return status::ok;
  }
  // Single copy (nvls::single_copy): offered from 0 bytes when the network
  // says so, never otherwise (the staged schedules run).
  std::uint64_t single_copy_min_bytes() const { return net_.single_copy ? 0 : ~std::uint64_t{0}; }
  std::uint64_t single_copy_one_shot_bytes() const { return net_.one_shot; }
  void set_user_sizes(std::size_t send_n, std::size_t recv_n) { send_n_ = send_n, recv_n_ = recv_n; }
  status publish_user_buffers(const T* send, const T* recv, std::size_t) {
    net_.user_send[static_cast<std::size_t>(rank_)] = {reinterpret_cast<const unsigned char*>(send),
                                                       bytes_of(send_n_)};
    net_.user_recv[static_cast<std::size_t>(rank_)] = {reinterpret_cast<const unsigned char*>(recv),
                                                       bytes_of(recv_n_)};
    return barrier();
  }
  const T* user_buffer(int q, bool recv_side) const {
    if (!net_.loadable) return nullptr;
    const auto& u = (recv_side ? net_.user_recv : net_.user_send)[static_cast<std::size_t>(q)];
    return reinterpret_cast<const T*>(u.lo);
  }
  status read_user(int q, bool recv_side, std::size_t off, T*, std::size_t n) {
    return count_user("read_user", q, recv_side, off, n);
  }
  bool user_in_place(int q) const {
    const auto qz = static_cast<std::size_t>(q);
    return net_.user_send[qz].lo == net_.user_recv[qz].lo;
  }
  /// direct's message streams: a read of n elements at an address q sent,
  /// which must lie in q's send buffer (set up by check_cost).
  status read_peer(int q, std::uint64_t addr, T*, std::size_t n) {
    const auto& u = net_.user_send[static_cast<std::size_t>(q)];
    const auto lo = reinterpret_cast<std::uintptr_t>(u.lo);
    if (q == rank_ || addr < lo || addr + bytes_of(n) > lo + u.bytes) {
      error("read_peer of rank " + std::to_string(q) + " outside its send buffer or of itself");
      return status::invalid_argument;
    }
    peer_bytes += bytes(n);
    return status::ok;
  }
  bool can_write_user() const { return net_.writable; }
  status write_user(int q, std::size_t off, const T*, std::size_t n) {
    return count_user("write_user", q, true, off, n);
  }

 private:
  static double bytes(std::size_t n) { return double(n) * sizeof(T); }
  status through_switch(std::size_t n, bool store) {
    std::lock_guard lk(net_.mu);
    const auto self = static_cast<std::size_t>(rank_);
    (store ? net_.switch_out : net_.switch_in)[self] += bytes(n);
    for (std::size_t q = 0; q < static_cast<std::size_t>(net_.P); ++q)
      (store ? net_.switch_in : net_.switch_out)[q] += bytes(n);
    return status::ok;
  }
  /// A read or write of q's published buffer: peer bytes, inside the buffer and of a peer.
  status count_user(const char* what, int q, bool recv_side, std::size_t off, std::size_t n) {
    const auto& u = (recv_side ? net_.user_recv : net_.user_send)[static_cast<std::size_t>(q)];
    if (q == rank_ || bytes_of(off + n) > u.bytes) {
      error(std::string(what) + " of rank " + std::to_string(q) + " [" + std::to_string(off) + ", +" +
            std::to_string(n) + ") outside its published buffer or of itself");
      return status::invalid_argument;
    }
    peer_bytes += bytes(n);
    return status::ok;
  }
  void error(const std::string& e) {
    std::lock_guard lk(net_.mu);
    net_.errors.push_back("rank " + std::to_string(rank_) + ": " + e);
  }
  status out(int to, std::size_t n, const T* src = nullptr) {
    if (n == 0) return status::ok;
    if (to < 0 || to >= net_.P) {
      error("send to invalid peer " + std::to_string(to));
      return status::invalid_argument;
    }
    const bool loopback = to == rank_;
    if (!loopback) sent += bytes(n), ++messages;
    else loopback_bytes += bytes(n);  // into the loopback FIFO
    const bool crosses = net_.node_ranks > 0 && to / net_.node_ranks != rank_ / net_.node_ranks;
    if (crosses) across += bytes(n);
    {
      std::lock_guard lk(net_.mu);
      network::message m{n, loopback ? clock : clock + 1, {}, node_clock};
      if (!loopback) m.node = {node_clock.across + (crosses ? 1 : 0), node_clock.all + 1};
      if (src != nullptr && n * sizeof(T) <= 128)
        m.payload.assign(reinterpret_cast<const unsigned char*>(src),
                         reinterpret_cast<const unsigned char*>(src + n));
      net_.queues[{rank_, to}].push_back(std::move(m));
    }
    net_.cv.notify_all();
    return status::ok;
  }
  status in(int from, std::size_t n, T* dst = nullptr) {
    if (n == 0) return status::ok;
    std::unique_lock lk(net_.mu);
    auto& q = net_.queues[{from, rank_}];
    if (!net_.cv.wait_for(lk, std::chrono::seconds(20), [&] { return !q.empty(); })) {
      lk.unlock();
      error("timed out waiting for " + std::to_string(n) + " elements from rank " + std::to_string(from));
      return status::timeout;
    }
    const auto m = std::move(q.front());
    q.pop_front();
    lk.unlock();
    if (m.n != n) {
      error("received " + std::to_string(m.n) + " elements from rank " + std::to_string(from) +
            ", expected " + std::to_string(n));
      return status::mismatch;
    }
    if (dst != nullptr && !m.payload.empty()) std::memcpy(dst, m.payload.data(), m.payload.size());
    if (from == rank_) loopback_bytes += bytes(n);  // out of the loopback FIFO
    else ++received;
    clock = m.stamp > clock ? m.stamp : clock;
    if (node_clock < m.node) node_clock = m.node;
    return status::ok;
  }
  bool own(const T* x) const {
    const auto* b = reinterpret_cast<const unsigned char*>(x);
    const auto& v = net_.buffers[static_cast<std::size_t>(rank_)];
    const auto* lo = reinterpret_cast<const unsigned char*>(v.data());
    return b >= lo && b < lo + v.size() * 8;
  }
  bool peer(const T* x) const {
    const auto* b = reinterpret_cast<const unsigned char*>(x);
    for (int q = 0; q < net_.P; ++q) {
      if (q == rank_) continue;
      const auto& v = net_.buffers[static_cast<std::size_t>(q)];
      const auto* lo = reinterpret_cast<const unsigned char*>(v.data());
      if (b >= lo && b < lo + v.size() * 8) return true;
      for (const auto* u :
           {&net_.user_send[static_cast<std::size_t>(q)], &net_.user_recv[static_cast<std::size_t>(q)]})
        if (u->lo != nullptr && b >= u->lo && b < u->lo + u->bytes) return true;  // a peer's user buffer
    }
    return false;
  }
  static std::size_t bytes_of(std::size_t n) { return n * sizeof(T); }
  std::size_t send_n_ = 0, recv_n_ = 0;
  network& net_;
  int rank_;
};

/// One rank's buffers and per-peer descriptions for collective C.
template <class T>
struct rank_io {
  explicit rank_io(std::size_t send_n, std::size_t recv_n) : send(send_n), recv(recv_n) {}
  untouched<T> send, recv;
  std::vector<std::size_t> counts, displs;  // all_to_allv: equal blocks
  peer_layout layout;
  p2p_message out_msg, in_msg;  // send_recv: one message each way
  std::vector<std::uint32_t> send_begin, recv_begin;
  p2p_plan plan;
  mismatch_report report;
};

/// Runs A's schedule of C on P ranks and checks each counted term against
/// A::cost(C, P, bytes, x); chunk_elems bounds max_chunk() (x.chunk_bytes).
/// in_place: every rank's send is its own block of recv (all_gather) or its
/// recv (broadcast, all_reduce). one_shot_bytes: single-copy all_reduce up to
/// this size is one-shot.
/// Returns the most messages one rank sent.
template <class A, coll C>
int check_cost(int P, std::size_t chunk_elems = std::size_t(1) << 40, bool single_copy = false,
               bool loadable = true, std::size_t peer_buffer_bytes = 0, int node_ranks = 0,
               bool in_place = false, std::size_t count_elems = 40320, bool multicast = false,
               std::uint64_t one_shot_bytes = 0) {
  // With several segments, per-rank slices are cut per segment: their sizes
  // round differently from the whole call's, by under P elements a segment.
  const double slack = peer_buffer_bytes > 0 ? 1e-3 : 0;
  auto near = [slack](double measured, double modelled) {
    return measured >= modelled * (1 - slack) && measured <= modelled * (1 + slack);
  };
  // Barrier tokens are bytes, as the communicator runs it; the rest in 4-byte elements.
  using T = std::conditional_t<C == coll::barrier, std::uint8_t, std::uint32_t>;
  // 40320 by default: divisible by 2^7 and by 1..9, so halves, hypercube parts
  // and ring chunks are exact.
  const std::size_t count = C == coll::barrier ? 0 : count_elems;
  const std::size_t Pz = static_cast<std::size_t>(P);
  const bool blocks_in = C == coll::reduce_scatter || C == coll::all_to_all || C == coll::all_to_allv;
  const bool blocks_out = C == coll::all_gather || C == coll::all_to_all || C == coll::all_to_allv;
  const std::size_t send_n = blocks_in ? count * Pz : count, recv_n = blocks_out ? count * Pz : count;
  // The collective's size as nccl-tests counts it (the unit of cost()).
  const double bytes = double(blocks_in || blocks_out ? count * Pz : count) * sizeof(T);
  const int root = P / 2;
  // Peer memory big enough that nvls runs in one segment, unless a test
  // bounds it (cost_context::peer_buffer_bytes).
  network net(P, peer_buffer_bytes > 0 ? peer_buffer_bytes : std::size_t(4) << 20);
  net.chunk = chunk_elems;
  net.node_ranks = node_ranks;
  net.single_copy = single_copy;
  net.loadable = loadable;
  net.multicast = multicast;
  net.one_shot = one_shot_bytes;
  algo::cost_context x;
  x.single_copy = single_copy && P > 1;
  x.peer_buffer_bytes = double(peer_buffer_bytes);
  if (chunk_elems < (std::size_t(1) << 40)) x.chunk_bytes = double(chunk_elems) * sizeof(T);
  x.node_ranks = node_ranks;
  x.in_place = in_place;
  x.multicast = multicast;
  x.one_shot_bytes = double(one_shot_bytes);
  REQUIRE((!in_place || C == coll::all_gather || C == coll::broadcast || C == coll::all_reduce));
  std::vector<counting_prims<T>> prims;
  for (int r = 0; r < P; ++r) prims.emplace_back(net, r).set_user_sizes(send_n, recv_n);
  std::vector<rank_io<T>> io;
  io.reserve(Pz);  // layout and plan point into the elements
  for (int r = 0; r < P; ++r) {
    auto& b = io.emplace_back(send_n, recv_n);
    b.counts.assign(Pz, count);
    for (std::size_t j = 0; j < Pz; ++j) b.displs.push_back(j * count);
    b.layout = {b.counts.data(), b.displs.data(), b.counts.data(), b.displs.data()};
    const int to = (r + 1) % P, from = (r + P - 1) % P;
    b.out_msg = {b.send.data(), count};
    b.in_msg = {b.recv.data(), count};
    for (int q = 0; q <= P; ++q) {
      b.send_begin.push_back(q > to ? 1 : 0);
      b.recv_begin.push_back(q > from ? 1 : 0);
    }
    b.plan = {&b.out_msg, b.send_begin.data(), &b.in_msg, b.recv_begin.data()};
    // Where direct's message streams read (nvls publishes its own).
    net.user_send[static_cast<std::size_t>(r)] = {reinterpret_cast<const unsigned char*>(b.send.data()),
                                                  send_n * sizeof(T)};
  }
  std::vector<status> st(Pz, status::ok);
  std::vector<std::thread> threads;
  for (int r = 0; r < P; ++r)
    threads.emplace_back([&, r] {
      auto& b = io[static_cast<std::size_t>(r)];
      const T* send = !in_place ? b.send.data()
                      : C == coll::broadcast || C == coll::all_reduce
                          ? b.recv.data()
                          : b.recv.data() + static_cast<std::size_t>(r) * count;
      schedule_args<T> a{send, b.recv.data(), count, root, r, P, &b.layout, &b.plan, &b.report};
      a.node_ranks = node_ranks;
      if (single_copy) a.read_in_place_bytes = 0;  // direct's streams: every message that can
      st[static_cast<std::size_t>(r)] = A::template run<C>(prims[static_cast<std::size_t>(r)], a);
    });
  for (auto& t : threads) t.join();
  INFO(A::name << " " << name(C) << " P=" << P << " node_ranks=" << node_ranks);
  for (auto& e : net.errors) UNSCOPED_INFO(e);
  REQUIRE(net.errors.empty());
  for (int r = 0; r < P; ++r) REQUIRE(st[static_cast<std::size_t>(r)] == status::ok);
  for (auto& [k, q] : net.queues) {
    INFO("unconsumed messages " << k.first << " -> " << k.second);
    CHECK(q.empty());
  }
  double sent = 0, reduced = 0, peer_bytes = 0, staged = 0, local = 0;
  int steps = 0, barriers = 0, messages = 0;
  for (auto& p : prims) {
    messages = std::max(messages, p.messages);
    sent = std::max(sent, p.sent);
    reduced = std::max(reduced, p.reduced);
    peer_bytes = std::max(peer_bytes, p.peer_bytes);
    staged = std::max(staged, p.staged);
    local = std::max(local, p.local());
    steps = std::max(steps, p.clock);
    barriers = std::max(barriers, p.barriers);
  }
  constexpr auto c0 = A::cost(C, 8, 1024.0);  // cost() is usable at compile time
  static_assert(c0.steps >= 0);
  const algo::cost_terms model = A::cost(C, P, bytes, x);
  CHECK(double(steps) == model.steps);
  CHECK(near(sent, model.bytes_sent));
  CHECK(near(reduced, model.bytes_reduced));
  CHECK(double(barriers) == model.barriers);
  CHECK(near(peer_bytes, model.peer_bytes));
  CHECK(near(staged, model.staged_bytes));
  double through_switch = 0;
  for (std::size_t r = 0; r < Pz; ++r)
    through_switch = std::max({through_switch, net.switch_in[r], net.switch_out[r]});
  CHECK(near(through_switch, model.switch_bytes));
  // One rank: every variant makes the same copy (cost() states nothing).
  if (P > 1) {
    INFO("local bytes: counted " << local << ", cost() " << model.local_bytes << " of " << bytes);
    CHECK(near(local, model.local_bytes));
  }
  // Across nodes: the most bytes one node sends to the others, where stated.
  if (model.node_bytes >= 0) {
    REQUIRE(node_ranks > 0);
    double most = 0;
    for (int n = 0; n < P / node_ranks; ++n) {
      double out = 0;
      for (int r = n * node_ranks; r < (n + 1) * node_ranks; ++r)
        out += prims[static_cast<std::size_t>(r)].across;
      most = std::max(most, out);
    }
    CHECK(near(most, model.node_bytes));
  } else if (node_ranks > 0) {
    UNSCOPED_INFO(A::name << " " << name(C) << ": node_bytes not stated");
  }
  // Across nodes: the messages between nodes on the deepest such chain, where stated.
  if (model.node_steps >= 0) {
    REQUIRE(node_ranks > 0);
    int most = 0;
    for (auto& p : prims) most = std::max(most, p.node_clock.across);
    CHECK(double(most) == model.node_steps);
  }
  return messages;
}

template <class A>
void check_algorithm(int P, int node_ranks = 0) {
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (
        [&] {
          constexpr coll C = static_cast<coll>(I);
          if constexpr (A::implements(C))
            check_cost<A, C>(P, std::size_t(1) << 40, false, true, 0, node_ranks);
        }(),
        ...);
  }
  (std::make_index_sequence<coll_count>{});
}

}  // namespace

/// COLLX_TEST_SCALE=quick (the sanitizer workflows): skip the largest rank counts.
bool quick_scale() {
  const char* s = std::getenv("COLLX_TEST_SCALE");
  return s != nullptr && std::string(s) == "quick";
}

TEST_CASE("cost(): every term matches the real schedules", "[cost]") {
  const int P = GENERATE(1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16);
  // 12 and 16 ranks take most of this test's time (each schedule runs on P
  // threads); under ASan's -O0 build the whole list ran past the timeout.
  // The cpu workflow checks them.
  if (P > 9 && quick_scale()) return;
  []<class... As>(int p, type_list<As...>) { (check_algorithm<As>(p), ...); }(P, algorithms{});
  // direct's all_reduce flavours; the registered `direct` is one-shot with unbounded chunks.
  check_algorithm<algo::direct_one_shot>(P);
  check_algorithm<algo::direct_two_shot>(P);
}

TEST_CASE("cost(): direct's short messages ride in their header calls", "[cost]") {
  const int P = GENERATE(2, 3, 5);
  // 4-byte elements: up to 28 fit the 112 bytes after a header's counts.
  for (const std::size_t n : {std::size_t(1), std::size_t(28), std::size_t(29), std::size_t(300)}) {
    INFO(n << " elements per message");
    check_cost<algo::direct, coll::all_to_allv>(P, std::size_t(1) << 40, false, true, 0, 0, false, n);
    check_cost<algo::direct, coll::send_recv>(P, std::size_t(1) << 40, false, true, 0, 0, false, n);
  }
}

TEST_CASE("cost(): direct reads long messages in place where single copy is on", "[cost]") {
  const int P = GENERATE(2, 3, 5);
  // Single copy from 0 bytes: every message that does not ride in its header
  // is read from the sender's buffer; 28 elements still ride.
  for (const std::size_t n : {std::size_t(28), std::size_t(29), std::size_t(300), std::size_t(40320)}) {
    INFO(n << " elements per message");
    check_cost<algo::direct, coll::all_to_allv>(P, std::size_t(1) << 40, true, true, 0, 0, false, n);
    check_cost<algo::direct, coll::send_recv>(P, std::size_t(1) << 40, true, true, 0, 0, false, n);
    // Bounded chunks change nothing: no data calls.
    check_cost<algo::direct, coll::all_to_allv>(P, 64, true, true, 0, 0, false, n);
  }
}

TEST_CASE("direct: ends whose read-in-place thresholds differ report a mismatch, not a hang", "[cost]") {
  // Rank 0 reads messages in place from 0 bytes, rank 1 never: each receives
  // a header whose flag disagrees with its own decision, and stops there
  // (a wait for data calls or tokens that never come would run into the
  // harness's 20 s deadline and report a timeout instead).
  network net(2, 1 << 12);
  std::vector<counting_prims<std::uint32_t>> prims;
  for (int r = 0; r < 2; ++r) prims.emplace_back(net, r);
  const std::size_t n = 1000;
  std::vector<rank_io<std::uint32_t>> io;
  io.reserve(2);
  for (int r = 0; r < 2; ++r) {
    auto& b = io.emplace_back(n, n);
    b.out_msg = {b.send.data(), n};
    b.in_msg = {b.recv.data(), n};
    const int peer = 1 - r;
    for (int q = 0; q <= 2; ++q) b.send_begin.push_back(q > peer ? 1 : 0);
    b.recv_begin = b.send_begin;
    b.plan = {&b.out_msg, b.send_begin.data(), &b.in_msg, b.recv_begin.data()};
    net.user_send[static_cast<std::size_t>(r)] = {reinterpret_cast<const unsigned char*>(b.send.data()),
                                                  n * sizeof(std::uint32_t)};
  }
  status st[2];
  std::thread t[2];
  for (int r = 0; r < 2; ++r)
    t[r] = std::thread([&, r] {
      auto& b = io[static_cast<std::size_t>(r)];
      schedule_args<std::uint32_t> a{b.send.data(), b.recv.data(), n, 0, r, 2, nullptr, &b.plan, &b.report};
      a.read_in_place_bytes = r == 0 ? 0 : ~std::uint64_t{0};
      st[r] = algo::direct::run<coll::send_recv>(prims[static_cast<std::size_t>(r)], a);
    });
  t[0].join();
  t[1].join();
  for (auto& e : net.errors) UNSCOPED_INFO(e);
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r);
    CHECK(st[r] == status::mismatch);
    CHECK(io[static_cast<std::size_t>(r)].report.read_in_place);
    CHECK(io[static_cast<std::size_t>(r)].report.peer == 1 - r);
    CHECK(io[static_cast<std::size_t>(r)].report.expected == (r == 0 ? 1u : 0u));  // its own decision
    CHECK(io[static_cast<std::size_t>(r)].report.got == (r == 0 ? 0u : 1u));       // the sender's flag
  }
  CHECK(prims[0].peer_bytes == 0);  // nothing was read
}

TEST_CASE("cost(): all_gather in place leaves the own block's copy out, as its schedules do", "[cost]") {
  const int P = GENERATE(2, 3, 4, 5, 8);
  []<class... As>(int p, type_list<As...>) {
    (
        [&] {
          if constexpr (As::implements(coll::all_gather))
            check_cost<As, coll::all_gather>(p, std::size_t(1) << 40, false, true, 0, 0, true);
        }(),
        ...);
  }(P, algorithms{});
  for (const bool loadable : {true, false})
    check_cost<algo::nvls, coll::all_gather>(P, std::size_t(1) << 40, true, loadable, 0, 0, true);
  // Single copy in place reads the peers' blocks and copies nothing of its own.
  constexpr double b = 1 << 20;
  static_assert(algo::nvls::cost(coll::all_gather, 4, b, {.single_copy = true}).local_bytes == b / 4);
  static_assert(
      algo::nvls::cost(coll::all_gather, 4, b, {.single_copy = true, .in_place = true}).local_bytes == 0);
}

TEST_CASE("cost(): nvls broadcast in place: the root has nothing to copy and takes a share of the reads",
          "[cost]") {
  const int P = GENERATE(2, 3, 4, 5, 8);
  check_cost<algo::nvls, coll::broadcast>(P, std::size_t(1) << 40, false, true, 0, 0, true);
  for (const bool loadable : {true, false}) {
    INFO((loadable ? "loads (thread ranks)" : "read_user/write_user (process ranks)"));
    check_cost<algo::nvls, coll::broadcast>(P, std::size_t(1) << 40, true, loadable, 0, 0, true);
  }
  constexpr double b = 1 << 20;
  // Out of place the receivers read the whole vector while the root copies its own.
  static_assert(algo::nvls::cost(coll::broadcast, 4, b, {.single_copy = true}).peer_bytes == b);
  static_assert(algo::nvls::cost(coll::broadcast, 4, b, {.single_copy = true}).local_bytes == b);
  // In place the root writes a quarter into each of the three others, which read the rest.
  constexpr auto in = algo::nvls::cost(coll::broadcast, 4, b, {.single_copy = true, .in_place = true});
  static_assert(in.peer_bytes == 0.75 * b && in.local_bytes == 0);
}

TEST_CASE("cost(): the tree and rhd across nodes match their schedules", "[cost]") {
  // (P, ranks per node); all_reduce takes the node shape, broadcast and
  // reduce ignore it.
  const auto [P, L] = GENERATE(table<int, int>(
      {{4, 2}, {6, 2}, {6, 3}, {8, 2}, {8, 4}, {9, 3}, {10, 5}, {12, 3}, {12, 4}, {16, 2}, {16, 4}}));
  check_cost<algo::tree, coll::all_reduce>(P, std::size_t(1) << 40, false, true, 0, L);
  check_cost<algo::tree, coll::broadcast>(P, std::size_t(1) << 40, false, true, 0, L);
  check_cost<algo::tree, coll::reduce>(P, std::size_t(1) << 40, false, true, 0, L);
  // rhd's all_reduce on bit-reversed coordinates (P a power of two): the same terms.
  check_cost<algo::rhd, coll::all_reduce>(P, std::size_t(1) << 40, false, true, 0, L);
  // node_bytes of the others that state it.
  check_algorithm<algo::ring>(P, L);
  check_algorithm<algo::direct_one_shot>(P, L);
  check_algorithm<algo::direct_two_shot>(P, L);
  check_algorithm<algo::direct>(P, L);
}

TEST_CASE("cost(): direct decides one-shot from the FIFO geometry as its schedule does", "[cost]") {
  const int P = GENERATE(2, 3, 4, 8);
  constexpr std::size_t count = 40320;  // check_cost's elements of 4 bytes
  // One chunk holds the vector: one-shot, in the schedule and in the model.
  check_cost<algo::direct, coll::all_reduce>(P, count);
  // One element short: two-shot in both (each half fits one chunk, so the
  // terms of unbounded chunks hold).
  check_cost<algo::direct, coll::all_reduce>(P, count - 1);
  constexpr double b = count * 4.0;
  static_assert(algo::direct::cost(coll::all_reduce, 4, b, {.chunk_bytes = b}).steps == 1);
  static_assert(algo::direct::cost(coll::all_reduce, 4, b, {.chunk_bytes = b - 4}).steps == 2);
  // The forced flavours ignore the geometry.
  static_assert(algo::direct_one_shot::cost(coll::all_reduce, 4, b, {.chunk_bytes = 1}).steps == 1);
}

TEST_CASE("cost(): nvls single copy, loading peers' buffers or reading them, matches its terms", "[cost]") {
  const int P = GENERATE(2, 3, 4, 5, 8);
  const bool loadable = GENERATE(true, false);
  INFO((loadable ? "loads (thread ranks)" : "read_user (process ranks)"));
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (
        [&] {
          constexpr coll C = static_cast<coll>(I);
          if constexpr (algo::nvls::implements(C))
            check_cost<algo::nvls, C>(P, std::size_t(1) << 40, true, loadable);
        }(),
        ...);
  }
  (std::make_index_sequence<coll_count>{});
}

// GPU windows run a single-copy all_reduce one-shot up to a size
// (gpu::communicator's one_shot_bytes): two barriers, the whole of every
// peer's send read and reduced. In place, or above the size, it is two-shot.
TEST_CASE("cost(): nvls one-shot all_reduce matches its terms, and two-shot in place or above the size",
          "[cost]") {
  const int P = GENERATE(2, 3, 4, 5, 8);
  const bool loadable = GENERATE(true, false);
  INFO((loadable ? "loads" : "read_user"));
  const std::uint64_t bytes = 40320 * sizeof(std::uint32_t);
  for (const std::uint64_t limit : {bytes, bytes - 1, ~std::uint64_t{0}})
    for (const bool in_place : {false, true}) {
      INFO("one-shot up to " << limit << " bytes, in place " << in_place);
      check_cost<algo::nvls, coll::all_reduce>(P, std::size_t(1) << 40, true, loadable, 0, 0, in_place, 40320,
                                               false, limit);
    }
  constexpr double b = 1 << 20;
  constexpr auto one = algo::nvls::cost(coll::all_reduce, 8, b, {.single_copy = true, .one_shot_bytes = b});
  static_assert(one.barriers == 2 && one.peer_bytes == 7 * b && one.bytes_reduced == 7 * b);
  constexpr auto two =
      algo::nvls::cost(coll::all_reduce, 8, b, {.single_copy = true, .one_shot_bytes = b / 2});
  static_assert(two.barriers == 3 && two.peer_bytes == 2 * b * 7 / 8);
}

TEST_CASE("cost(): staged nvls pays two barriers per segment of the registered buffer", "[cost]") {
  const int P = GENERATE(2, 3, 4, 5, 6, 7, 8, 9, 12, 16);
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (
        [&] {
          constexpr coll C = static_cast<coll>(I);
          if constexpr (algo::nvls::implements(C))
            check_cost<algo::nvls, C>(P, std::size_t(1) << 40, false, true, std::size_t(64) << 10);
        }(),
        ...);
  }
  (std::make_index_sequence<coll_count>{});
  static_assert(algo::nvls::cost(coll::all_reduce, 2, 4 << 20, {.peer_buffer_bytes = 1 << 20}).barriers == 8);
}

// Through a multicast address the switch channel's operations, and nvls's
// all_gather and broadcast stores, cross each rank's link once per direction
// (switch_bytes) instead of being peer loads and stores; single copy and
// all_to_all do not use it.
TEST_CASE("cost(): staged nvls through a multicast address matches its terms", "[cost]") {
  for (int P : {2, 3, 4, 8})
    for (std::size_t buffer : {std::size_t(0), std::size_t(64) << 10})
      [&]<coll... C>(std::integer_sequence<coll, C...>) {
        (
            [&] {
              if constexpr (algo::nvls::implements(C))
                check_cost<algo::nvls, C>(P, std::size_t(1) << 40, false, true, buffer, 0, false, 40320,
                                          true);
            }(),
            ...);
      }
  (std::integer_sequence<coll, coll::all_reduce, coll::reduce_scatter, coll::all_gather, coll::broadcast,
                         coll::all_to_all>{});
  // In place broadcast: the root has nothing of its own to copy.
  check_cost<algo::nvls, coll::broadcast>(4, std::size_t(1) << 40, false, true, 0, 0, true, 40320, true);
  // Single copy through the multicast address of the registered buffers.
  for (int P : {2, 3, 8}) [&]<coll... C>(std::integer_sequence<coll, C...>) {
      (
          [&] {
            if constexpr (algo::nvls::implements(C))
              check_cost<algo::nvls, C>(P, std::size_t(1) << 40, true, true, 0, 0, false, 40320, true);
          }(),
          ...);
    }
  (std::integer_sequence<coll, coll::all_reduce, coll::reduce_scatter, coll::all_gather, coll::broadcast,
                         coll::all_to_all>{});
  check_cost<algo::nvls, coll::broadcast>(4, std::size_t(1) << 40, true, true, 0, 0, true, 40320, true);
  check_cost<algo::nvls, coll::all_gather>(4, std::size_t(1) << 40, true, true, 0, 0, true, 40320, true);
  constexpr auto bound =
      algo::nvls::cost(coll::all_reduce, 8, 1 << 20, {.single_copy = true, .multicast = true});
  static_assert(bound.barriers == 2 && bound.switch_bytes == 1.125 * (1 << 20) && bound.staged_bytes == 0 &&
                bound.peer_bytes == 0 && bound.local_bytes == 0 && bound.bytes_reduced == 0);
  constexpr double b = 1 << 20;
  constexpr auto mc = algo::nvls::cost(coll::all_reduce, 8, b, {.multicast = true});
  static_assert(mc.switch_bytes == 1.125 * b && mc.peer_bytes == 0 && mc.bytes_reduced == 0 &&
                mc.staged_bytes == 2 * b && mc.barriers == 2);
  static_assert(algo::nvls::cost(coll::all_gather, 8, b, {.multicast = true}).switch_bytes == b);
  // all_gather's multicast segments hold a P-th of the buffer per block: B / buffer of them.
  static_assert(
      algo::nvls::cost(coll::all_gather, 4, 4 * b, {.peer_buffer_bytes = b, .multicast = true}).barriers ==
      8);
}

TEST_CASE("cost(): nvls is priced by barriers, peer and staged bytes, none with connections", "[cost]") {
  constexpr double b = 1 << 20;
  constexpr auto staged = algo::nvls::cost(coll::all_reduce, 4, b);
  static_assert(staged.steps == 0 && staged.bytes_sent == 0);
  static_assert(staged.barriers == 2 && staged.staged_bytes == 2 * b && staged.peer_bytes == 2 * 0.75 * b);
  // Single copy: one more barrier (publishing the user buffers), no staging.
  constexpr auto single = algo::nvls::cost(coll::all_reduce, 4, b, {.single_copy = true});
  static_assert(single.barriers == 3 && single.staged_bytes == 0 && single.peer_bytes == staged.peer_bytes);
  // The others read once and end: the publishing barrier and the final one.
  static_assert(algo::nvls::cost(coll::all_gather, 4, b, {.single_copy = true}).barriers == 2);
  SUCCEED();
}

TEST_CASE("tree: twin trees carry all the data in one tree", "[cost][tree]") {
  // twin_trees says exactly when the two trees have the same links at every rank.
  for (int P = 2; P <= 64; ++P)
    for (coll c : {coll::all_reduce, coll::broadcast, coll::reduce})
      for (int root = 0; root < (c == coll::all_reduce ? 1 : P); ++root) {
        bool same = true;
        for (int r = 0; r < P; ++r) {
          const auto a = algo::tree::node(c, P, r, root, 0), b = algo::tree::node(c, P, r, root, 1);
          same = same && a.parent == b.parent && a.nkids == b.nkids;
          for (int k = 0; k < a.nkids && same; ++k) same = a.kids[k] == b.kids[k];
        }
        INFO(name(c) << " P=" << P << " root=" << root);
        CHECK(algo::tree::twin_trees(c, P) == same);
      }
  // On 2 ranks a rooted call is one message per chunk, not one per tree:
  // halves on the one connection would each pay a step.
  CHECK(check_cost<algo::tree, coll::broadcast>(2) == 1);
  CHECK(check_cost<algo::tree, coll::reduce>(2) == 1);
  CHECK(check_cost<algo::tree, coll::broadcast>(2, 1000) == 41);  // 40320 elements in chunks of 1000
  CHECK(check_cost<algo::tree, coll::broadcast>(3) == 2);         // two trees: a half each way
}

TEST_CASE("tree across nodes: two spanning trees, M − 1 links between nodes each, chains inside",
          "[cost][tree]") {
  const auto [P, L] = GENERATE(table<int, int>({{4, 2}, {6, 2}, {6, 3}, {9, 3}, {12, 4}, {16, 2}, {40, 8}}));
  INFO("P=" << P << " L=" << L);
  const int M = P / L;
  REQUIRE(algo::tree::across_nodes(coll::all_reduce, P, L));
  CHECK_FALSE(algo::tree::across_nodes(coll::broadcast, P, L));
  CHECK_FALSE(algo::tree::across_nodes(coll::all_reduce, P, P));  // one node: the flat shape
  CHECK_FALSE(algo::tree::across_nodes(coll::all_reduce, P + 1, L));
  std::vector<int> inner(static_cast<std::size_t>(P), 0);  // in how many trees a rank has kids
  for (int w = 0; w < 2; ++w) {
    int roots = 0, edges = 0, across = 0;
    std::vector<int> parent_seen(static_cast<std::size_t>(P), 0);
    for (int r = 0; r < P; ++r) {
      const auto t = algo::tree::node(coll::all_reduce, P, r, 0, w, L);
      roots += t.parent < 0;
      if (t.nkids > 0) ++inner[static_cast<std::size_t>(r)];
      // The head of a node: local rank 0 in tree 0, L − 1 in tree 1; only heads link across nodes.
      const bool head = r % L == (w == 0 ? 0 : L - 1);
      if (t.parent >= 0) {
        const auto up = algo::tree::node(coll::all_reduce, P, t.parent, 0, w, L);
        int found = 0;
        for (int k = 0; k < up.nkids; ++k) found += up.kids[k] == r;
        CHECK(found == 1);
        if (t.parent / L != r / L) {
          ++across;
          CHECK(head);
          CHECK(t.parent % L == r % L);  // head to head
        } else {
          CHECK(std::abs(t.parent - r) == 1);  // a chain
        }
      }
      CHECK(t.nkids <= (head ? 3 : 1));
      for (int k = 0; k < t.nkids; ++k) {
        ++edges;
        ++parent_seen[static_cast<std::size_t>(t.kids[k])];
      }
    }
    CHECK(roots == 1);
    CHECK(edges == P - 1);  // a spanning tree: every rank but the root has one parent
    CHECK(across == M - 1);
    for (int r = 0; r < P; ++r)
      CHECK(parent_seen[static_cast<std::size_t>(r)] ==
            (algo::tree::node(coll::all_reduce, P, r, 0, w, L).parent >= 0));
  }
  // With chains of 2, every rank passes data on in exactly one tree (the double tree's balance).
  if (L == 2)
    for (int r = 0; r < P; ++r) CHECK(inner[static_cast<std::size_t>(r)] == 1);
}
