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

#include <cstddef>
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
/// A fence at system scope with the given order.
COLLX_HOST_DEVICE COLLX_ALWAYS_INLINE void fence(mo::memory_order order) {
#if COLLX_HAS_LIBCUDACXX
  cuda::atomic_thread_fence(order, cuda::thread_scope_system);
#else
  std::atomic_thread_fence(order);
#endif
}
/// A release fence at system scope: later relaxed stores publish what came
/// before it, as release stores would (one fence for several stores).
COLLX_HOST_DEVICE COLLX_ALWAYS_INLINE void fence_release() { fence(mo::memory_order_release); }
/// An acquire fence at system scope: what later loads and stores of this
/// thread see is at least what the relaxed loads before it saw.
COLLX_HOST_DEVICE COLLX_ALWAYS_INLINE void fence_acquire() { fence(mo::memory_order_acquire); }
/// The load of a wait loop's predicate, for waits through an executor's
/// wait(). Device code: relaxed, as NCCL polls with volatile loads, because
/// an acquire load invalidates the SM's L1 at every spin, which every block
/// on the SM pays for (a fused kernel's compute included); exec::cuda::wait()
/// then runs one fence_acquire() in the polling thread once the predicate
/// holds, before the block barrier that releases the others. Host code:
/// acquire (as cheap as relaxed on x86, and ThreadSanitizer does not model
/// fences).
template <class T>
COLLX_HOST_DEVICE COLLX_ALWAYS_INLINE T load_polled(const T* p) {
#if COLLX_DEVICE_CODE
  return load_relaxed(p);
#else
  return load_acquire(p);
#endif
}
template <class T>
COLLX_HOST_DEVICE COLLX_ALWAYS_INLINE T fetch_add(T* p, T v) {
  return atomic_ref<T>(*p).fetch_add(v, mo::memory_order_acq_rel);
}
template <class T>
COLLX_HOST_DEVICE COLLX_ALWAYS_INLINE bool compare_exchange(T* p, T& expected, T desired) {
  return atomic_ref<T>(*p).compare_exchange_strong(expected, desired, mo::memory_order_acq_rel);
}

/// Asks for the cache line at p in a writable state without waiting, so a
/// later store to it hits instead of waiting for other cores' copies to be
/// invalidated (under x86's in-order store commit, such a wait also holds
/// back every later store). x86: PREFETCHW (a no-op on CPUs without it);
/// other hosts: a write prefetch; device code: nothing.
COLLX_HOST_DEVICE COLLX_ALWAYS_INLINE void prefetch_for_write(const void* p) {
#if COLLX_DEVICE_CODE
  (void)p;
#elif defined(__x86_64__) || defined(__i386__)
  asm volatile("prefetchw %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p, 1, 3);
#endif
}

/// The cache-line size prefetches step by (x86 and most Arm hosts; the
/// transports separate their signals by twice this, transport/fifo.hpp).
inline constexpr std::size_t prefetch_line = 64;

/// Asks for the cache line at p to be read into this core's cache without
/// waiting: loads issued one after another on lines another core has just
/// written overlap their misses only as far as the core's reorder window
/// reaches; prefetches of every line first make the misses overlap whatever
/// work comes between the loads. Device code: nothing.
COLLX_HOST_DEVICE COLLX_ALWAYS_INLINE void prefetch_for_read(const void* p) {
#if COLLX_DEVICE_CODE
  (void)p;
#else
  __builtin_prefetch(p, 0, 3);
#endif
}

}  // namespace collx::detail
