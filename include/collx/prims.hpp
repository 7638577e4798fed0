// collx/prims.hpp — the primitives: the whole vocabulary an algorithm speaks.
//
// An algorithm never touches flags or FIFOs; it calls these on a prims object
// bound to a protocol engine (which owns the wire format), an executor (which
// owns waiting and the worker group) and a reducer. Peers are named per call,
// so algorithms that change peer every step (RHD, Bruck) use the same object.
//
//   send(to, src, n)                          to ← src
//   recv(from, dst, n)                        dst ← from
//   recv_reduce_send(from, to, src, n)        to ← from ⊕ src
//   recv_reduce_copy(from, src, dst, n)       dst ← post(from ⊕ src)
//   recv_reduce(from, src, dst, n)            dst ← from ⊕ src   (no post: a partial result)
//   recv_reduce_copy_send(from, to, src, dst, n)   dst, to ← post(from ⊕ src)
//   recv_copy_send(from, to, dst, n)          dst, to ← from
//   copy_send(to, src, dst, n)                dst, to ← src   (no copy if dst == src)
//   local_copy(src, dst, n, finish)           dst ← src, post() applied if finish
//
// Calls with n == 0 move nothing and touch no counter, so both sides of a
// connection must agree on n (they do: schedules derive it from the same
// arguments). Every call returns status::ok or the first failure (timeout,
// aborted); after a failure the connection state is undefined and the
// communicator must be torn down.
#pragma once

#include <collx/config.hpp>
#include <collx/detail/reduce_copy.hpp>
#include <collx/error.hpp>
#include <collx/proto/step_flags.hpp>

#include <cstddef>

#define COLLX_TRY(expr)                                             \
  do {                                                              \
    const ::collx::status collx_try_st_ = (expr);                   \
    if (collx_try_st_ != ::collx::status::ok) return collx_try_st_; \
  } while (0)

namespace collx {

template <class Proto, class Exec, class View, class T, class Red>
class prims {
 public:
  using value_type = T;
  using engine_type = typename Proto::template engine<Exec, View>;

  COLLX_HOST_DEVICE prims(const Exec& ex, const View& view, int rank, const Red& red)
      : ex_(ex), engine_(ex, view, rank), red_(red) {}

  /// Largest n one call may carry in a schedule where every rank sends before
  /// it receives (a ring): larger calls could fill every FIFO and deadlock.
  COLLX_HOST_DEVICE std::size_t max_chunk() const { return engine_.template max_chunk_elems<T>(); }

  COLLX_HOST_DEVICE status send(int to, const T* src, std::size_t n) {
    using namespace proto;
    return engine_.template run<send_out | src_in>(-1, to, src, no_dst, n, red_);
  }
  COLLX_HOST_DEVICE status recv(int from, T* dst, std::size_t n) {
    using namespace proto;
    return engine_.template run<recv_in | dst_out>(from, -1, no_src, dst, n, red_);
  }
  COLLX_HOST_DEVICE status recv_reduce_send(int from, int to, const T* src, std::size_t n) {
    using namespace proto;
    return engine_.template run<recv_in | src_in | reduce_in | send_out>(from, to, src, no_dst, n, red_);
  }
  COLLX_HOST_DEVICE status recv_reduce_copy(int from, const T* src, T* dst, std::size_t n) {
    using namespace proto;
    return engine_.template run<recv_in | src_in | reduce_in | dst_out | post_op>(from, -1, src, dst, n,
                                                                                  red_);
  }
  COLLX_HOST_DEVICE status recv_reduce(int from, const T* src, T* dst, std::size_t n) {
    using namespace proto;
    return engine_.template run<recv_in | src_in | reduce_in | dst_out>(from, -1, src, dst, n, red_);
  }
  COLLX_HOST_DEVICE status recv_reduce_copy_send(int from, int to, const T* src, T* dst, std::size_t n) {
    using namespace proto;
    return engine_.template run<recv_in | src_in | reduce_in | dst_out | send_out | post_op>(from, to, src,
                                                                                             dst, n, red_);
  }
  COLLX_HOST_DEVICE status recv_copy_send(int from, int to, T* dst, std::size_t n) {
    using namespace proto;
    return engine_.template run<recv_in | dst_out | send_out>(from, to, no_src, dst, n, red_);
  }
  COLLX_HOST_DEVICE status copy_send(int to, const T* src, T* dst, std::size_t n) {
    using namespace proto;
    return engine_.template run<src_in | dst_out | send_out>(-1, to, src, dst, n, red_);
  }
  COLLX_HOST_DEVICE status local_copy(const T* src, T* dst, std::size_t n, bool finish) {
    const auto g = ex_.workers();
    if (finish && Red::has_post) detail::reduce_copy<false, true, 1>(g, src, nullptr, dst, nullptr, n, red_);
    else if (src != dst) detail::reduce_copy<false, false, 1>(g, src, nullptr, dst, nullptr, n, red_);
    g.sync();
    return status::ok;
  }

 private:
  static constexpr const T* no_src = nullptr;
  static constexpr T* no_dst = nullptr;
  Exec ex_;
  engine_type engine_;
  Red red_;
};

}  // namespace collx
