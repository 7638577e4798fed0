// collx/coll.hpp — collective kinds and the arguments a schedule receives.
#pragma once

#include <collx/config.hpp>

#include <cstddef>
#include <cstdint>

namespace collx {

enum class coll : std::uint8_t { all_reduce, all_gather, reduce_scatter, broadcast, reduce };

inline constexpr int coll_count = 5;

COLLX_HOST_DEVICE constexpr const char* name(coll c) {
  switch (c) {
    case coll::all_reduce: return "all_reduce";
    case coll::all_gather: return "all_gather";
    case coll::reduce_scatter: return "reduce_scatter";
    case coll::broadcast: return "broadcast";
    case coll::reduce: return "reduce";
  }
  return "invalid";
}

COLLX_HOST_DEVICE constexpr bool is_reduction(coll c) {
  return c == coll::all_reduce || c == coll::reduce_scatter || c == coll::reduce;
}

/// What a schedule needs to know, in elements of its value type. `count` is
/// the per-call count with NCCL's conventions: all_reduce/broadcast/reduce the
/// buffer length; all_gather the per-rank send count; reduce_scatter the
/// per-rank receive count.
template <class T>
struct schedule_args {
  const T* send = nullptr;
  T* recv = nullptr;
  std::size_t count = 0;
  int root = 0;
  int rank = 0;
  int nranks = 1;
};

}  // namespace collx
