// collx/detail/atomic.hpp — the few atomic operations collx needs, with one
// memory model on host and device.
//
// With libcu++ available (CUDA toolkit headers on the include path) these map to
// cuda::atomic_ref at system scope, which is valid in host code compiled by g++
// or clang and in device code; otherwise to std::atomic_ref. All words used with
// these helpers live in memory shared between ranks (threads, processes or GPUs),
// hence system scope.
#pragma once

#include <collx/config.hpp>

#include <cstdint>

#if COLLX_HAS_LIBCUDACXX
#include <cuda/atomic>
#else
#include <atomic>
#endif

namespace collx::detail {

#if COLLX_HAS_LIBCUDACXX
template <class T>
using atomic_ref = cuda::atomic_ref<T, cuda::thread_scope_system>;
namespace mo = cuda::std;
#else
template <class T>
using atomic_ref = std::atomic_ref<T>;
namespace mo = std;
#endif

template <class T>
COLLX_HOST_DEVICE COLLX_ALWAYS_INLINE T load_acquire(const T* p) {
  return atomic_ref<T>(*const_cast<T*>(p)).load(mo::memory_order_acquire);
}
template <class T>
COLLX_HOST_DEVICE COLLX_ALWAYS_INLINE T load_relaxed(const T* p) {
  return atomic_ref<T>(*const_cast<T*>(p)).load(mo::memory_order_relaxed);
}
template <class T>
COLLX_HOST_DEVICE COLLX_ALWAYS_INLINE void store_release(T* p, T v) {
  atomic_ref<T>(*p).store(v, mo::memory_order_release);
}
template <class T>
COLLX_HOST_DEVICE COLLX_ALWAYS_INLINE void store_relaxed(T* p, T v) {
  atomic_ref<T>(*p).store(v, mo::memory_order_relaxed);
}
template <class T>
COLLX_HOST_DEVICE COLLX_ALWAYS_INLINE T fetch_add(T* p, T v) {
  return atomic_ref<T>(*p).fetch_add(v, mo::memory_order_acq_rel);
}
template <class T>
COLLX_HOST_DEVICE COLLX_ALWAYS_INLINE bool compare_exchange(T* p, T& expected, T desired) {
  return atomic_ref<T>(*p).compare_exchange_strong(expected, desired, mo::memory_order_acq_rel);
}

}  // namespace collx::detail
