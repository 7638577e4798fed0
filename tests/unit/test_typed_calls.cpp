// Typed reductions (comm.all_reduce(const T*, …), collx::all_reduce<Algo,
// Proto>(comm, …)) compile their own element width and T's reduction kernels
// when the communicator is header-only; the type-erased calls (dtype argument)
// go through every width and every dtype's kernels. Both must give bitwise
// the same result for the same variant, for every algorithm and protocol.
// This binary is built header-only (collx::collx) for that reason.
#include <collx/communicator.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

using namespace collx;

namespace {

template <class T>
T typed_input(int rank, std::size_t i) {
  return T(static_cast<float>((rank + 1) * static_cast<int>(i % 5 + 1)));
}

/// One collective on P thread ranks, typed and type-erased with the variant
/// the type-erased call ran with; returns the ranks' disagreements.
template <class T>
std::vector<std::string> typed_matches_erased(int P, coll c, reduce_op op, variant_choice v, std::size_t n) {
  comm_options o;
  o.timeout = std::chrono::seconds(60);
  auto comms = communicator::create_thread_group(P, o);
  std::vector<std::string> errors(static_cast<std::size_t>(P));
  std::vector<std::thread> ts;
  for (int r = 0; r < P; ++r)
    ts.emplace_back([&, r] {
      communicator& comm = comms[static_cast<std::size_t>(r)];
      const std::size_t in_n = c == coll::reduce_scatter ? n * static_cast<std::size_t>(P) : n;
      std::vector<T> x(in_n), erased(n, T(0.0f)), typed(n, T(0.0f)), composed(n, T(0.0f));
      for (std::size_t i = 0; i < in_n; ++i) x[i] = typed_input<T>(r, i);
      const int root = 1 % P;
      try {
        variant_choice ran{};
        switch (c) {
          case coll::all_reduce:
            comm.all_reduce(x.data(), erased.data(), n, dtype_of<T>, op, v);
            ran = comm.last_variant();
            comm.all_reduce(x.data(), typed.data(), n, op, ran);
            break;
          case coll::reduce_scatter:
            comm.reduce_scatter(x.data(), erased.data(), n, dtype_of<T>, op, v);
            ran = comm.last_variant();
            comm.reduce_scatter(x.data(), typed.data(), n, op, ran);
            break;
          default:
            comm.reduce(x.data(), erased.data(), n, dtype_of<T>, op, root, v);
            ran = comm.last_variant();
            comm.reduce(x.data(), typed.data(), n, op, root, ran);
            break;
        }
        if (std::memcmp(erased.data(), typed.data(), n * sizeof(T)) != 0)
          errors[static_cast<std::size_t>(r)] =
              std::string(name(c)) + " " + name(dtype_of<T>) + " " + name(op) + " " + name(ran.algo) + "/" +
              name(ran.proto) + " rank " + std::to_string(r) + ": typed result differs from type-erased";
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  for (auto& t : ts) t.join();
  std::vector<std::string> fails;
  for (auto& e : errors)
    if (!e.empty()) fails.push_back(e);
  return fails;
}

/// Runs body(comm, rank) on P thread ranks; returns what each rank reported
/// (its string, or the exception it threw; "" when all went well).
template <class Body>
std::vector<std::string> on_thread_ranks(int P, Body body) {
  auto comms = communicator::create_thread_group(P);
  std::vector<std::string> errors(static_cast<std::size_t>(P));
  std::vector<std::thread> ts;
  for (int r = 0; r < P; ++r)
    ts.emplace_back([&, r] {
      try {
        errors[static_cast<std::size_t>(r)] = body(comms[static_cast<std::size_t>(r)], r);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  for (auto& t : ts) t.join();
  return errors;
}

template <class T>
void every_variant(reduce_op op) {
  for (coll c : {coll::all_reduce, coll::reduce_scatter, coll::reduce})
    for (int a = 0; a < 32; ++a)
      for (proto_id p : {proto_id::simple, proto_id::ll, proto_id::ll128}) {
        const auto algo = static_cast<algo_id>(a);
        bool served = false;
        visit_variant<transport::shm>(c, algo, p, [&]<class, class>() { served = true; });
        if (!served) continue;
        for (std::size_t n : {std::size_t{1}, std::size_t{1001}}) {
          INFO(name(c) << " " << name(dtype_of<T>) << " " << name(op) << " " << name(algo) << "/" << name(p)
                       << " n=" << n);
          const auto fails = typed_matches_erased<T>(3, c, op, variant_choice{algo, p}, n);
          CHECK(fails.empty());
          for (const auto& f : fails) UNSCOPED_INFO(f);
        }
      }
}

}  // namespace

TEST_CASE("typed reductions match the type-erased ones, every variant", "[typed]") {
  every_variant<float>(reduce_op::sum);
  every_variant<double>(reduce_op::prod);
  every_variant<std::int32_t>(reduce_op::max);
  every_variant<std::uint8_t>(reduce_op::band);
  every_variant<half_t>(reduce_op::sum);
  every_variant<bfloat16_t>(reduce_op::avg);
  every_variant<std::int64_t>(reduce_op::bxor);
  every_variant<std::int8_t>(reduce_op::min);
}

TEST_CASE("explicit composition with a typed element matches the type-erased call", "[typed]") {
  const std::size_t n = 777;
  const auto errors = on_thread_ranks(3, [&](communicator& comm, int r) -> std::string {
    std::vector<half_t> x(n), a(n), b(n);
    for (std::size_t i = 0; i < n; ++i) x[i] = typed_input<half_t>(r, i);
    all_reduce<algo::ring, proto::ll>(comm, x.data(), a.data(), n, reduce_op::sum);
    comm.execute<algo::ring, proto::ll, coll::all_reduce>(x.data(), b.data(), n, dtype::float16,
                                                          reduce_op::sum, 0);
    if (std::memcmp(a.data(), b.data(), n * sizeof(half_t)) != 0)
      return "rank " + std::to_string(r) + ": results differ";
    if (static_cast<float>(a[3]) != 6.0f * 4)  // (1 + 2 + 3) · (3 % 5 + 1)
      return "rank " + std::to_string(r) + ": a[3] = " + std::to_string(static_cast<float>(a[3]));
    return {};
  });
  for (const auto& e : errors) CHECK(e.empty());
}

namespace {
template <reduce_op>
inline constexpr bool never = false;
}  // namespace

TEST_CASE("a static reduction (collx::ops) is the runtime one, and is visited alone", "[typed]") {
  STATIC_REQUIRE(reduce_op_argument<reduce_op>);
  STATIC_REQUIRE(reduce_op_argument<std::remove_cv_t<decltype(ops::bxor)>>);
  STATIC_REQUIRE(!reduce_op_argument<int>);
  STATIC_REQUIRE(!reduce_op_argument<std::integral_constant<int, 0>>);
  STATIC_REQUIRE(static_cast<reduce_op>(ops::avg) == reduce_op::avg);
  // Visiting a static op instantiates its branch only: a visitor that does not
  // compile for any other operator compiles here.
  int visited = 0;
  visit_reduce_op(ops::max, [&]<reduce_op Op>(static_reduce_op<Op>) {
    if constexpr (Op == reduce_op::max) ++visited;
    else static_assert(never<Op>, "a static op's visit instantiated another operator");
  });
  CHECK(visited == 1);

  // On the host communicator it converts to the runtime op: the same results.
  const int P = 3;
  const std::size_t n = 1001;
  const auto errors = on_thread_ranks(P, [&](communicator& comm, int r) -> std::string {
    // Outputs with guard elements on both sides, which no call may write.
    constexpr std::size_t guard = 16;
    constexpr std::int32_t sentinel = 0x5A5A5A5A;
    std::vector<std::int32_t> x(n), a(n + 2 * guard, sentinel), b(a), c(a);
    for (std::size_t i = 0; i < n; ++i) x[i] = (r + 1) * static_cast<std::int32_t>(i % 7) - 3 * r;
    comm.all_reduce(x.data(), a.data() + guard, n, ops::max);
    comm.all_reduce(x.data(), b.data() + guard, n, reduce_op::max);
    all_reduce<algo::ring, proto::simple>(comm, x.data(), c.data() + guard, n, ops::max);
    for (std::size_t i = 0; i < guard; ++i)
      for (const auto* out : {&a, &b, &c})
        if ((*out)[i] != sentinel || (*out)[guard + n + i] != sentinel)
          return "rank " + std::to_string(r) + ": a guard element was written";
    for (std::size_t i = 0; i < n; ++i) {
      std::int32_t want = x[i];  // the independent reference: max over ranks
      for (int q = 0; q < P; ++q) want = std::max(want, (q + 1) * static_cast<std::int32_t>(i % 7) - 3 * q);
      const std::size_t k = guard + i;
      if (a[k] != want || b[k] != want || c[k] != want)
        return "rank " + std::to_string(r) + " element " + std::to_string(i) + ": " + std::to_string(a[k]) +
               " / " + std::to_string(b[k]) + " / " + std::to_string(c[k]) + ", want " + std::to_string(want);
    }
    return {};
  });
  for (const auto& e : errors) CHECK(e.empty());
}
