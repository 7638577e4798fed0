// tools/cpu_contention.hpp — how much of the CPUs other tasks take right now:
// one thread per CPU spins for a while, pinned, and reads its own run-queue
// delay (collx/detail/sched_stat.hpp). The share it lost is what a rank on
// that CPU would lose, the quantity the automatic choice prices
// (comm/contention.hpp). A probe that measures a loaded machine fits the
// model to the load; this says so.
#pragma once

#include "cpu_set.hpp"

#include <collx/detail/sched_stat.hpp>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

namespace collx::probe {

/// The largest share of CPU time that a busy thread on any of `cpus` spent
/// waiting for its CPU during `spin` (0: none; negative where no CPU could be
/// bound or the kernel has no schedstat).
inline double cpu_contention(const std::vector<int>& cpus,
                             std::chrono::milliseconds spin = std::chrono::milliseconds(20)) {
  std::vector<double> share(cpus.size(), -1);
  std::vector<std::thread> ts;
  for (std::size_t i = 0; i < cpus.size(); ++i)
    ts.emplace_back([&, i] {
      if (!tools::pin_thread(cpus[i])) return;
      const detail::sched_sample a = detail::read_sched_sample();
      const auto until = std::chrono::steady_clock::now() + spin;
      while (std::chrono::steady_clock::now() < until) {
      }
      share[i] = detail::waiting_share(a, detail::read_sched_sample(), 1'000'000);
    });
  for (auto& t : ts) t.join();
  return share.empty() ? -1 : *std::max_element(share.begin(), share.end());
}

}  // namespace collx::probe
