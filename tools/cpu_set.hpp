// tools/cpu_set.hpp — the CPUs this process may run on, and binding the
// calling thread to one of them: collx-probe's measurements (the cache sweep,
// the line latency, the contention sample) and the peer benchmarks pin their
// threads.
#pragma once

#include <pthread.h>
#include <sched.h>

#include <vector>

namespace collx::tools {

/// The CPUs this process may run on, in order (empty where the kernel does
/// not say).
inline std::vector<int> allowed_cpus() {
  std::vector<int> v;
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &allowed)) v.push_back(c);
  return v;
}

/// Binds the calling thread to `cpu`; false where that is not allowed.
inline bool pin_thread(int cpu) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  return pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0;
}

}  // namespace collx::tools
