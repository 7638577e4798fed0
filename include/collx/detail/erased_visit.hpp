// collx/detail/erased_visit.hpp — a type-erased reduction's element type and
// operator as compile-time values, within the sets a program compiled kernels
// for. Callers that compile a kernel per (type, operator) — the GPU
// communicator — name the sets, so that a program using few pairs compiles few.
#pragma once

#include <collx/dtype.hpp>
#include <collx/error.hpp>
#include <collx/reduce_op.hpp>

#include <string>
#include <type_traits>

namespace collx::detail {

/// Calls f(std::type_identity<T>{}, static_reduce_op<Op>{}) for dt's element
/// type T and op, where T supports op and both are in the compiled sets.
/// Throws collx::error otherwise, before calling anything:
///   invalid_argument  dt or op is not a collx value, or T does not support op
///                     (bitwise on a floating type), in validate()'s words;
///   not_supported     the pair was left out of Types or Ops, naming the set
///                     (`types_name`, `ops_name`: how the caller lets users set them).
/// Instantiates f only for pairs inside both sets that T supports.
template <dtype_set Types, reduce_op_set Ops, class F>
void visit_compiled_reduction(dtype dt, reduce_op op, const char* what, const char* types_name,
                              const char* ops_name, F&& f) {
  require(is_valid(dt), what, [&] { return "dtype " + std::to_string(int(dt)) + " is not a collx dtype"; });
  require(is_supported(op, dt), what,
          [&] { return std::string("reduction ") + name(op) + " is not supported for " + name(dt); });
  if (!Types.contains(dt))
    throw_error(status::not_supported, std::string(what) + ": reductions of " + name(dt) +
                                           " were not compiled into this program (" + types_name + ")");
  if (!Ops.contains(op))
    throw_error(status::not_supported, std::string(what) + ": reduction " + name(op) +
                                           " was not compiled into this program (" + ops_name + ")");
  visit_dtype(dt, [&]<class T>(std::type_identity<T> t) {
    if constexpr (Types.contains(dtype_of<T>))
      visit_reduce_op(op, [&]<reduce_op Op>(static_reduce_op<Op> o) {
        if constexpr (Ops.contains(Op) && is_supported(Op, dtype_of<T>)) f(t, o);
      });
  });
}

}  // namespace collx::detail
