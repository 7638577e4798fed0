// Point-to-point groups and barrier on thread ranks: rings, random pairings,
// messages to self, buffers off alignment, many messages of different sizes in
// one group issued in shuffled order, ranks that take no part; mismatched sizes
// and counts of messages are reported; barrier lets nobody leave before
// everyone entered.
#include "../support/thread_ranks.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <random>

using namespace collx;
using namespace collx::test;
using Catch::Matchers::Contains;

namespace {

void report(const std::vector<std::string>& failures) {
  for (std::size_t i = 0; i < failures.size() && i < 8; ++i) UNSCOPED_INFO(failures[i]);
  CHECK(failures.empty());
}

/// One message of a plan: `count` elements from src to dst, the k-th between them.
struct msg {
  int src, dst, k;
  std::size_t count;
};

/// Element i of message (src, dst, k).
template <class T>
T p2p_value(const msg& m, std::size_t i) {
  return movement_input<T>(m.src * 1000 + m.dst * 10 + m.k, i);
}

/// Runs `plan` on P thread ranks: each rank posts its sends and receives in a
/// shuffled order (keeping the order among messages of the same pair), in one
/// group, then checks every received element and the guard bytes. Every
/// buffer starts `misalign` elements off a 64-byte boundary.
template <class T>
std::vector<std::string> run_plan(int P, const std::vector<msg>& plan, std::uint64_t seed,
                                  const comm_options& opt = test_options(), std::size_t misalign = 0) {
  auto comms = communicator::create_thread_group(P, opt);
  std::vector<std::string> errs(static_cast<std::size_t>(P));
  std::vector<std::thread> ts;
  for (int r = 0; r < P; ++r)
    ts.emplace_back([&, r] {
      std::string& err = errs[static_cast<std::size_t>(r)];
      struct op {
        const msg* m;
        bool is_send;
        std::unique_ptr<guarded_buffer> buf;
      };
      std::vector<op> ops;
      for (const msg& m : plan) {
        const std::size_t bytes = m.count * sizeof(T), off = misalign * sizeof(T);
        if (m.src == r) ops.push_back({&m, true, std::make_unique<guarded_buffer>(bytes, off)});
        if (m.dst == r) ops.push_back({&m, false, std::make_unique<guarded_buffer>(bytes, off)});
      }
      for (op& o : ops) {
        T* p = static_cast<T*>(o.buf->data());
        if (o.is_send)
          for (std::size_t i = 0; i < o.m->count; ++i) p[i] = p2p_value<T>(*o.m, i);
        else std::memset(static_cast<void*>(p), 0x5A, o.m->count * sizeof(T));
      }
      // Shuffle, then restore the issue order within each (direction, peer).
      std::mt19937_64 g(seed * 977 + static_cast<std::uint64_t>(r));
      std::vector<std::size_t> order(ops.size());
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), g);
      std::vector<std::size_t> issued;
      std::map<std::pair<bool, int>, std::vector<std::size_t>> per_pair;
      for (std::size_t i = 0; i < ops.size(); ++i)
        per_pair[{ops[i].is_send, ops[i].is_send ? ops[i].m->dst : ops[i].m->src}].push_back(i);
      std::map<std::pair<bool, int>, std::size_t> next;
      for (std::size_t i : order) {
        const auto key = std::make_pair(ops[i].is_send, ops[i].is_send ? ops[i].m->dst : ops[i].m->src);
        issued.push_back(per_pair[key][next[key]++]);
      }
      communicator& c = comms[static_cast<std::size_t>(r)];
      try {
        c.group_start();
        for (std::size_t i : issued) {
          op& o = ops[i];
          if (o.is_send) c.send(static_cast<T*>(o.buf->data()), o.m->count, o.m->dst);
          else c.recv(static_cast<T*>(o.buf->data()), o.m->count, o.m->src);
        }
        c.group_end();
      } catch (const std::exception& e) {
        err = std::string("rank ") + std::to_string(r) + " threw: " + e.what();
        return;
      }
      for (op& o : ops) {
        const T* p = static_cast<T*>(o.buf->data());
        for (std::size_t i = 0; i < o.m->count; ++i) {
          const T want = p2p_value<T>(*o.m, i);
          if (std::memcmp(&p[i], &want, sizeof(T)) != 0) {
            err += "rank " + std::to_string(r) + ": message " + std::to_string(o.m->src) + "→" +
                   std::to_string(o.m->dst) + " #" + std::to_string(o.m->k) + " element " +
                   std::to_string(i) + (o.is_send ? " of the send buffer changed\n" : " is wrong\n");
            break;
          }
        }
        if (!o.buf->guards_intact()) err += "rank " + std::to_string(r) + ": guard bytes overwritten\n";
      }
    });
  for (auto& t : ts) t.join();
  std::vector<std::string> out;
  for (auto& e : errs)
    if (!e.empty()) out.push_back("P=" + std::to_string(P) + " seed " + std::to_string(seed) + ": " + e);
  return out;
}

}  // namespace

TEST_CASE("send/recv: every rank sends right and receives left in one group", "[p2p]") {
  const int P = GENERATE(1, 2, 3, 5, 8);
  INFO("P = " << P);
  for (std::size_t count : {std::size_t(0), std::size_t(1), std::size_t(1009), std::size_t(300007)}) {
    std::vector<msg> plan;
    for (int r = 0; r < P; ++r) plan.push_back({r, (r + 1) % P, 0, count});
    report(run_plan<float>(P, plan, count));
  }
  std::vector<msg> plan;  // one direction with int8, the other with doubles
  for (int r = 0; r < P; ++r) plan.push_back({r, (r + P - 1) % P, 0, 70001});
  report(run_plan<std::int8_t>(P, plan, 5));
  report(run_plan<double>(P, plan, 6));
}

TEST_CASE("send/recv: buffers off vector alignment, self included", "[p2p][misaligned]") {
  const int P = GENERATE(3, 4);
  INFO("P = " << P);
  std::vector<msg> plan;  // right, left and to itself: every path (loopback too)
  for (int r = 0; r < P; ++r) {
    plan.push_back({r, (r + 1) % P, 0, 1031});
    plan.push_back({r, (r + P - 1) % P, 0, 517});
    plan.push_back({r, r, 0, 97});
  }
  for (std::size_t mis : {1, 3, 7}) {
    report(run_plan<float>(P, plan, mis, test_options(), mis));
    report(run_plan<half_t>(P, plan, mis, test_options(), mis));
    report(run_plan<std::int8_t>(P, plan, mis, test_options(), mis));
    report(run_plan<double>(P, plan, mis, test_options(), mis));
  }
}

TEST_CASE("send/recv: random pairings, including rank to itself", "[p2p]") {
  const int P = GENERATE(2, 4, 7, 9);
  INFO("P = " << P);
  std::mt19937_64 g(static_cast<std::uint64_t>(P));
  for (int round = 0; round < 6; ++round) {
    std::vector<int> perm(static_cast<std::size_t>(P));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), g);
    std::vector<msg> plan;
    for (int r = 0; r < P; ++r) plan.push_back({r, perm[static_cast<std::size_t>(r)], 0, g() % 200000});
    report(run_plan<std::int32_t>(P, plan, static_cast<std::uint64_t>(round)));
  }
}

TEST_CASE("send/recv: many messages of different sizes in one group, self included", "[p2p]") {
  const int P = GENERATE(1, 3, 6);
  INFO("P = " << P);
  std::mt19937_64 g(42 + static_cast<std::uint64_t>(P));
  std::vector<msg> plan;
  for (int s = 0; s < P; ++s)
    for (int d = 0; d < P; ++d) {
      const int n = static_cast<int>(g() % 5);  // 0..4 messages per pair
      for (int k = 0; k < n; ++k) plan.push_back({s, d, k, g() % 4 == 0 ? g() % 100000 : g() % 50});
    }
  report(run_plan<half_t>(P, plan, 1));
  // The same through FIFOs of two 128-byte slots: hundreds of rounds.
  comm_options tiny = test_options();
  tiny.fifo_slots = 2;
  tiny.slot_bytes_of<proto::simple>() = 128;
  for (msg& m : plan) m.count %= 3000;
  report(run_plan<half_t>(P, plan, 2, tiny));
}

TEST_CASE("send/recv: long messages read from the sender's buffer (single copy)", "[p2p]") {
  // From the threshold up (and from 0: all but those that ride in their headers) the
  // receiver reads the sender's buffer; messages to self stay on the loopback.
  const int P = GENERATE(2, 3, 6);
  INFO("P = " << P);
  std::mt19937_64 g(77 + static_cast<std::uint64_t>(P));
  std::vector<msg> plan;
  for (int s = 0; s < P; ++s)
    for (int d = 0; d < P; ++d) {
      const int n = static_cast<int>(g() % 4);
      for (int k = 0; k < n; ++k) plan.push_back({s, d, k, g() % 3 == 0 ? g() % 100000 : g() % 600});
    }
  // 128: from 1 KiB on a quiet machine, 128 bytes under contention (stream_read_in_place_bytes).
  for (const std::uint64_t min : {std::uint64_t(0), std::uint64_t(128)}) {
    INFO("single_copy_min_bytes = " << min);
    comm_options o = test_options();
    o.single_copy = true;
    o.single_copy_min_bytes = min;
    report(run_plan<float>(P, plan, 3, o));
    report(run_plan<std::int8_t>(P, plan, 4, o, 5));  // off alignment
    comm_options tiny = o;
    tiny.fifo_slots = 2;
    tiny.slot_bytes_of<proto::simple>() = 128;
    report(run_plan<half_t>(P, plan, 5, tiny));
  }
}

TEST_CASE("send/recv: a sender's buffer may be overwritten as soon as its group returns", "[p2p]") {
  // Messages read in place: a sender returns only once its reader says it is
  // done. Each rank overwrites its send buffer the moment group_end returns;
  // a reader still copying would then receive the overwritten values.
  const int P = GENERATE(2, 3);
  comm_options o = test_options();
  o.single_copy = true;
  o.single_copy_min_bytes = 0;
  auto comms = communicator::create_thread_group(P, o);
  const std::size_t n = 50000;
  std::vector<std::string> errs(static_cast<std::size_t>(P));
  std::vector<std::thread> ts;
  for (int r = 0; r < P; ++r)
    ts.emplace_back([&, r] {
      const int right = (r + 1) % P, left = (r + P - 1) % P;
      std::vector<std::int32_t> out(n), in(n);
      auto value = [](int src, int iter, std::size_t i) {
        return static_cast<std::int32_t>(i * 31 + static_cast<std::size_t>(src * 7919 + iter));
      };
      for (int iter = 0; iter < 100 && errs[static_cast<std::size_t>(r)].empty(); ++iter) {
        for (std::size_t i = 0; i < n; ++i) out[i] = value(r, iter, i);
        communicator& c = comms[static_cast<std::size_t>(r)];
        try {
          c.group_start();
          c.send(out.data(), n, right);
          c.recv(in.data(), n, left);
          c.group_end();
        } catch (const std::exception& e) {
          errs[static_cast<std::size_t>(r)] = e.what();
          return;
        }
        std::fill(out.begin(), out.end(), -1);  // at once: no reader may still be copying
        for (std::size_t i = 0; i < n; ++i)
          if (in[i] != value(left, iter, i)) {
            errs[static_cast<std::size_t>(r)] = "rank " + std::to_string(r) + " call " +
                                                std::to_string(iter) + ": element " + std::to_string(i) +
                                                " from rank " + std::to_string(left) + " is wrong";
            break;
          }
      }
    });
  for (auto& t : ts) t.join();
  for (const auto& e : errs) {
    INFO(e);
    CHECK(e.empty());
  }
}

TEST_CASE("send/recv: only the ranks named take part, and a send outside a group", "[p2p]") {
  const int P = 4;
  report(run_plan<float>(P, {{1, 3, 0, 5000}, {3, 1, 0, 7}}, 1));  // ranks 0 and 2 call nothing
  // A lone send and a lone recv (no group): a group of one each.
  auto comms = communicator::create_thread_group(2, test_options());
  std::vector<float> a(100000), b(100000, 0.0f);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 977);
  std::thread t0([&] { comms[0].send(a.data(), a.size(), 1); });
  std::thread t1([&] { comms[1].recv(b.data(), b.size(), 0); });
  t0.join();
  t1.join();
  CHECK(a == b);
}

TEST_CASE("send/recv: disagreeing sizes or message counts are reported", "[p2p][errors]") {
  comm_options o = test_options();
  o.timeout = std::chrono::seconds(20);
  auto run_pair = [&](const std::function<void(communicator&)>& r0,
                      const std::function<void(communicator&)>& r1) {
    auto comms = communicator::create_thread_group(2, o);
    std::string what[2];
    status code[2] = {status::ok, status::ok};
    std::thread t[2];
    const std::function<void(communicator&)>* body[2] = {&r0, &r1};
    for (int r = 0; r < 2; ++r)
      t[r] = std::thread([&, r] {
        try {
          (*body[r])(comms[r]);
        } catch (const collx::error& e) {
          what[r] = e.what();
          code[r] = e.code();
        }
      });
    t[0].join();
    t[1].join();
    return std::make_pair(code[1], what[1]);
  };
  std::vector<float> a(64, 1.0f), b(64, 0.0f), c(64, 0.0f);
  SECTION("size") {
    auto [code, what] = run_pair([&](communicator& c0) { c0.send(a.data(), 10, 1); },
                                 [&](communicator& c1) { c1.recv(b.data(), 12, 0); });
    CHECK(code == status::mismatch);
    CHECK_THAT(what,
               Contains("recv #0 from rank 0") && Contains("posted 48 bytes") && Contains("sends 40 bytes"));
    CHECK(std::all_of(b.begin(), b.end(), [](float v) { return v == 0.0f; }));  // nothing was written
  }
  SECTION("size, of a message read in place") {
    // Rank 0 waits for rank 1's word that it has read the message; the
    // mismatch must end that wait, not the deadline.
    o.single_copy_min_bytes = 0;
    std::vector<float> big(5000, 1.0f), got(5001, 0.0f);
    const auto t0 = std::chrono::steady_clock::now();
    auto [code, what] = run_pair([&](communicator& c0) { c0.send(big.data(), 5000, 1); },
                                 [&](communicator& c1) { c1.recv(got.data(), 5001, 0); });
    CHECK(code == status::mismatch);
    CHECK_THAT(what, Contains("posted 20004 bytes") && Contains("sends 20000 bytes"));
    CHECK(std::all_of(got.begin(), got.end(), [](float v) { return v == 0.0f; }));
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(15));
  }
  SECTION("number of messages") {
    auto [code, what] = run_pair(
        [&](communicator& c0) {
          c0.group_start();
          c0.send(a.data(), 4, 1);
          c0.send(a.data(), 4, 1);
          c0.group_end();
        },
        [&](communicator& c1) { c1.recv(b.data(), 4, 0); });
    CHECK(code == status::mismatch);
    CHECK_THAT(what, Contains("rank 0 sends 2 message(s) to rank 1") && Contains("posted 1 recv(s)"));
  }
}

TEST_CASE("send/recv: bad arguments are rejected before any byte moves", "[p2p][errors]") {
  auto comms = communicator::create_thread_group(3, test_options());
  communicator& c = comms[0];
  std::vector<float> a(64, 1.0f);
  CHECK_THROWS_WITH(c.send(static_cast<const float*>(nullptr), 4, 1), Contains("send: buffer is null"));
  CHECK_THROWS_WITH(c.recv(static_cast<float*>(nullptr), 4, 1), Contains("recv: buffer is null"));
  CHECK_THROWS_WITH(c.send(a.data(), 4, 3), Contains("peer 3 is out of range for 3 ranks"));
  CHECK_THROWS_WITH(c.recv(a.data(), 4, -1), Contains("peer -1 is out of range"));
  CHECK_THROWS_WITH(c.send(a.data(), SIZE_MAX / 2, 1), Contains("overflows"));
  CHECK_THROWS_WITH(c.send(a.data(), 4, static_cast<dtype>(50), 1), Contains("dtype"));
  CHECK_THROWS_WITH(c.group_end(), Contains("no group is open"));
  c.group_start();
  CHECK_THROWS_WITH(c.all_reduce(a.data(), a.data(), 4, reduce_op::sum), Contains("inside group_start"));
  CHECK_THROWS_WITH(c.barrier(), Contains("inside group_start"));
  c.recv(a.data(), 8, 1);
  c.recv(a.data() + 4, 8, 2);  // overlaps the first
  CHECK_THROWS_WITH(c.group_end(), Contains("overlaps"));
  CHECK(c.error() == status::ok);
  // Zero counts with null buffers are fine, and an empty group is a no-op.
  c.group_start();
  c.send(static_cast<const float*>(nullptr), 0, 0);
  c.recv(static_cast<float*>(nullptr), 0, 0);
  c.group_end();
  c.group_start();
  c.group_end();
  CHECK(c.error() == status::ok);
}

// ---- barrier --------------------------------------------------------------------

TEST_CASE("barrier: no rank leaves before every rank has entered", "[barrier]") {
  const int P = GENERATE(1, 2, 3, 5, 8);
  INFO("P = " << P);
  constexpr int iters = 25;
  auto comms = communicator::create_thread_group(P, test_options());
  std::vector<std::atomic<int>> entered(iters);
  using clock = std::chrono::steady_clock;
  std::vector<std::vector<clock::time_point>> enter(iters, std::vector<clock::time_point>(P)),
      leave(iters, std::vector<clock::time_point>(P));
  std::atomic<int> early{0}, errors{0};
  std::vector<std::thread> ts;
  for (int r = 0; r < P; ++r)
    ts.emplace_back([&, r] {
      std::mt19937 g(static_cast<unsigned>(r * 7 + 1));
      for (int i = 0; i < iters; ++i) {
        std::this_thread::sleep_for(std::chrono::microseconds(g() % 1500));
        enter[i][r] = clock::now();
        entered[i].fetch_add(1);
        try {
          if (i % 2 == 0) comms[r].barrier();
          else collx::barrier<algo::direct, proto::simple>(comms[r]);
        } catch (const std::exception&) {
          ++errors;
          return;
        }
        leave[i][r] = clock::now();
        if (entered[i].load() != P) ++early;
      }
    });
  for (auto& t : ts) t.join();
  REQUIRE(errors == 0);
  CHECK(early == 0);
  for (int i = 0; i < iters; ++i) {
    const auto last_enter = *std::max_element(enter[i].begin(), enter[i].end());
    const auto first_leave = *std::min_element(leave[i].begin(), leave[i].end());
    CHECK(last_enter <= first_leave);
  }
}

TEST_CASE("barrier: a rank that never arrives makes the others time out, not hang", "[barrier][errors]") {
  comm_options o = test_options();
  o.timeout = std::chrono::milliseconds(300);
  auto comms = communicator::create_thread_group(3, o);
  std::atomic<int> failed{0};
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> ts;
  for (int r = 0; r < 2; ++r)  // rank 2 never calls barrier
    ts.emplace_back([&, r] {
      try {
        comms[r].barrier();
      } catch (const collx::error& e) {
        if (e.code() == status::timeout || e.code() == status::aborted) ++failed;
      }
    });
  for (auto& t : ts) t.join();
  CHECK(failed == 2);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
}
