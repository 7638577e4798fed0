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
// indirect call per primitive slice (tens of KiB), so nothing is lost.
//
// Host only: device code keeps the typed reducer (no function pointers).
#pragma once

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
  /// such as a bitwise op on a float are never requested: validation rejects them).
  template <class T, reduce_op Op>
  static const table* table_for() {
    static constexpr table t = make_table<T, Op>();
    return &t;
  }

 private:
  template <class T, reduce_op Op, bool Reduce, bool Post, int NDst>
  static void run(const void* a, const void* b, void* d0, void* d1, std::size_t n, std::uint32_t nranks) {
    const reducer<T, Op> red{nranks};
    constexpr bool P = Post && reducer<T, Op>::has_post;
    reduce_copy<Reduce, P, NDst>(host_one{}, static_cast<const T*>(a), static_cast<const T*>(b),
                                 static_cast<T*>(d0), static_cast<T*>(d1), n, red);
  }
  template <class T, reduce_op Op>
  static constexpr table make_table() {
    return table{{{{&run<T, Op, false, false, 1>, &run<T, Op, false, false, 2>},
                   {&run<T, Op, false, true, 1>, &run<T, Op, false, true, 2>}},
                  {{&run<T, Op, true, false, 1>, &run<T, Op, true, false, 2>},
                   {&run<T, Op, true, true, 1>, &run<T, Op, true, true, 2>}}}};
  }
  // The worker group of a host thread (exec/host.hpp has the same; this header
  // must not depend on an executor).
  struct host_one {
    static constexpr int size() { return 1; }
    static constexpr int index() { return 0; }
  };
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
