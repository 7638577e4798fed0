// Device semantics on CPUs: every algorithm × protocol × collective runs with
// each rank a team of W worker threads (exec::host_team: leader-only
// polling, team barriers, per-worker slices, injected jitter), as a rank is a
// thread block on a GPU. Values are checked against an independent reference,
// guard elements around every buffer must stay untouched, and inputs of
// out-of-place calls unchanged. Calls run back to back on the same
// connections (no host barrier between them), as an application issues them,
// so step counters carry over from call to call. With stripes (NCCL's
// channels, collx/stripes.hpp), each rank runs S teams, one per stripe, each
// on its slice and its own FIFOs, as S blocks of a GPU rank would.
#include <collx/exec/host_team.hpp>
#include <collx/prims.hpp>
#include <collx/proto/runtime.hpp>
#include <collx/reduce_op.hpp>
#include <collx/stripes.hpp>
#include <collx/transport/mesh.hpp>
#include <collx/transport/shm.hpp>
#include <collx/transport/shm_segment.hpp>
#include <collx/transport/window_registry.hpp>
#include <collx/variants.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

using namespace collx;

namespace {

constexpr std::size_t guard = 16;  // elements on each side of every buffer
constexpr float float_guard = -12345.5f;
constexpr std::int32_t int_guard = -77777;

bool quick() {
  const char* s = std::getenv("COLLX_TEST_SCALE");
  return s != nullptr && std::string(s) == "quick";
}

struct case_desc {
  coll kind;
  bool is_float;  // float sum, else int32 max
  std::size_t count;
  int root;
  bool in_place;
};

std::string describe(const case_desc& c) {
  std::ostringstream o;
  o << name(c.kind) << (c.is_float ? " float sum" : " int32 max") << " count " << c.count << " root "
    << c.root << (c.in_place ? " in place" : " out of place");
  return o.str();
}

// Input element i of rank r: small integers, so float sums are exact.
template <class T>
T input(int r, std::size_t i) {
  return static_cast<T>(static_cast<int>((static_cast<std::size_t>(r) * 31 + i * 7) % 19) - 9);
}

template <class T>
T combine(T a, T b, bool is_float) {
  return is_float ? a + b : std::max(a, b);
}

// Elements of the send and recv buffers (P ranks, count n).
std::size_t send_elems(coll c, std::size_t n, int P) {
  switch (c) {
    case coll::reduce_scatter:
    case coll::all_to_all: return n * static_cast<std::size_t>(P);
    case coll::barrier: return 0;
    default: return n;
  }
}
std::size_t recv_elems(coll c, std::size_t n, int P) {
  switch (c) {
    case coll::all_gather:
    case coll::all_to_all: return n * static_cast<std::size_t>(P);
    case coll::barrier: return 0;
    default: return n;
  }
}

/// One rank's buffers of one case: a guarded array, with send/recv pointing into it.
template <class T>
struct rank_buffers {
  std::vector<T> send, recv;  // guard + data + guard
  std::vector<T> send_before;
  T* send_ptr = nullptr;
  T* recv_ptr = nullptr;
};

template <class T>
T guard_value() {
  if constexpr (std::is_same_v<T, float>) return float_guard;
  else return int_guard;
}

template <class T>
rank_buffers<T> make_buffers(const case_desc& c, int r, int P) {
  rank_buffers<T> b;
  const std::size_t n = c.count, ns = send_elems(c.kind, n, P), nr = recv_elems(c.kind, n, P);
  b.recv.assign(nr + 2 * guard, guard_value<T>());
  b.recv_ptr = b.recv.data() + guard;
  if (c.in_place) {
    // NCCL's in-place conventions.
    if (c.kind == coll::all_gather) b.send_ptr = b.recv_ptr + static_cast<std::size_t>(r) * n;
    else if (c.kind == coll::reduce_scatter) {
      b.recv.assign(ns + 2 * guard, guard_value<T>());
      b.send_ptr = b.recv.data() + guard;
      b.recv_ptr = b.send_ptr + static_cast<std::size_t>(r) * n;
    } else b.send_ptr = b.recv_ptr;
    const std::size_t in = c.kind == coll::reduce_scatter ? ns : n;
    for (std::size_t i = 0; i < in; ++i) b.send_ptr[i] = input<T>(r, i);
  } else {
    b.send.assign(ns + 2 * guard, guard_value<T>());
    b.send_ptr = b.send.data() + guard;
    for (std::size_t i = 0; i < ns; ++i) b.send_ptr[i] = input<T>(r, i);
    b.send_before = b.send;
  }
  return b;
}

/// Checks rank q's result; appends failures to `errors`.
template <class T>
void check(const case_desc& c, int q, int P, const rank_buffers<T>& b, std::vector<std::string>& errors) {
  const std::size_t n = c.count;
  auto fail = [&](const std::string& what) {
    if (errors.size() < 20)
      errors.push_back(describe(c) + ", P " + std::to_string(P) + ", rank " + std::to_string(q) + ": " +
                       what);
  };
  auto reduced = [&](std::size_t i) {
    T v = input<T>(0, i);
    for (int r = 1; r < P; ++r) v = combine(v, input<T>(r, i), c.is_float);
    return v;
  };
  // Expected value of recv element i, or false where the element must keep its prior contents.
  auto expect = [&](std::size_t i, T& v) {
    switch (c.kind) {
      case coll::all_reduce: v = reduced(i); return true;
      case coll::all_gather: v = input<T>(static_cast<int>(i / n), i % n); return true;
      case coll::reduce_scatter: v = reduced(static_cast<std::size_t>(q) * n + i); return true;
      case coll::broadcast: v = input<T>(c.root, i); return true;
      case coll::reduce:
        if (q == c.root) v = reduced(i);
        else if (c.in_place) v = input<T>(q, i);
        else v = guard_value<T>();
        return true;
      case coll::all_to_all:
        v = input<T>(static_cast<int>(i / n), static_cast<std::size_t>(q) * n + i % n);
        return true;
      default: return false;
    }
  };
  const std::size_t nr = recv_elems(c.kind, n, P);
  std::size_t wrong = 0, first = 0;
  for (std::size_t i = 0; i < nr; ++i) {
    T v{};
    if (expect(i, v) && !(b.recv_ptr[i] == v) && wrong++ == 0) first = i;
  }
  if (wrong) {
    T v{};
    expect(first, v);
    std::ostringstream o;
    o << wrong << " of " << nr << " elements wrong, first at " << first << ": " << b.recv_ptr[first]
      << " instead of " << v;
    fail(o.str());
  }
  // Guards: everything of the allocation outside the output range.
  const T* lo = b.recv_ptr;
  const T* hi = b.recv_ptr + nr;
  const T* base = b.recv.data();
  for (std::size_t i = 0; i < b.recv.size(); ++i) {
    const T* p = base + i;
    if (p >= lo && p < hi) continue;
    const bool input_region = c.in_place && c.kind == coll::reduce_scatter;
    if (input_region && i >= guard && i < b.recv.size() - guard) continue;  // the in-place input around recv
    if (!(b.recv[i] == guard_value<T>())) {
      fail("element " + std::to_string(i) + " of the recv allocation outside the output was written");
      break;
    }
  }
  if (!c.in_place && b.send != b.send_before) fail("the send buffer of an out-of-place call changed");
}

/// The channel Pr runs on: its own, or -1 for proto::runtime (the caller names one).
template <class Pr>
constexpr int own_channel() {
  if constexpr (requires { Pr::id; }) return proto::channel_of<Pr>;
  else return -1;
}

/// What every worker runs: stripe `stripe` of `nstripes` of the schedule of
/// <A, Pr> for case c, on `channel`.
template <class A, class Pr, class Exec, class View, class T, class Red>
status run_one(int channel, int stripe, int nstripes, const Exec& ex, const View& view, int rank,
               const case_desc& c, T* send, T* recv, const Red& red, const peer_layout* layout = nullptr,
               const p2p_plan* plan = nullptr, mismatch_report* report = nullptr) {
  schedule_args<T> a{send, recv, c.count, c.root, rank, view.nranks(), layout, plan, report};
  // direct's streams read long messages in place where the view allows (the
  // single-copy runs: from the first byte over a header's).
  if constexpr (requires { view.user_buffer_min_bytes(); })
    a.read_in_place_bytes = view.user_buffer_min_bytes();
  status st = status::invalid_argument;
  auto go = [&]<coll C>() {
    if constexpr (A::implements(C)) st = run_stripe<A, Pr, C>(ex, view, red, channel, a, stripe, nstripes);
  };
  switch (c.kind) {
    case coll::all_reduce: go.template operator()<coll::all_reduce>(); break;
    case coll::all_gather: go.template operator()<coll::all_gather>(); break;
    case coll::reduce_scatter: go.template operator()<coll::reduce_scatter>(); break;
    case coll::broadcast: go.template operator()<coll::broadcast>(); break;
    case coll::reduce: go.template operator()<coll::reduce>(); break;
    case coll::all_to_all: go.template operator()<coll::all_to_all>(); break;
    case coll::barrier: go.template operator()<coll::barrier>(); break;
    case coll::all_to_allv: go.template operator()<coll::all_to_allv>(); break;
    case coll::send_recv: go.template operator()<coll::send_recv>(); break;
  }
  return st;
}

template <class A>
std::vector<case_desc> cases_for(int P, int S, std::size_t big = 0) {
  // 1031 elements take several steps of the 2 KiB slots below; 6151 fill the
  // FIFO several times over (only where few threads share the CPUs). With
  // stripes: 200 elements leave all but the first stripe empty; 1031 and
  // 6151 give every stripe a slice, the last one shorter.
  std::vector<std::size_t> counts{0, 1, std::size_t(P) + 1, 1031};
  if (S > 1) counts = {0, 200, 1031};
  if (!quick() && P <= 3) counts.push_back(6151);
  if (big > 0) counts = {big};
  std::vector<case_desc> out;
  for (coll k : {coll::all_reduce, coll::all_gather, coll::reduce_scatter, coll::broadcast, coll::reduce,
                 coll::all_to_all, coll::barrier}) {
    if (!A::implements(k)) continue;
    if (k == coll::barrier) {
      out.push_back({k, true, 0, 0, false});
      continue;
    }
    for (std::size_t n : counts)
      for (bool fl : {true, false})
        for (bool ip : {false, true}) {
          if (ip && k == coll::all_to_all) continue;  // out of place only
          if (!fl && !is_reduction(k) && ip) continue;
          const int root =
              (k == coll::broadcast || k == coll::reduce) ? static_cast<int>(n % std::size_t(P)) : 0;
          out.push_back({k, fl, n, root, ip});
        }
  }
  for (coll k : {coll::all_to_allv, coll::send_recv})
    if (A::implements(k))
      for (std::size_t n : counts) out.push_back({k, true, n, 0, false});
  return out;
}

/// all_to_allv and send_recv on one rank: per-peer blocks with a gap of one
/// guard element between them, and the layout or plan that describes them.
/// Rank i sends rank j count·((i + j) % 3) elements; in a send_recv group rank
/// i sends count elements to its right neighbour, then count / 2 + 1 to its
/// left one (two messages in issue order when both are the same rank).
struct blocks {
  std::vector<float> send, recv;  // recv: guards and gaps hold float_guard
  std::vector<std::size_t> sc, sd, rc, rd;
  peer_layout layout{};
  std::vector<p2p_message> sends, recvs;
  std::vector<std::uint32_t> send_begin, recv_begin;
  p2p_plan plan{};
  mismatch_report report{};
  std::vector<std::pair<std::size_t, float>> expected;  // recv index → value
};

float block_value(int from, int to, std::size_t i) { return input<float>(from * 7 + to, i); }

void make_blocks(const case_desc& c, int r, int P, blocks& b) {
  const std::size_t n = c.count, Pz = static_cast<std::size_t>(P);
  if (c.kind == coll::all_to_allv) {
    b.sc.resize(Pz), b.sd.resize(Pz), b.rc.resize(Pz), b.rd.resize(Pz);
    std::size_t so = 0, ro = guard;
    for (int j = 0; j < P; ++j) {
      const auto J = static_cast<std::size_t>(j);
      b.sc[J] = n * static_cast<std::size_t>((r + j) % 3), b.sd[J] = so, so += b.sc[J];
      b.rc[J] = n * static_cast<std::size_t>((j + r) % 3), b.rd[J] = ro - guard, ro += b.rc[J] + 1;
    }
    b.send.resize(so);
    for (int j = 0; j < P; ++j)
      for (std::size_t i = 0; i < b.sc[static_cast<std::size_t>(j)]; ++i)
        b.send[b.sd[static_cast<std::size_t>(j)] + i] = block_value(r, j, i);
    b.recv.assign(ro + guard, float_guard);
    for (int j = 0; j < P; ++j)
      for (std::size_t i = 0; i < b.rc[static_cast<std::size_t>(j)]; ++i)
        b.expected.push_back({guard + b.rd[static_cast<std::size_t>(j)] + i, block_value(j, r, i)});
    b.layout = peer_layout{b.sc.data(), b.sd.data(), b.rc.data(), b.rd.data()};
    return;
  }
  // send_recv: messages in issue order, bucketed by peer.
  const int right = (r + 1) % P, left = (r + P - 1) % P;
  const std::size_t m = n / 2 + 1;
  struct msg {
    int peer;
    std::size_t len;
    int tag;  // 0: to the right, 1: to the left
  };
  const msg out[2] = {{right, n, 0}, {left, m, 1}};
  const msg in[2] = {{left, n, 0}, {right, m, 1}};  // what the neighbours send this rank
  std::size_t so = 0, ro = guard;
  std::vector<std::size_t> soff, roff;
  for (const msg& x : out) soff.push_back(so), so += x.len;
  for (const msg& x : in) roff.push_back(ro), ro += x.len + 1;
  b.send.resize(so);
  for (int k = 0; k < 2; ++k)
    for (std::size_t i = 0; i < out[k].len; ++i)
      b.send[soff[std::size_t(k)] + i] = block_value(r, 10 + out[k].tag, i);
  b.recv.assign(ro + guard, float_guard);
  for (int k = 0; k < 2; ++k)
    for (std::size_t i = 0; i < in[k].len; ++i)
      b.expected.push_back({roff[std::size_t(k)] + i, block_value(in[k].peer, 10 + in[k].tag, i)});
  b.send_begin.assign(Pz + 1, 0), b.recv_begin.assign(Pz + 1, 0);
  for (int side = 0; side < 2; ++side) {
    const msg* list = side == 0 ? out : in;
    auto& begin = side == 0 ? b.send_begin : b.recv_begin;
    auto& msgs = side == 0 ? b.sends : b.recvs;
    for (int k = 0; k < 2; ++k) ++begin[static_cast<std::size_t>(list[k].peer) + 1];
    for (std::size_t q = 0; q < Pz; ++q) begin[q + 1] += begin[q];
    msgs.resize(2);
    std::vector<std::uint32_t> fill(begin.begin(), begin.end() - 1);
    for (int k = 0; k < 2; ++k) {  // issue order within a peer
      float* base = side == 0 ? b.send.data() + soff[std::size_t(k)] : b.recv.data() + roff[std::size_t(k)];
      msgs[fill[static_cast<std::size_t>(list[k].peer)]++] = p2p_message{base, list[k].len};
    }
  }
  b.plan = p2p_plan{b.sends.data(), b.send_begin.data(), b.recvs.data(), b.recv_begin.data()};
}

void check_blocks(const case_desc& c, int q, int P, const blocks& b, const std::vector<float>& send_before,
                  std::vector<std::string>& errors) {
  auto fail = [&](const std::string& what) {
    if (errors.size() < 20)
      errors.push_back(describe(c) + ", P " + std::to_string(P) + ", rank " + std::to_string(q) + ": " +
                       what);
  };
  std::vector<char> is_out(b.recv.size(), 0);
  std::size_t wrong = 0;
  for (const auto& [i, v] : b.expected) {
    is_out[i] = 1;
    if (b.recv[i] != v && wrong++ == 0)
      fail("element " + std::to_string(i) + " is " + std::to_string(b.recv[i]) + " instead of " +
           std::to_string(v));
  }
  if (wrong > 1) fail(std::to_string(wrong) + " elements wrong");
  for (std::size_t i = 0; i < b.recv.size(); ++i)
    if (!is_out[i] && b.recv[i] != float_guard) {
      fail("element " + std::to_string(i) + " outside every receive block (a guard or gap) was written");
      break;
    }
  if (b.send != send_before) fail("a send buffer changed");
}

struct run_result {
  std::vector<std::string> errors;
  std::size_t cases = 0;
};

/// The memory of P ranks over transport Tr. Small FIFOs: many steps per
/// call, and a full FIFO often.
template <class Tr>
struct test_memory;

/// One shared segment (thread ranks of the host communicator).
template <>
struct test_memory<transport::shm> {
  std::shared_ptr<transport::shm_segment> seg;
  transport::shm_view view;
  test_memory(int P, int S, bool single_copy, bool multicast = false)
      : seg(transport::shm_segment::create_anonymous(
            transport::shm_layout::make(static_cast<std::uint32_t>(P), 4, {2048, 2048, 2048}, S))),
        view(seg->view()) {
    REQUIRE(!multicast);  // the shm transport's switch channel is its peers' memory
    view.header()->single_copy_min = single_copy ? 0 : ~std::uint64_t{0};
    view.header()->single_copy_denied = single_copy ? 0 : 1;
  }
  std::uint32_t* abort_word() const { return view.abort_word(); }
  detail::doorbell* bells() const { return view.doorbell(0); }
};

/// One region per rank, each its own allocation, as GPUs' memories are: a
/// schedule or protocol that assumed one contiguous segment (an address
/// computed from another rank's) would read or write the wrong rank's memory.
template <>
struct test_memory<transport::mesh> {
  struct region_free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::vector<std::unique_ptr<std::byte, region_free>> regions;
  std::unique_ptr<std::uint32_t> abort = std::make_unique<std::uint32_t>(0);
  transport::mesh_view view;
  /// Single copy: each case's buffers registered as windows (register_case).
  bool single_copy = false;
  transport::window_registry windows;
  /// multicast: the view gets a multicast address over the registered
  /// buffers, which host code emulates (transport::multicast_switch_channel),
  /// and the buffers are aligned as a multicast object binds them (2 MiB).
  /// multicast with single copy: every window gets a multicast address too,
  /// emulated the same way, so nvls runs through the switch channel over the
  /// registered buffers themselves (algo::nvls::through_switch).
  bool window_multicast = false;
  test_memory(int P, int S, bool single, bool multicast = false)
      : single_copy(single), windows(P), window_multicast(single && multicast) {
    view.layout = transport::mesh_layout::make(
        transport::shm_layout::make(static_cast<std::uint32_t>(P), 4, {2048, 2048, 2048}, S),
        multicast ? std::size_t{2} << 20 : transport::shm_page);
    if (multicast) view.multicast = reinterpret_cast<std::byte*>(std::uintptr_t{1} << 44);
    view.abort = abort.get();
    const std::size_t bytes = view.layout.region_bytes();
    for (int r = 0; r < P; ++r) {
      regions.emplace_back(static_cast<std::byte*>(std::aligned_alloc(transport::shm_page, bytes)));
      REQUIRE(regions.back() != nullptr);
      std::memset(regions.back().get(), 0, bytes);
      view.regions[r] = regions.back().get();
    }
  }
  std::uint32_t* abort_word() const { return view.abort; }
  detail::doorbell* bells() const { return nullptr; }  // waits spin and yield

  /// Registers every rank's vector `side(r)` of one case as a window, as
  /// gpu::communicator::register_buffer does collectively.
  template <class Side>
  void register_window(int P, Side side) {
    std::vector<transport::window_span> spans;
    for (int r = 0; r < P; ++r) {
      const auto& v = side(r);
      spans.push_back({reinterpret_cast<std::uintptr_t>(v.data()), v.size() * sizeof(v[0])});
    }
    const int w = windows.add(spans);
    // A multicast address per window, far from any mapping, with the
    // buffers' offset from a 16-byte boundary (a multicast object binds
    // buffers at the same alignment on every rank).
    if (window_multicast)
      windows.set_multicast(w, (std::uintptr_t{1} << 45) + (std::uintptr_t(w) << 32) + spans[0].base % 16);
  }
  /// The view of rank r's call: its buffers' windows where registered.
  transport::mesh_view for_call(int r, const void* send, std::size_t send_bytes, const void* recv,
                                std::size_t recv_bytes) const {
    transport::mesh_view v = view;
    if (single_copy) {
      v.windows = windows.for_call(r, send, send_bytes, recv, recv_bytes, 0, windows.data());
      // all_reduce up to 512 floats one-shot (counts 1 and P + 1), larger
      // ones (1031, 6151) two-shot; in place always two-shot.
      v.windows.one_shot_bytes = 2048;
    }
    return v;
  }
};

/// The view each call runs with (the mesh's names the call's windows).
template <class Tr, class T>
typename Tr::view view_for_call(const test_memory<Tr>& mem, const case_desc& c, int r, int P, const T* send,
                                const T* recv) {
  if constexpr (std::is_same_v<Tr, transport::mesh>)
    return mem.for_call(r, send, send_elems(c.kind, c.count, P) * sizeof(T), recv,
                        recv_elems(c.kind, c.count, P) * sizeof(T));
  else return (void)c, (void)r, (void)P, (void)send, (void)recv, mem.view;
}

/// A run's verdict: no case failed (each failure listed), and cases ran.
void check_clean(const run_result& r) {
  std::string all;
  for (const auto& e : r.errors) all += "\n  " + e;
  INFO("failures:" << all);
  CHECK(r.errors.empty());
  CHECK(r.cases > 0);
}

/// Runs every case of <A, Pr> on P ranks of S stripes of W workers, back to back.
template <class A, class Pr, class Tr = transport::shm>
run_result run_matrix(int W, int P, std::uint64_t seed, bool single_copy, int channel = own_channel<Pr>(),
                      int S = 1, bool multicast = false, std::size_t big = 0) {
  const auto cases = cases_for<A>(P, S, big);
  run_result res;
  res.cases = cases.size();
  test_memory<Tr> mem(P, S, single_copy, multicast);
  const auto& view = mem.view;

  std::vector<rank_buffers<float>> fb;
  std::vector<rank_buffers<std::int32_t>> ib;
  std::vector<std::vector<blocks>> bbufs(cases.size());
  std::vector<std::vector<std::vector<float>>> bsend_before(cases.size());
  std::vector<std::vector<rank_buffers<float>>> fbufs(cases.size());
  std::vector<std::vector<rank_buffers<std::int32_t>>> ibufs(cases.size());
  for (std::size_t k = 0; k < cases.size(); ++k)
    for (int r = 0; r < P; ++r) {
      if (cases[k].kind == coll::all_to_allv || cases[k].kind == coll::send_recv) {
        if (bbufs[k].empty()) bbufs[k] = std::vector<blocks>(static_cast<std::size_t>(P));
        make_blocks(cases[k], r, P, bbufs[k][static_cast<std::size_t>(r)]);
        bsend_before[k].push_back(bbufs[k][static_cast<std::size_t>(r)].send);
      } else if (cases[k].is_float) fbufs[k].push_back(make_buffers<float>(cases[k], r, P));
      else ibufs[k].push_back(make_buffers<std::int32_t>(cases[k], r, P));
    }

  if constexpr (std::is_same_v<Tr, transport::mesh>)
    if (single_copy)
      for (std::size_t k = 0; k < cases.size(); ++k) {
        auto both = [&](auto& bufs) {
          if (bufs.empty()) return;
          if (!cases[k].in_place)
            mem.register_window(
                P, [&](int r) -> auto& { return bufs[static_cast<std::size_t>(r)].send; });
          mem.register_window(
              P, [&](int r) -> auto& { return bufs[static_cast<std::size_t>(r)].recv; });
        };
        both(fbufs[k]);
        both(ibufs[k]);
      }

  std::vector<std::unique_ptr<exec::team_state>> teams;  // rank r, stripe s: teams[r * S + s]
  for (int r = 0; r < P; ++r)
    for (int s = 0; s < S; ++s)
      teams.push_back(
          std::make_unique<exec::team_state>(W, seed + 1000 * r + 77 * s, 2000, 20'000'000'000ull));
  std::vector<std::vector<status>> statuses(static_cast<std::size_t>(P * S),
                                            std::vector<status>(cases.size()));
  std::vector<std::thread> threads;
  for (int r = 0; r < P; ++r)
    for (int s = 0; s < S; ++s)
      for (int lane = 0; lane < W; ++lane)
        threads.emplace_back([&, r, s, lane] {
          const std::size_t team = static_cast<std::size_t>(r * S + s);
          exec::host_team ex;
          ex.base.abort_word = mem.abort_word();
          ex.base.deadline_ns = 0;
          ex.base.timeout_ns = 60'000'000'000ull;
          ex.base.spin_ns = 2'000;
          ex.base.bells = mem.bells();
          ex.base.self = r;
          ex.team = teams[team].get();
          ex.lane = lane;
          for (std::size_t k = 0; k < cases.size(); ++k) {
            const case_desc& c = cases[k];
            status st;
            if (c.kind == coll::all_to_allv || c.kind == coll::send_recv) {
              auto& b = bbufs[k][static_cast<std::size_t>(r)];
              st = run_one<A, Pr>(channel, s, S, ex, view, r, c, b.send.data(), b.recv.data() + guard,
                                  reducer<float, reduce_op::sum>{static_cast<std::uint32_t>(P)}, &b.layout,
                                  &b.plan, &b.report);
            } else if (c.is_float) {
              auto& b = fbufs[k][static_cast<std::size_t>(r)];
              st = run_one<A, Pr>(channel, s, S, ex, view_for_call(mem, c, r, P, b.send_ptr, b.recv_ptr), r,
                                  c, b.send_ptr, b.recv_ptr,
                                  reducer<float, reduce_op::sum>{static_cast<std::uint32_t>(P)});
            } else {
              auto& b = ibufs[k][static_cast<std::size_t>(r)];
              st = run_one<A, Pr>(channel, s, S, ex, view_for_call(mem, c, r, P, b.send_ptr, b.recv_ptr), r,
                                  c, b.send_ptr, b.recv_ptr,
                                  reducer<std::int32_t, reduce_op::max>{static_cast<std::uint32_t>(P)});
            }
            if (lane == 0) statuses[team][k] = st;
            if (st != status::ok) {
              detail::store_relaxed(mem.abort_word(), std::uint32_t{1});  // the peers stop waiting
              return;
            }
          }
        });
  for (auto& t : threads) t.join();

  for (std::size_t k = 0; k < cases.size(); ++k)
    for (int r = 0; r < P; ++r) {
      status st = status::ok;
      int bad = 0;
      for (int s = 0; s < S && st == status::ok; ++s)
        st = statuses[static_cast<std::size_t>(r * S + s)][k], bad = s;
      if (st != status::ok) {
        if (res.errors.size() < 20)
          res.errors.push_back(describe(cases[k]) + ", P " + std::to_string(P) + ", rank " +
                               std::to_string(r) + ", stripe " + std::to_string(bad) + ": status " +
                               to_string(st));
        continue;
      }
      if (cases[k].kind == coll::all_to_allv || cases[k].kind == coll::send_recv)
        check_blocks(cases[k], r, P, bbufs[k][static_cast<std::size_t>(r)],
                     bsend_before[k][static_cast<std::size_t>(r)], res.errors);
      else if (cases[k].is_float) check(cases[k], r, P, fbufs[k][static_cast<std::size_t>(r)], res.errors);
      else check(cases[k], r, P, ibufs[k][static_cast<std::size_t>(r)], res.errors);
    }
  return res;
}

std::uint64_t seed_from_env() {
  const char* s = std::getenv("COLLX_TEAM_SEED");
  return s != nullptr ? std::strtoull(s, nullptr, 10) : 0x5eedull;
}

/// COLLX_TEAM_VARIANTS="ring/ll,tree/simple" runs only those (for a closer look).
bool selected(const std::string& variant) {
  const char* s = std::getenv("COLLX_TEAM_VARIANTS");
  if (s == nullptr || *s == '\0') return true;
  const std::string list = std::string(",") + s + ",";
  return list.find("," + variant + ",") != std::string::npos;
}

template <class Tr = transport::shm>
void run_all(int W, int P, bool single_copy, int S = 1) {
  const std::uint64_t seed = seed_from_env();
  std::size_t variants = 0, cases = 0;
  [&]<class... As>(type_list<As...>) {
    (
        [&]<class A>() {
          [&]<class... Ps>(type_list<Ps...>) {
            (
                [&]<class Pr>() {
                  if constexpr (composable<A, Pr, Tr>) {
                    if (!selected(std::string(A::name) + "/" + Pr::name)) return;
                    INFO("variant " << A::name << "/" << Pr::name << " over " << Tr::name << ", W " << W
                                    << ", P " << P << ", S " << S << ", seed " << seed
                                    << (single_copy ? ", single copy" : ""));
                    const run_result r = run_matrix<A, Pr, Tr>(W, P, seed, single_copy, own_channel<Pr>(), S);
                    std::string all;
                    for (const auto& e : r.errors) all += "\n  " + e;
                    INFO("failures:" << all);
                    CHECK(r.errors.empty());
                    ++variants;
                    cases += r.cases;
                  }
                }.template operator()<Ps>(),
                ...);
          }(protocols{});
        }.template operator()<As>(),
        ...);
  }(algorithms{});
  // Every compiled variant ran, and each ran cases.
  if (std::getenv("COLLX_TEAM_VARIANTS") == nullptr) CHECK(variants >= 8);
  CHECK(cases >= variants);
}

}  // namespace

// Rank counts: a power of two and not, an odd one; more ranks with fewer
// workers, since every worker is a thread on this machine's few CPUs.
TEST_CASE("team executor: every algorithm × protocol × collective, 2 workers per rank", "[team]") {
  const int P = GENERATE(2, 3, 5);
  run_all(2, P, false);
}

TEST_CASE("team executor: every algorithm × protocol × collective, 3 workers per rank", "[team]") {
  const int P = GENERATE(2, 4);
  run_all(3, P, false);
}

TEST_CASE("team executor: every algorithm × protocol × collective, 8 workers per rank", "[team]") {
  // Two ranks: 16 threads on this machine's few CPUs already; odd rank
  // counts run with 2 workers, and LL128's 8-lane tiles form only here.
  run_all(8, 2, false);
}

TEST_CASE("team executor: single copy paths, 3 workers per rank", "[team]") {
  const int P = GENERATE(2, 3);
  run_all(3, P, true);
}

TEST_CASE("team executor: one rank, 8 workers", "[team]") { run_all(8, 1, false); }

// The communicator's dispatch runs a schedule over proto::runtime, the
// protocol chosen per call (proto/runtime.hpp): the same matrix through it,
// each protocol chosen in turn, with 8 workers (LL128's 8-lane tiles) and 3.
TEST_CASE("team executor: the ring over proto::runtime, each protocol chosen at run time", "[team]") {
  using any_protocol = proto::runtime<proto::simple, proto::ll, proto::ll128>;
  const auto [W, P] = GENERATE(std::pair{8, 2}, std::pair{3, 3});
  [&]<class... Ps>(type_list<Ps...>) {
    (
        [&]<class Pr>() {
          INFO("ring over proto::runtime choosing " << Pr::name << ", W " << W << ", P " << P);
          const run_result r =
              run_matrix<algo::ring, any_protocol>(W, P, seed_from_env(), false, proto::channel_of<Pr>);
          check_clean(r);
        }.template operator()<Ps>(),
        ...);
  }(protocols{});
}

// Stripes (NCCL's channels): every rank runs S teams, each on its slice of
// every block and its own FIFOs; schedules that do not split run whole on
// stripe 0 while the other stripes return (collx/stripes.hpp).
TEST_CASE("team executor: every algorithm × protocol × collective in stripes", "[team][stripes]") {
  const auto [W, P, S] = GENERATE(std::tuple{2, 2, 3}, std::tuple{1, 3, 4}, std::tuple{8, 2, 2});
  run_all(W, P, false, S);
}

// Single copy in stripes: each stripe publishes its own slice's buffers and
// synchronises on its own barrier lines (algo::nvls splits; prims.hpp).
TEST_CASE("team executor: single copy paths in stripes", "[team][stripes]") {
  const auto [W, P, S] = GENERATE(std::tuple{2, 2, 3}, std::tuple{1, 3, 2});
  run_all(W, P, true, S);
}

TEST_CASE("stripes: slices cover every element once, at the same grain on every rank", "[stripes]") {
  for (std::size_t elem : {1u, 2u, 4u, 8u, 16u})
    for (int S : {1, 2, 3, 7, 64})
      for (std::size_t count : {0u, 1u, 127u, 128u, 129u, 1000u, 65537u}) {
        std::size_t next = 0;
        for (int s = 0; s < S; ++s) {
          const stripe_slice x = slice_of_stripe(count, elem, s, S);
          INFO("elem " << elem << " S " << S << " count " << count << " stripe " << s);
          CHECK(x.lo == next);
          if (x.n > 0 && x.lo + x.n < count) CHECK((x.lo + x.n) * elem % stripe_grain_bytes == 0);
          next = x.lo + x.n;
        }
        CHECK(next == count);
      }
}

TEST_CASE("stripes: a GPU group's automatic count keeps the blocks of one GPU's ranks within 128",
          "[stripes]") {
  static_assert(automatic_stripes(1) == 32);
  for (int ranks = 0; ranks <= transport::max_mesh_ranks; ++ranks) {
    const int s = automatic_stripes(ranks);
    INFO("ranks on one GPU " << ranks << ": " << s << " stripes");
    CHECK(s >= 1);
    CHECK(s <= 32);
    CHECK(s <= transport::max_stripes);
    const int r = ranks < 1 ? 1 : ranks;
    // Within the budget where it can be (at least one block per rank), and
    // no fewer stripes than the budget allows.
    if (r <= 128) CHECK(r * s <= 128);
    if (r <= 128 && s < 32) CHECK(r * (s + 1) > 128);
  }
  CHECK(automatic_stripes(4) == 32);
  CHECK(automatic_stripes(8) == 16);
  CHECK(automatic_stripes(72) == 1);
}

TEST_CASE("stripes: a view with fewer stripes than asked is refused before any FIFO is touched",
          "[stripes]") {
  const auto layout = transport::shm_layout::make(2, 4, {2048, 2048, 2048}, 2);
  auto seg = transport::shm_segment::create_anonymous(layout);
  exec::team_state team(1, 1, 0, 1'000'000'000ull);
  exec::host_team ex;
  ex.base.abort_word = seg->view().abort_word();
  ex.team = &team;
  std::vector<float> a(4096, 1.0f), b(4096, 0.0f);
  schedule_args<float> args{a.data(), b.data(), a.size(), 0, 0, 2};
  const reducer<float, reduce_op::sum> red{2};
  using R = algo::ring;
  CHECK(run_stripe<R, proto::simple, coll::all_reduce>(ex, seg->view(), red, 0, args, 0, 3) ==
        status::invalid_argument);
  CHECK(run_stripe<R, proto::simple, coll::all_reduce>(ex, seg->view(), red, 0, args, 2, 2) ==
        status::invalid_argument);
  CHECK(b == std::vector<float>(4096, 0.0f));
}

// The mesh transport (transport/mesh.hpp): every rank's region its own
// allocation, FIFO slots and tails in the receiver's, heads in the sender's.
TEST_CASE("team executor: every algorithm × protocol × collective over the mesh transport", "[team][mesh]") {
  const auto [W, P, S] = GENERATE(std::tuple{2, 3, 1}, std::tuple{3, 2, 2}, std::tuple{1, 4, 3});
  run_all<transport::mesh>(W, P, false, S);
}

// Registered user buffers (transport/user_windows.hpp): every case's buffers
// are windows, so the peer-memory schedule (nvls) reads peers' send and recv
// buffers in place, and an in-place broadcast root writes into them.
TEST_CASE("team executor: single copy through the mesh's registered windows", "[team][mesh]") {
  const auto [W, P, S] = GENERATE(std::tuple{2, 2, 1}, std::tuple{3, 3, 1}, std::tuple{2, 4, 2});
  run_all<transport::mesh>(W, P, true, S);
}

// A GPU group on NVSwitch gives the mesh view a multicast address over the
// registered buffers, and nvls's switch channel asks the switch for each
// 16-byte pack whose multicast address and local pointer share their offset
// (transport::multicast_switch_channel); heads, tails and other alignments
// go through the peers. Host code emulates the switch by translating each
// multicast address back into every rank's buffer, so this runs the split
// and the addressing: float sums and int32 maxima (both the switch's), slices
// at every offset from a 16-byte boundary, stripes, and more ranks than one
// pass of the peer channel takes.
TEST_CASE("team executor: nvls's switch channel through a multicast address over the mesh", "[team][mesh]") {
  const auto [W, P, S] =
      GENERATE(std::tuple{2, 2, 1}, std::tuple{3, 3, 2}, std::tuple{1, 4, 3}, std::tuple{2, 9, 1});
  INFO("W " << W << ", P " << P << ", S " << S);
  const run_result r = run_matrix<algo::nvls, proto::simple, transport::mesh>(
      W, P, seed_from_env(), false, own_channel<proto::simple>(), S, true);
  check_clean(r);
}

// Calls larger than the registered buffers go in segments (all_reduce and
// broadcast: the stripe's share of a buffer; all_gather, reduce_scatter and
// all_to_all: a P-th of it); through the multicast address every segment
// starts and ends with a barrier. One count of 2.5 shares (not a multiple of
// anything) gives whole segments and a partial last one.
TEST_CASE("team executor: nvls's switch channel over the mesh in several segments of the buffers",
          "[team][mesh]") {
  const auto [W, P, S] = GENERATE(std::tuple{2, 2, 1}, std::tuple{1, 3, 2});
  const std::size_t share =
      transport::shm_layout::make(static_cast<std::uint32_t>(P), 4, {2048, 2048, 2048}, S)
          .peer_buffer_bytes() /
      static_cast<std::size_t>(S) / sizeof(float);
  const std::size_t big = share * static_cast<std::size_t>(S) * 5 / 2 + 3;
  INFO("W " << W << ", P " << P << ", S " << S << ", count " << big << " (a stripe's share " << share << ")");
  const run_result r = run_matrix<algo::nvls, proto::simple, transport::mesh>(
      W, P, seed_from_env(), false, own_channel<proto::simple>(), S, true, big);
  check_clean(r);
}

// Registered buffers bound to a multicast object: nvls's single copy
// load-reduces from and stores into the windows' multicast addresses
// (emulated as above) instead of loading every peer. Windows at the same
// offset on every rank take the switch; in-place calls too.
TEST_CASE("team executor: nvls through the multicast address of registered windows", "[team][mesh]") {
  const auto [W, P, S] = GENERATE(std::tuple{2, 2, 1}, std::tuple{3, 3, 2}, std::tuple{1, 4, 1});
  INFO("W " << W << ", P " << P << ", S " << S);
  const run_result r = run_matrix<algo::nvls, proto::simple, transport::mesh>(
      W, P, seed_from_env(), true, own_channel<proto::simple>(), S, true);
  check_clean(r);
}

// The switch reaches offset k of every rank's buffer at offset k of the
// multicast address, so a side goes through it only where every rank
// published the same window and offset (the emulation above translates
// each rank's own published address and cannot tell).
TEST_CASE("mesh windows: a side is one multicast range only where every rank published it alike", "[mesh]") {
  constexpr int P = 3;
  constexpr std::size_t n = 256, bytes = n * sizeof(float);
  test_memory<transport::mesh> mem(P, 1, true, true);
  std::vector<std::vector<float>> a(P, std::vector<float>(2 * n)), b(P, std::vector<float>(2 * n)),
      c(P, std::vector<float>(2 * n));
  for (auto* side : {&a, &b})
    mem.register_window(
        P, [&](int r) -> auto& { return (*side)[static_cast<std::size_t>(r)]; });
  mem.window_multicast = false;  // window 2: no multicast address
  mem.register_window(
      P, [&](int r) -> auto& { return c[static_cast<std::size_t>(r)]; });
  std::vector<transport::mesh_view> views(P);
  auto publish = [&](int r, const float* send, const float* recv) {
    views[static_cast<std::size_t>(r)] = mem.for_call(r, send, bytes, recv, bytes);
    views[static_cast<std::size_t>(r)].publish_user_buffers(r, send, recv, bytes);
  };
  auto sides = [&](bool send_side, bool recv_side) {
    for (int r = 0; r < P; ++r) {
      INFO("rank " << r);
      const auto& v = views[static_cast<std::size_t>(r)];
      CHECK((v.user_multicast(r, false) != nullptr) == send_side);
      CHECK((v.user_multicast(r, true) != nullptr) == recv_side);
    }
  };
  for (int r = 0; r < P; ++r) publish(r, a[std::size_t(r)].data() + 4, b[std::size_t(r)].data());
  sides(true, true);
  // Offset 4 elements into window 0's multicast address, offset 0 into window 1's.
  CHECK(views[1].user_multicast(1, false) ==
        reinterpret_cast<std::byte*>(mem.windows.span(0, 1).multicast + 4 * sizeof(float)));
  CHECK(views[1].user_multicast(1, true) == reinterpret_cast<std::byte*>(mem.windows.span(1, 1).multicast));
  // One rank's send at another offset: the send side is not one range.
  publish(2, a[2].data() + 8, b[2].data());
  sides(false, true);
  // One rank's recv in another window (with its own multicast address).
  publish(2, a[2].data() + 4, a[2].data() + n);
  sides(true, false);
  publish(2, a[2].data() + 4, b[2].data());
  sides(true, true);
  // Every rank's recv in a window without a multicast address.
  for (int r = 0; r < P; ++r) publish(r, a[std::size_t(r)].data() + 4, c[std::size_t(r)].data());
  sides(true, false);
}

TEST_CASE("multicast switch channel: which elements go through the switch", "[mesh]") {
  transport::mesh_view v;
  v.layout = transport::mesh_layout::make(transport::shm_layout::make(4, 4, {2048, 2048, 2048}, 1),
                                          std::size_t{2} << 20);
  alignas(16) float local[64];
  const transport::multicast_switch_channel<transport::mesh_view> ch{v, 1};
  // No multicast address: nothing goes through the switch.
  CHECK(ch.split<float>(0, local, 64).packs == 0);
  v.multicast = reinterpret_cast<std::byte*>(std::uintptr_t{1} << 44);
  // Aligned alike: every pack, none before.
  auto s = ch.split<float>(8, local, 64);
  CHECK(s.head == 0);
  CHECK(s.packs == 16);
  CHECK(s.address == (std::uintptr_t{1} << 44) + 32);
  // Offset by one element alike: three elements before the first pack, and a
  // tail of one (64 - 3 = 15 packs + 1).
  s = ch.split<float>(9, local + 1, 63);
  CHECK(s.head == 3);
  CHECK(s.packs == 15);
  CHECK(s.address % 16 == 0);
  // Different offsets from a 16-byte boundary: no pack can be moved whole.
  CHECK(ch.split<float>(8, local + 1, 63).packs == 0);
  // Fewer elements than one pack after the head.
  CHECK(ch.split<float>(9, local + 1, 6).packs == 0);
  // Halves: eight per pack.
  alignas(16) half_t h[32];
  s = ch.split<half_t>(2, h + 2, 30);
  CHECK(s.head == 6);
  CHECK(s.packs == 3);
  // One rank: no switch.
  v.layout = transport::mesh_layout::make(transport::shm_layout::make(1, 4, {2048, 2048, 2048}, 1));
  CHECK(ch.split<float>(0, local, 64).packs == 0);
  // What the switch reduces; everything else goes through the peers.
  STATIC_REQUIRE(transport::multimem_reduces<float, reducer<float, reduce_op::sum>>);
  STATIC_REQUIRE(transport::multimem_reduces<float, reducer<float, reduce_op::avg>>);
  STATIC_REQUIRE(!transport::multimem_reduces<float, reducer<float, reduce_op::max>>);
  STATIC_REQUIRE(!transport::multimem_reduces<float, reducer<float, reduce_op::prod>>);
  STATIC_REQUIRE(transport::multimem_reduces<half_t, reducer<half_t, reduce_op::sum>>);
  STATIC_REQUIRE(transport::multimem_reduces<bfloat16_t, reducer<bfloat16_t, reduce_op::avg>>);
  // The switch has half min/max, but returns the other operand for a NaN.
  STATIC_REQUIRE(!transport::multimem_reduces<half_t, reducer<half_t, reduce_op::max>>);
  STATIC_REQUIRE(!transport::multimem_reduces<bfloat16_t, reducer<bfloat16_t, reduce_op::min>>);
  STATIC_REQUIRE(transport::multimem_reduces<std::int32_t, reducer<std::int32_t, reduce_op::max>>);
  STATIC_REQUIRE(transport::multimem_reduces<std::uint64_t, reducer<std::uint64_t, reduce_op::bxor>>);
  STATIC_REQUIRE(!transport::multimem_reduces<std::int8_t, reducer<std::int8_t, reduce_op::sum>>);
  STATIC_REQUIRE(!transport::multimem_reduces<double, reducer<double, reduce_op::min>>);
}

// "Poll local, write remote" for the peer-memory barrier too: a rank's count
// and published buffers are stored into every region, and every word a rank
// polls or reads lies in its own (on a GPU a load from a peer is a round
// trip over the link).
TEST_CASE("mesh: barrier words and published lines are read from the reader's own region", "[mesh]") {
  constexpr int P = 3, S = 2;
  test_memory<transport::mesh> mem(P, S, false);
  const transport::mesh_view& v = mem.view;
  const std::size_t bytes = v.layout.region_bytes();
  auto inside = [&](const void* p, int r) {
    const auto* b = static_cast<const std::byte*>(p);
    return b >= v.regions[r] && b + sizeof(std::uint64_t) <= v.regions[r] + bytes;
  };
  for (int s = 0; s < S; ++s)
    for (int r = 0; r < P; ++r) {
      v.barrier_post(r, s, 100 + 10 * r + s);
      v.publish_user_buffers(r, nullptr, nullptr, 1000 + r, s);
    }
  for (int s = 0; s < S; ++s)
    for (int reader = 0; reader < P; ++reader)
      for (int q = 0; q < P; ++q) {
        INFO("stripe " << s << ", reader " << reader << ", rank " << q);
        CHECK(inside(v.barrier_seen(reader, q, s), reader));
        CHECK(inside(v.line(reader, q, transport::mesh_view::user_bytes, s), reader));
        CHECK(*v.barrier_seen(reader, q, s) == std::uint64_t(100 + 10 * q + s));
        CHECK(*v.line(reader, q, transport::mesh_view::user_bytes, s) == std::uint64_t(1000 + q));
        // Published for the count after the one posted above.
        CHECK(*v.line(reader, q, transport::mesh_view::published_for, s) ==
              std::uint64_t(100 + 10 * q + s + 1));
      }
  // A rank's own count is the copy in its own region.
  for (int r = 0; r < P; ++r) CHECK(v.barrier_word(r, 1) == v.barrier_seen(r, r, 1));
}

// More ranks than one reduce_many pass takes (detail::reduce_many_max):
// nvls's single copy and its switch channel (staged) reduce the first
// sources, then continue from the partial result.
TEST_CASE("team executor: nvls on more ranks than one reduction pass takes", "[team][mesh]") {
  const int P = GENERATE(9, 10);
  for (bool single : {true, false})
    for (bool mesh : {true, false}) {
      INFO((mesh ? "mesh" : "shm") << (single ? ", single copy" : ", staged") << ", P " << P);
      const run_result r =
          mesh ? run_matrix<algo::nvls, proto::simple, transport::mesh>(2, P, seed_from_env(), single)
               : run_matrix<algo::nvls, proto::simple>(2, P, seed_from_env(), single);
      check_clean(r);
    }
}

// Every rank of a call is registered or none is: a rank whose peer did not
// publish registered buffers for the same barrier fails with mismatch instead
// of reading where that peer's buffers are not; the peer, which staged, then
// stops on the abort word. Ranks whose buffers lie in different windows are
// fine: each peer's buffer is found through its own window.
TEST_CASE("mesh windows: a peer that is not registered is a mismatch, one in another window is read there",
          "[team][mesh]") {
  constexpr int P = 2;
  constexpr std::size_t n = 1000;
  const bool other_window = GENERATE(false, true);
  const bool two_shot = GENERATE(false, true);
  const bool multicast = GENERATE(false, true);  // windows with multicast addresses: not for these calls
  INFO((other_window ? "rank 1's buffers in another window" : "rank 1's buffers not registered")
       << (two_shot ? ", two-shot" : ", one-shot")
       << (multicast ? ", windows with multicast addresses" : ""));
  test_memory<transport::mesh> mem(P, 1, true, multicast);
  std::vector<std::vector<float>> send(P, std::vector<float>(n)), recv(P, std::vector<float>(n, 0.0f));
  for (std::size_t i = 0; i < n; ++i) send[0][i] = float(i % 7), send[1][i] = float(i % 5) - 2;
  std::vector<float> spare_send(n), spare_recv(n, 0.0f);
  for (std::size_t i = 0; i < n; ++i) spare_send[i] = float(i % 3) + 10;
  mem.register_window(
      P, [&](int r) -> auto& { return send[static_cast<std::size_t>(r)]; });
  mem.register_window(
      P, [&](int r) -> auto& { return recv[static_cast<std::size_t>(r)]; });
  if (other_window) {
    mem.register_window(
        P, [&](int) -> auto& { return spare_send; });
    mem.register_window(
        P, [&](int) -> auto& { return spare_recv; });
  }
  std::vector<status> got(P, status::ok);
  std::vector<std::unique_ptr<exec::team_state>> teams;
  for (int r = 0; r < P; ++r)
    teams.push_back(std::make_unique<exec::team_state>(2, 9 + r, 2000, 20'000'000'000ull));
  std::vector<std::thread> threads;
  for (int r = 0; r < P; ++r)
    for (int lane = 0; lane < 2; ++lane)
      threads.emplace_back([&, r, lane] {
        exec::host_team ex;
        ex.base.abort_word = mem.abort_word();
        ex.base.timeout_ns = 20'000'000'000ull;
        ex.base.spin_ns = 2'000;
        ex.base.self = r;
        ex.team = teams[static_cast<std::size_t>(r)].get();
        ex.lane = lane;
        const auto i = static_cast<std::size_t>(r);
        const float* s = send[i].data();
        float* d = recv[i].data();
        if (r == 1 && other_window) s = spare_send.data(), d = spare_recv.data();
        transport::mesh_view v = mem.for_call(r, s, n * sizeof(float), d, n * sizeof(float));
        if (two_shot) v.windows.one_shot_bytes = 0;
        if (r == 1 && !other_window) v.windows = {};
        const schedule_args<float> a{s, d, n, 0, r, P};
        const status st = run_stripe<algo::nvls, proto::simple, coll::all_reduce>(
            ex, v, reducer<float, reduce_op::sum>{P}, 0, a, 0, 1);
        if (lane == 0) got[i] = st;
        if (st != status::ok) detail::store_relaxed(mem.abort_word(), std::uint32_t{1});
      });
  for (auto& t : threads) t.join();
  if (other_window) {
    // Both read each other through their own windows: the sum of send[0] and spare_send.
    CHECK(got[0] == status::ok);
    CHECK(got[1] == status::ok);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < n; ++i)
      wrong += recv[0][i] != send[0][i] + spare_send[i] || spare_recv[i] != send[0][i] + spare_send[i];
    CHECK(wrong == 0);
    CHECK(recv[1] == std::vector<float>(n, 0.0f));  // rank 1's call did not use these
  } else {
    CHECK(got[0] == status::mismatch);
    CHECK(got[1] != status::ok);
    // Nothing was reduced into rank 0's recv from a peer it could not read.
    CHECK(recv[0] == std::vector<float>(n, 0.0f));
  }
}
