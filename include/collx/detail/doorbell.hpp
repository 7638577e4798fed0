// collx/detail/doorbell.hpp — a futex doorbell: how a host rank sleeps until
// a peer has published something, without missing the wake-up.
//
// A waiter counts itself in `sleepers` and futex-waits on `seq`; a rank that
// has just published (a release store another rank may wait for) calls
// ring(), which bumps `seq` and wakes the waiters only if `sleepers` is
// non-zero, so a publish costs a fence and a load while nobody sleeps.
//
// No lost wake-up: ring() orders the publishing store before its load of
// `sleepers` (seq_cst fence); sleep_on() orders its increment of `sleepers`
// before re-checking the condition (seq_cst fence), and the futex returns at
// once if `seq` moved after the waiter read it. So either the waiter sees the
// data, or the publisher sees the waiter and wakes it.
//
// The struct lives in shared memory (one per rank in the shm segment), so it
// is a plain layout type; the calls are host only (Linux futex).
#pragma once

#include <collx/config.hpp>
#include <collx/detail/atomic.hpp>

#include <cstdint>

#if !COLLX_DEVICE_CODE
#include <atomic>
#include <climits>
#include <ctime>

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace collx::detail {

/// One per rank, on its own 128-byte line (the shm segment's cache-line unit).
struct alignas(128) doorbell {
  std::uint32_t seq;
  std::uint32_t sleepers;
};

#if !COLLX_DEVICE_CODE
/// Wakes whoever sleeps on b. Call after the release store that publishes.
inline void ring(doorbell* b) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (load_relaxed(&b->sleepers) == 0) return;
  fetch_add(&b->seq, std::uint32_t{1});
  ::syscall(SYS_futex, &b->seq, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

/// Sleeps on b for at most max_ns unless done() already holds; returns when
/// rung, at the timeout, or on a signal (the caller re-checks its condition
/// and its deadline: a wake-up proves nothing).
template <class Pred>
void sleep_on(doorbell* b, Pred& done, std::uint64_t max_ns) {
  const std::uint32_t seq = load_acquire(&b->seq);
  fetch_add(&b->sleepers, std::uint32_t{1});
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (!done() && max_ns > 0) {
    timespec ts{static_cast<time_t>(max_ns / 1000000000ull), static_cast<long>(max_ns % 1000000000ull)};
    // Returns at once if seq moved since it was read (a ring in between).
    ::syscall(SYS_futex, &b->seq, FUTEX_WAIT, seq, &ts, nullptr, 0);
  }
  fetch_add(&b->sleepers, std::uint32_t(-1));
}
#else
// nvcc's device pass still checks host functions (exec::host's waits in a .cu
// file): it needs the names, never the code.
void ring(doorbell* b);
template <class Pred>
void sleep_on(doorbell* b, Pred& done, std::uint64_t max_ns);
#endif

}  // namespace collx::detail
