// tools/line_latency.hpp — core-to-core cache-line latency: two threads
// pinned to two CPUs pass one cache line back and forth (each waits for the
// other's store, then stores), and the time of one transfer is the round
// trip over two. It is the floor under every shared-memory step (a FIFO
// flag is such a line), and on a virtual machine it shows where the host
// placed the vCPUs: this project's 2-vCPU machine flips between ~30 ns and
// ~170–270 ns from one second to the next (bench/results/slow_mode.md).
#pragma once

#include "cpu_set.hpp"

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace collx::probe {

/// Mean ns of one cache-line transfer between CPUs a and b over `rounds`
/// round trips; negative when a CPU cannot be bound (not allowed here) or
/// when the rounds take longer than `limit` (both threads on one CPU, or a
/// machine too loaded to answer): each side checks the clock every 1,024
/// polls and gives up then, so no call waits longer than about `limit`.
inline double line_latency_ns(int a, int b, int rounds = 100000,
                              std::chrono::milliseconds limit = std::chrono::seconds(2)) {
  auto bind = [](int cpu) { return tools::pin_thread(cpu); };
  struct alignas(128) line {
    std::atomic<int> v{0};
  } flag;
  std::atomic<bool> bound_b{true}, gave_up{false};
  const auto deadline = std::chrono::steady_clock::now() + limit;
  // Waits until the line holds `want`; false once the other side gave up or
  // the deadline passed.
  auto await = [&](int want) {
    for (unsigned polls = 1; flag.v.load(std::memory_order_acquire) != want; ++polls)
      if ((polls & 1023u) == 0 &&
          (gave_up.load(std::memory_order_relaxed) || std::chrono::steady_clock::now() > deadline)) {
        gave_up.store(true, std::memory_order_relaxed);
        return false;
      }
    return true;
  };
  std::thread peer([&] {
    if (!bind(b)) bound_b = false;  // still answers, so the loop below ends
    for (int i = 0; i < rounds; ++i) {
      if (!await(2 * i + 1)) return;
      flag.v.store(2 * i + 2, std::memory_order_release);
    }
  });
  cpu_set_t old;
  CPU_ZERO(&old);
  pthread_getaffinity_np(pthread_self(), sizeof old, &old);
  const bool bound_a = bind(a);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < rounds; ++i) {
    flag.v.store(2 * i + 1, std::memory_order_release);
    if (!await(2 * i + 2)) break;
  }
  const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  peer.join();
  pthread_setaffinity_np(pthread_self(), sizeof old, &old);
  return bound_a && bound_b && !gave_up ? ns / rounds / 2 : -1;
}

}  // namespace collx::probe
