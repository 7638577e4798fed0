// The collective matrix of a proxied communicator (collx/net.hpp), shared by
// tests/net/net_rank.cpp (one rank per process: sockets across network
// namespaces and loopback) and tests/net/test_ib_fake.cpp (thread ranks over
// the fake verbs fabric): values against a reference computed here, guard
// words on both sides of every output.
#pragma once

#include <collx/net.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace net_matrix {

/// What one rank's body threw: the collx::error's text and status (ok: none).
struct outcome {
  std::string error;
  collx::status code = collx::status::ok;
};

/// Runs body(r) for ranks 1..P-1 on threads and rank 0 on this one, and
/// returns each rank's outcome (no Catch assertion may run off the main
/// thread, so bodies report through what they throw).
template <class Body>
std::vector<outcome> run_ranks(int P, Body body) {
  std::vector<outcome> out(static_cast<std::size_t>(P));
  auto rank = [&](int r) {
    try {
      body(r);
    } catch (const collx::error& e) {
      out[static_cast<std::size_t>(r)] = {e.what(), e.code()};
    }
  };
  std::vector<std::thread> threads;
  for (int r = 1; r < P; ++r) threads.emplace_back(rank, r);
  rank(0);
  for (auto& t : threads) t.join();
  return out;
}

/// Checks counted per rank (thread ranks of one process each have their own).
struct tally {
  int failures = 0, checks = 0;
  std::string first;  // the first failures' names
  void expect(bool ok, const std::string& what) {
    ++checks;
    if (!ok && failures++ < 20) {
      std::fprintf(stderr, "FAIL: %s\n", what.c_str());
      if (first.size() < 400) first += what + "; ";
    }
  }
};

constexpr std::int32_t guard_value = 0x5a5a5a5a;
constexpr std::size_t guard = 16;

// Rank r's input element i: a small integer, so float sums are exact.
inline std::int32_t input(int r, std::size_t i) {
  return static_cast<std::int32_t>((r + 1) * (i % 13 + 1)) - 3 * r;
}

/// A buffer of n elements of T with `guard` guard elements on each side.
template <class T>
struct guarded {
  std::vector<T> v;
  explicit guarded(std::size_t n) : v(n + 2 * guard) {
    for (std::size_t i = 0; i < guard; ++i) {
      std::memcpy(&v[i], &guard_value, sizeof(T) < 4 ? sizeof(T) : 4);
      std::memcpy(&v[guard + n + i], &guard_value, sizeof(T) < 4 ? sizeof(T) : 4);
    }
  }
  T* data() { return v.data() + guard; }
  bool guards_intact(std::size_t n) const {
    for (std::size_t i = 0; i < guard; ++i)
      if (std::memcmp(&v[i], &guard_value, sizeof(T) < 4 ? sizeof(T) : 4) != 0 ||
          std::memcmp(&v[guard + n + i], &guard_value, sizeof(T) < 4 ? sizeof(T) : 4) != 0)
        return false;
    return true;
  }
};

inline std::string tag(const char* coll, collx::algo_id a, std::size_t n, const char* t,
                       collx::proto_id p = collx::proto_id::simple) {
  return std::string(coll) + " " + (a == collx::algo_id::automatic ? "auto" : collx::name(a)) +
         (p == collx::proto_id::simple ? "" : std::string("/") + collx::name(p)) + " n=" + std::to_string(n) +
         " " + t;
}

template <class T>
void run_all(collx::net_communicator& c, collx::algo_id a, std::size_t n, const char* tname, tally& t,
             collx::proto_id proto = collx::proto_id::simple) {
  using collx::variant_choice;
  const int P = c.size(), me = c.rank();
  const variant_choice v{a, a == collx::algo_id::automatic ? collx::proto_id::automatic : proto};
  auto serves = [&](collx::coll k) { return a == collx::algo_id::automatic || collx::implements(a, k); };
  std::vector<T> x(n * P);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<T>(input(me, i));

  if (serves(collx::coll::all_reduce)) {
    guarded<T> y(n);
    c.all_reduce(x.data(), y.data(), n, collx::reduce_op::sum, v);
    bool ok = y.guards_intact(n);
    for (std::size_t i = 0; i < n && ok; ++i) {
      double want = 0;
      for (int r = 0; r < P; ++r) want += input(r, i);
      ok = static_cast<double>(y.data()[i]) == want;
    }
    t.expect(ok, tag("all_reduce", a, n, tname, proto));
  }
  if (serves(collx::coll::all_gather)) {
    guarded<T> y(n * P);
    c.all_gather(x.data(), y.data(), n, v);
    bool ok = y.guards_intact(n * P);
    for (int r = 0; r < P && ok; ++r)
      for (std::size_t i = 0; i < n && ok; ++i) ok = y.data()[r * n + i] == static_cast<T>(input(r, i));
    t.expect(ok, tag("all_gather", a, n, tname, proto));
  }
  if (serves(collx::coll::reduce_scatter)) {
    guarded<T> y(n);
    c.reduce_scatter(x.data(), y.data(), n, collx::reduce_op::sum, v);
    bool ok = y.guards_intact(n);
    for (std::size_t i = 0; i < n && ok; ++i) {
      double want = 0;
      for (int r = 0; r < P; ++r) want += input(r, me * n + i);
      ok = static_cast<double>(y.data()[i]) == want;
    }
    t.expect(ok, tag("reduce_scatter", a, n, tname, proto));
  }
  if (serves(collx::coll::broadcast)) {
    for (int root = 0; root < P; ++root) {
      guarded<T> y(n);
      c.broadcast(x.data(), y.data(), n, root, v);
      bool ok = y.guards_intact(n);
      for (std::size_t i = 0; i < n && ok; ++i) ok = y.data()[i] == static_cast<T>(input(root, i));
      t.expect(ok, tag("broadcast", a, n, tname, proto) + " root " + std::to_string(root));
    }
  }
  if (serves(collx::coll::reduce)) {
    guarded<T> y(n);
    const int root = P - 1;
    c.reduce(x.data(), y.data(), n, collx::reduce_op::max, root, v);
    bool ok = y.guards_intact(n);
    for (std::size_t i = 0; i < n && ok && me == root; ++i) {
      double want = input(0, i);
      for (int r = 1; r < P; ++r) want = std::max<double>(want, input(r, i));
      ok = static_cast<double>(y.data()[i]) == want;
    }
    t.expect(ok, tag("reduce(max)", a, n, tname, proto));
  }
  if (serves(collx::coll::all_to_all)) {
    guarded<T> y(n * P);
    c.all_to_all(x.data(), y.data(), n, v);
    bool ok = y.guards_intact(n * P);
    for (int r = 0; r < P && ok; ++r)
      for (std::size_t i = 0; i < n && ok; ++i)
        ok = y.data()[r * n + i] == static_cast<T>(input(r, me * n + i));
    t.expect(ok, tag("all_to_all", a, n, tname, proto));
  }
}

/// Every collective the proxied transport serves × every algorithm serving
/// it (Simple; LL too up to ll_max elements) and the automatic choice, at
/// `sizes` elements (float32; int32 up to 65537), send/recv, and the refused
/// variants; counted in `t`.
inline void check_matrix(collx::net_communicator& c, const std::vector<std::size_t>& sizes, tally& t) {
  using collx::algo_id;
  const algo_id algos[] = {algo_id::automatic,    algo_id::ring,  algo_id::tree,   algo_id::rhd,
                           algo_id::rabenseifner, algo_id::bruck, algo_id::direct, algo_id::bruck_a2a};
  // LL moves twice the bytes in 8 KiB slots: the small sizes it is for, and
  // a few thousand elements, so that a call takes several steps and slots.
  constexpr std::size_t ll_max = 65537;
  for (std::size_t n : sizes)
    for (algo_id a : algos) {
      run_all<float>(c, a, n, "float32", t);
      if (n <= 65537) run_all<std::int32_t>(c, a, n, "int32", t);
      if (a != algo_id::automatic && n <= ll_max) {
        run_all<float>(c, a, n, "float32", t, collx::proto_id::ll);
        run_all<std::int32_t>(c, a, n, "int32", t, collx::proto_id::ll);
      }
    }
  // Point to point: a ring exchange and a message to self in one group.
  for (std::size_t n : {std::size_t{1}, std::size_t{1000}, std::size_t{300000}}) {
    const int P = c.size(), me = c.rank(), right = (me + 1) % P, left = (me + P - 1) % P;
    std::vector<std::int32_t> x(n), self_in(n);
    for (std::size_t i = 0; i < n; ++i) x[i] = input(me, i), self_in[i] = input(me + 7, i);
    guarded<std::int32_t> from_left(n), from_self(n);
    c.group_start();
    c.send(x.data(), n, right);
    c.send(self_in.data(), n, me);
    c.recv(from_left.data(), n, left);
    c.recv(from_self.data(), n, me);
    c.group_end();
    bool ok = from_left.guards_intact(n) && from_self.guards_intact(n);
    for (std::size_t i = 0; i < n && ok; ++i)
      ok = from_left.data()[i] == input(left, i) && from_self.data()[i] == input(me + 7, i);
    t.expect(ok, "send/recv ring and self n=" + std::to_string(n));
  }
  c.barrier();
  // Refused by capability, before any byte moves; the communicator stays usable.
  for (auto v : {collx::variant_choice{algo_id::ring, collx::proto_id::ll128},
                 collx::variant_choice{algo_id::nvls, collx::proto_id::simple}}) {
    float a = 1, b = 0;
    bool refused = false;
    try {
      c.all_reduce(&a, &b, 1, collx::reduce_op::sum, v);
    } catch (const collx::error& e) {
      refused = e.code() == collx::status::not_supported;
      if (c.rank() == 0 && v.proto == collx::proto_id::ll128)
        std::printf("refused as expected: %s\n", e.what());
    }
    t.expect(refused,
             std::string("variant ") + collx::name(v.algo) + "/" + collx::name(v.proto) + " refused");
  }
  float one = 1, sum = 0;
  c.all_reduce(&one, &sum, 1, collx::reduce_op::sum);
  t.expect(sum == static_cast<float>(c.size()), "all_reduce after refused variants");
}

}  // namespace net_matrix
