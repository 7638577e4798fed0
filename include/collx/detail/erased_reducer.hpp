// collx/detail/erased_reducer.hpp — a reducer chosen at run time, for the
// host's type-erased entry points.
//
// The typed path instantiates every schedule once per (dtype, op): with every
// algorithm × protocol × collective compiled in, that is thousands of copies
// of the same schedule. The type-erased host path instead instantiates each
// schedule once per element size, with opaque elements (word<N>), and hands
// the element loops to this reducer, which calls one of eight kernels typed
// for the real (dtype, op). The schedule only does pointer arithmetic on
// elements, which word<N> supports; the reduction happens in the kernel, one
// indirect call per primitive slice (tens of KiB), so nothing is lost. The
// kernels (detail/host_kernels.hpp) are vectorized loops, compiled for the
// build's baseline and, on x86, for AVX2 and AVX-512 too; the table holds the
// widest the CPU runs.
//
// Host only: device code keeps the typed reducer (no function pointers).
#pragma once

#include <collx/detail/host_kernels.hpp>
#include <collx/detail/reduce_copy.hpp>
#include <collx/dtype.hpp>
#include <collx/reduce_op.hpp>

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace collx::detail {

/// An element of N bytes whose value the schedule never looks at.
template <std::size_t N>
struct alignas(N) word {
  unsigned char bytes[N];
};

struct erased_reducer {
  /// Marks the reducer reduce_copy() forwards whole slices to.
  static constexpr bool is_erased = true;
  /// Conservative: primitives may ask for post(); ops without one copy instead.
  static constexpr bool has_post = true;

  using kernel = void (*)(const void* a, const void* b, void* d0, void* d1, std::size_t n,
                          std::uint32_t nranks);
  struct table {
    kernel k[2][2][2];  // [Reduce][Post][NDst - 1]
  };

  const table* fns = nullptr;
  std::uint32_t nranks = 1;

  template <bool Reduce, bool Post, int NDst>
  void apply(const void* a, const void* b, void* d0, void* d1, std::size_t n) const {
    fns->k[Reduce][Post][NDst - 1](a, b, d0, d1, n, nranks);
  }

  /// The kernel table of element type T and op Op (ill-formed combinations
  /// such as a bitwise op on a float are never requested: validation rejects them),
  /// with the kernels compiled for the widest instruction set this CPU has.
  template <class T, reduce_op Op>
  static const table* table_for() {
    return &vector_tables<T, Op>[isa_index(host::best_isa())];
  }
  /// The table with the kernels compiled for instruction set i, which the CPU
  /// must support (host::isa_supported); host::isa::scalar gives the plain
  /// loops of reduce_copy(), as a reference.
  template <class T, reduce_op Op>
  static const table* table_for(host::isa i) {
    if (i == host::isa::scalar) return &scalar_table<T, Op>;
    return &vector_tables<T, Op>[isa_index(i)];
  }

 private:
  template <host::isa I, class T, reduce_op Op>
  static constexpr table make_table() {
    using host::kernel_for;
    return table{{{{kernel_for<I, T, Op, false, false, 1>(), kernel_for<I, T, Op, false, false, 2>()},
                   {kernel_for<I, T, Op, false, true, 1>(), kernel_for<I, T, Op, false, true, 2>()}},
                  {{kernel_for<I, T, Op, true, false, 1>(), kernel_for<I, T, Op, true, false, 2>()},
                   {kernel_for<I, T, Op, true, true, 1>(), kernel_for<I, T, Op, true, true, 2>()}}}};
  }
  static constexpr int isa_index(host::isa i) {
    return static_cast<int>(i) - static_cast<int>(host::isa::baseline);
  }
  // The tables of the vectorized kernels, [baseline, avx2, avx512]; the plain
  // loops' table only where asked for (tests, benchmarks).
  template <class T, reduce_op Op>
  static constexpr table vector_tables[3] = {make_table<host::isa::baseline, T, Op>(),
                                             make_table<host::isa::avx2, T, Op>(),
                                             make_table<host::isa::avx512, T, Op>()};
  template <class T, reduce_op Op>
  static constexpr table scalar_table = make_table<host::isa::scalar, T, Op>();
};

/// The erased reducer for a runtime (dtype, op); validation has already
/// rejected combinations that do not exist.
inline erased_reducer make_erased_reducer(dtype dt, reduce_op op, std::uint32_t nranks) {
  erased_reducer r;
  r.nranks = nranks;
  visit_dtype(dt, [&]<class T>(std::type_identity<T>) {
    visit_reduce_op(op, [&]<reduce_op Op>(std::integral_constant<reduce_op, Op>) {
      if constexpr (!is_bitwise(Op) || std::is_integral_v<T>) r.fns = erased_reducer::table_for<T, Op>();
    });
  });
  return r;
}

}  // namespace collx::detail
