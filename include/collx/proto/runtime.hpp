// collx/proto/runtime.hpp — a protocol chosen at run time from a list.
//
// `proto::runtime<Ps...>` stands where a protocol stands in
// prims<Proto, Exec, View, T, Red>; its engine holds the engine of the one
// protocol chosen when the primitives object is made (by channel number,
// proto/list.hpp) and forwards every step to it after one switch.
//
// Why: a schedule does not depend on the protocol, only on the primitives'
// results and on max_chunk()/max_round_steps(), which the engine reports at
// run time. A communicator whose automatic choice may pick any protocol for
// an algorithm therefore compiles that algorithm's schedule once instead of
// once per protocol; each protocol's steps (the engines' run<F>) are still
// compiled once per primitive shape. The cost is a predictable branch per
// primitive call (a call moves up to a chunk). Explicit composition
// (collx::all_reduce<algo::ring, proto::ll>) keeps the static protocol.
//
// Not a protocol: it has no id, channel or wire format of its own and is in
// no list; it is never a template argument of composable<> (the caller checks
// each protocol of the list). Memory ordering and errors: the chosen
// engine's.
#pragma once

#include <collx/config.hpp>
#include <collx/error.hpp>
#include <collx/proto/conn_cache.hpp>
#include <collx/proto/list.hpp>

#include <cstddef>
#include <new>
#include <type_traits>

namespace collx::proto {

namespace runtime_detail {

/// Storage for one of several engines (non-copyable, constructed in place).
template <class... Es>
union engine_slot;
template <>
union engine_slot<> {};
template <class E, class... Es>
union engine_slot<E, Es...> {
  COLLX_HOST_DEVICE engine_slot() {}
  COLLX_HOST_DEVICE ~engine_slot() {}
  E head;
  engine_slot<Es...> tail;
};

template <std::size_t I, class Slot>
COLLX_HOST_DEVICE auto& get(Slot& s) {
  if constexpr (I == 0) return s.head;
  else return get<I - 1>(s.tail);
}

}  // namespace runtime_detail

template <class... Ps>
struct runtime {
  static_assert(sizeof...(Ps) > 0, "proto::runtime needs at least one protocol");

  /// The position in Ps... of the protocol on `channel`, or -1.
  COLLX_HOST_DEVICE static constexpr int index_of_channel(int channel) {
    int i = 0, found = -1;
    ((found = (found < 0 && channel_of<Ps> == channel) ? i : found, ++i), ...);
    return found;
  }

  template <class Exec, class View, std::size_t Connections = default_connections>
  class engine {
    using slot = runtime_detail::engine_slot<engine_for<Ps, Exec, View, Connections>...>;

   public:
    /// Makes the engine of the protocol on `channel`, which must be one of
    /// Ps... (the dispatch passes the channel of the protocol it resolved).
    COLLX_HOST_DEVICE engine(const Exec& ex, const View& view, int rank, int channel, int stripe = 0)
        : index_(index_of_channel(channel)) {
      with([&](auto& e) {
        using E = std::remove_reference_t<decltype(e)>;
        ::new (static_cast<void*>(&e)) E(ex, view, rank, channel, stripe);
        return 0;
      });
    }
    COLLX_HOST_DEVICE ~engine() {
      with([](auto& e) {
        using E = std::remove_reference_t<decltype(e)>;
        e.~E();
        return 0;
      });
    }
    engine(const engine&) = delete;
    engine& operator=(const engine&) = delete;

    template <class T>
    COLLX_HOST_DEVICE std::size_t max_chunk_elems() const {
      return with([](const auto& e) { return e.template max_chunk_elems<T>(); });
    }
    COLLX_HOST_DEVICE std::size_t max_round_steps() const {
      return with([](const auto& e) { return e.max_round_steps(); });
    }
    template <class T>
    COLLX_HOST_DEVICE std::size_t steps_of_elems(std::size_t n) const {
      return with([n](const auto& e) { return e.template steps_of_elems<T>(n); });
    }
    COLLX_HOST_DEVICE void finish() {
      with([](auto& e) {
        e.finish();
        return 0;
      });
    }
    template <unsigned F, class T, class Red>
    COLLX_HOST_DEVICE status run(int from, int to, const T* src, T* dst, std::size_t n, const Red& red) {
      return with([&](auto& e) { return e.template run<F>(from, to, src, dst, n, red); });
    }

   private:
    template <std::size_t I = 0, class Self, class F>
    COLLX_HOST_DEVICE static decltype(auto) with_impl(Self& self, F& f) {
      if constexpr (I + 1 == sizeof...(Ps)) {
        return f(runtime_detail::get<I>(self.slot_));
      } else {
        if (self.index_ == static_cast<int>(I)) return f(runtime_detail::get<I>(self.slot_));
        return with_impl<I + 1>(self, f);
      }
    }
    template <class F>
    COLLX_HOST_DEVICE decltype(auto) with(F&& f) {
      return with_impl(*this, f);
    }
    template <class F>
    COLLX_HOST_DEVICE decltype(auto) with(F&& f) const {
      return with_impl(*this, f);
    }

    int index_;
    slot slot_;
  };
};

}  // namespace collx::proto
