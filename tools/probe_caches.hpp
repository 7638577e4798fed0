// tools/probe_caches.hpp — collx-probe's cache measurement: memcpy by one
// pinned thread per CPU at once, over working sets from 64 KiB to `max_ws`,
// fitted with tune::fit_cache_levels (the sizes the model prices, measured
// rather than read: a VM may report a last-level cache 16 times the one its
// copies show).
//
// Every thread copies its own pair of buffers (first touched by that
// thread), so the working set of a size is every thread's bytes read and
// written together, as the model's working set is every rank's input and
// output on the node. The threads start each pass together (a barrier) and
// time their own copies; a pass's time is the slowest thread's, a size's
// rate the best pass's. Small sizes repeat the copy inside a pass so that a
// pass lasts well beyond the clock's resolution.
#pragma once

#include "cpu_set.hpp"

#include <collx/error.hpp>
#include <collx/tune/cache_fit.hpp>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace collx::probe {

/// A working-set sweep and what the fit made of it.
struct cache_sweep {
  int threads = 0;
  std::vector<tune::cache_point> points;
  tune::cache_levels levels;
  double seconds = 0;  // what the sweep took
};

/// Measures the sweep with one thread per allowed CPU (at most
/// `max_threads`) and fits it. Working sets from 64 KiB to max_ws by √2.
/// Errors: invalid_argument where max_ws leaves fewer than 4 sizes;
/// bad_alloc or system_error where the buffers or threads cannot be had
/// (every thread started is joined first).
inline cache_sweep measure_caches(double max_ws, int max_threads = 256) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<int> cpus = tools::allowed_cpus();
  if (cpus.empty()) cpus.push_back(-1);  // unknown: one thread, not pinned
  if (int(cpus.size()) > max_threads) cpus.resize(std::size_t(max_threads));
  const std::size_t T = cpus.size();
  std::vector<double> sizes;  // total working sets
  for (double ws = 64 * 1024.0; ws <= max_ws * 1.0001; ws *= 1.4142135623730951) sizes.push_back(ws);
  auto per_thread = [&](double ws) {  // bytes each thread copies: a whole number of lines
    return std::max<std::size_t>(64, std::size_t(ws / (2.0 * double(T))) / 64 * 64);
  };
  require(sizes.size() >= 4, "collx-probe: the cache sweep",
          "needs working sets up to at least 181 KiB, got " + std::to_string(max_ws) + " B");
  const std::size_t max_per = per_thread(sizes.back());
  // Allocated here, so that no worker can throw; first touched by the worker
  // that copies them (its NUMA node).
  std::vector<std::unique_ptr<char[]>> src(T), dst(T);
  for (std::size_t t = 0; t < T; ++t) src[t].reset(new char[max_per]), dst[t].reset(new char[max_per]);

  // Set by the main thread between sizes (the barrier orders them).
  std::size_t per = 0, inner = 1, passes = 0;
  bool done = false;
  constexpr std::size_t passes_max = 200;
  std::vector<std::vector<double>> took(T, std::vector<double>(passes_max));  // [thread][pass] seconds
  std::barrier sync(std::ptrdiff_t(T + 1));  // the workers and the main thread
  auto worker = [&](std::size_t t) {
    if (cpus[t] >= 0) tools::pin_thread(cpus[t]);  // best effort
    char* const from = src[t].get();
    char* const to = dst[t].get();
    std::memset(from, int(t + 1), max_per);
    std::memset(to, 0, max_per);
    for (;;) {
      sync.arrive_and_wait();  // the next size is set (or done)
      if (done) return;
      for (std::size_t p = 0; p < passes; ++p) {
        sync.arrive_and_wait();  // every thread starts the pass together
        const auto a = std::chrono::steady_clock::now();
        for (std::size_t k = 0; k < inner; ++k) {
          std::memcpy(to, from, per);
          from[(p + k) % per] ^= 1;  // no two copies alike: none is elided
        }
        took[t][p] = std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
      }
      sync.arrive_and_wait();  // every pass recorded
    }
  };
  std::vector<std::thread> threads;
  try {
    for (std::size_t t = 0; t < T; ++t) threads.emplace_back(worker, t);
  } catch (...) {
    // Release the workers that started: the missing ones' arrivals, then ours.
    done = true;
    (void)sync.arrive(std::ptrdiff_t(T - threads.size()));
    sync.arrive_and_wait();
    for (std::thread& t : threads) t.join();
    throw;
  }
  cache_sweep r;
  r.threads = int(T);
  for (double ws : sizes) {
    per = per_thread(ws);
    inner = std::max<std::size_t>(1, (std::size_t(4) << 20) / per);  // a pass copies at least 4 MiB a thread
    passes = std::clamp<std::size_t>((std::size_t(256) << 20) / (per * inner), 5, passes_max);
    sync.arrive_and_wait();  // go
    for (std::size_t p = 0; p < passes; ++p) sync.arrive_and_wait();
    sync.arrive_and_wait();  // recorded
    double best = 1e300;
    for (std::size_t p = 0; p < passes; ++p) {
      double slowest = 0;
      for (std::size_t t = 0; t < T; ++t) slowest = std::max(slowest, took[t][p]);
      best = std::min(best, slowest);
    }
    r.points.push_back({2.0 * double(T * per), double(T * per * inner) / best / 1e9});
  }
  done = true;
  sync.arrive_and_wait();
  for (std::thread& t : threads) t.join();
  r.levels = tune::fit_cache_levels(r.points);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace collx::probe
