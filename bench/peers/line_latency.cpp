// line-latency [CPU_A CPU_B] [--repeat N]: the core-to-core cache-line
// latency (tools/line_latency.hpp), N times, one number (ns) per line.
// Default CPUs: the first two this process may run on; with fewer than two
// it exits 77 (skipped: both threads on one CPU would pass the line by
// context switches, not through the caches).
#include "line_latency.hpp"

#include <sched.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

int main(int argc, char** argv) {
  int cpus[2] = {-1, -1}, n = 0, repeat = 1;
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0)
    for (int c = 0, k = 0; c < CPU_SETSIZE && k < 2; ++c)
      if (CPU_ISSET(c, &allowed)) cpus[k++] = c;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--repeat") == 0 && i + 1 < argc) repeat = std::atoi(argv[++i]);
    else if (n < 2) cpus[n++] = std::atoi(argv[i]);
    else {
      std::fprintf(stderr, "usage: line-latency [CPU_A CPU_B] [--repeat N]\n");
      return 2;
    }
  }
  if (repeat < 1) repeat = 1;
  if (cpus[0] < 0 || cpus[1] < 0 || cpus[0] == cpus[1]) {
    std::fprintf(stderr, "line-latency: needs two different CPUs (skipped)\n");
    return 77;
  }
  for (int r = 0; r < repeat; ++r) {
    const double ns = collx::probe::line_latency_ns(cpus[0], cpus[1]);
    if (ns < 0) {
      std::fprintf(stderr, "line-latency: cannot bind to CPUs %d and %d, or no answer within 2 s\n", cpus[0],
                   cpus[1]);
      return 1;
    }
    std::printf("%.1f\n", ns);
  }
  return 0;
}
