// detail::visit_compiled_reduction: a type-erased reduction's (dtype, op)
// becomes compile-time values only inside the sets a program compiled, and
// every other pair is refused with the right error before anything is called.
#include <collx/detail/erased_visit.hpp>

#include <catch2/catch.hpp>

#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

using namespace collx;

namespace {

struct visited {
  int calls = 0;
  dtype type{};
  reduce_op op{};
};

template <dtype_set Types, reduce_op_set Ops>
visited visit(dtype dt, reduce_op op) {
  visited v;
  detail::visit_compiled_reduction<Types, Ops>(
      dt, op, "all_reduce", "TYPES_MACRO", "OPS_MACRO",
      [&]<class T, reduce_op Op>(std::type_identity<T>, static_reduce_op<Op>) {
        static_assert(Types.contains(dtype_of<T>) && Ops.contains(Op));
        static_assert(is_supported(Op, dtype_of<T>));
        ++v.calls, v.type = dtype_of<T>, v.op = Op;
      });
  return v;
}

/// The error a visit throws: its status and message ("" and ok if none).
template <dtype_set Types, reduce_op_set Ops>
std::pair<status, std::string> refusal(dtype dt, reduce_op op) {
  try {
    (void)visit<Types, Ops>(dt, op);
  } catch (const error& e) {
    return {e.code(), e.what()};
  }
  return {status::ok, ""};
}

}  // namespace

TEST_CASE("enum sets hold what they were given", "[erased_visit]") {
  constexpr dtype_set some = dtype_set::of(dtype::float32, dtype::bfloat16);
  STATIC_REQUIRE(some.contains(dtype::float32));
  STATIC_REQUIRE(some.contains(dtype::bfloat16));
  STATIC_REQUIRE(!some.contains(dtype::float16));
  STATIC_REQUIRE(!some.contains(static_cast<dtype>(dtype_count)));
  STATIC_REQUIRE(!dtype_set{}.contains(dtype::int8));
  STATIC_REQUIRE(dtype_set::all().contains(dtype::float8_e5m2));
  STATIC_REQUIRE(!dtype_set::all().contains(static_cast<dtype>(dtype_count)));
  STATIC_REQUIRE(reduce_op_set::all().contains(reduce_op::bxor));
  STATIC_REQUIRE(!reduce_op_set::of(reduce_op::sum).contains(reduce_op::max));
  // Out-of-range members are dropped, not wrapped onto another bit.
  STATIC_REQUIRE(dtype_set::of(static_cast<dtype>(40)) == dtype_set{});
}

TEST_CASE("every pair of the full sets reaches its own (type, op)", "[erased_visit]") {
  constexpr dtype_set all_types = dtype_set::all();
  constexpr reduce_op_set all_ops = reduce_op_set::all();
  int reached = 0;
  for (int d = 0; d < dtype_count; ++d)
    for (int o = 0; o < reduce_op_count; ++o) {
      const auto dt = static_cast<dtype>(d);
      const auto op = static_cast<reduce_op>(o);
      INFO(name(dt) << " " << name(op));
      if (!is_supported(op, dt)) {
        CHECK(refusal<all_types, all_ops>(dt, op).first == status::invalid_argument);
        continue;
      }
      const visited v = visit<all_types, all_ops>(dt, op);
      CHECK(v.calls == 1);
      CHECK(v.type == dt);
      CHECK(v.op == op);
      reached += v.calls;
    }
  CHECK(reached == 8 * 6 + 5 * 6);  // six integer dtypes take 8 ops, six floating ones 5
}

TEST_CASE("pairs outside the compiled sets are refused, naming the set", "[erased_visit]") {
  constexpr dtype_set types = dtype_set::of(dtype::float32, dtype::int32);
  constexpr reduce_op_set ops = reduce_op_set::of(reduce_op::sum, reduce_op::bxor);
  CHECK(visit<types, ops>(dtype::float32, reduce_op::sum).calls == 1);
  CHECK(visit<types, ops>(dtype::int32, reduce_op::bxor).calls == 1);

  auto [code, msg] = refusal<types, ops>(dtype::float16, reduce_op::sum);
  CHECK(code == status::not_supported);
  CHECK(msg.find("half") != std::string::npos);
  CHECK(msg.find("TYPES_MACRO") != std::string::npos);

  std::tie(code, msg) = refusal<types, ops>(dtype::float32, reduce_op::max);
  CHECK(code == status::not_supported);
  CHECK(msg.find("max") != std::string::npos);
  CHECK(msg.find("OPS_MACRO") != std::string::npos);

  // Misuse keeps its own error, whatever was compiled.
  std::tie(code, msg) = refusal<types, ops>(dtype::float32, reduce_op::bxor);
  CHECK(code == status::invalid_argument);
  CHECK(msg.find("not supported for float") != std::string::npos);
  CHECK(refusal<types, ops>(static_cast<dtype>(99), reduce_op::sum).first == status::invalid_argument);
  CHECK(refusal<types, ops>(dtype::int32, static_cast<reduce_op>(99)).first == status::invalid_argument);
}
