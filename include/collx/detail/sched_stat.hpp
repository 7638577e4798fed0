// collx/detail/sched_stat.hpp — how much of the time the calling thread
// wanted a CPU did it get? (host only, Linux)
//
// /proc/thread-self/schedstat holds, for this thread, the nanoseconds it ran
// on a CPU and the nanoseconds it sat runnable on a run queue while something
// else ran. Between two samples, wait / (run + wait) is the share of CPU time
// the thread lost to other tasks: about 0 on an idle machine, 0.5 when one
// busy task shares each CPU with the thread. A thread that sleeps (a futex,
// I/O) adds to neither, so the share does not confuse an idle rank with a
// contended one.
//
// Costs one open/read/close of a small procfs file (a few µs): callers take a
// sample rarely. Where the kernel has no schedstat (CONFIG_SCHED_INFO off) the
// sample is invalid and callers see an unknown share.
#pragma once

#include <cstdint>
#include <cstdlib>

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace collx::detail {

struct sched_sample {
  std::uint64_t run_ns = 0;   // on a CPU
  std::uint64_t wait_ns = 0;  // runnable, waiting on a run queue
  long tid = 0;               // the thread sampled
  bool valid = false;
};

/// The calling thread's counters now (valid = false if unreadable).
inline sched_sample read_sched_sample() {
  sched_sample s;
  s.tid = ::syscall(SYS_gettid);
  const int fd = ::open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return s;
  char buf[128];
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return s;
  buf[n] = '\0';
  char* end = nullptr;
  s.run_ns = std::strtoull(buf, &end, 10);
  if (end == buf) return s;
  char* end2 = nullptr;
  s.wait_ns = std::strtoull(end, &end2, 10);
  s.valid = end2 != end;
  return s;
}

/// Share of the CPU time the thread wanted between samples a and b (of the
/// same thread) that it spent waiting for a CPU: wait / (run + wait), in
/// [0, 1]. Negative when either sample is invalid, they are of different
/// threads (a communicator may change threads between calls), or the thread
/// wanted less than
/// min_ns of CPU in between (too little to tell).
inline double waiting_share(const sched_sample& a, const sched_sample& b, std::uint64_t min_ns = 200'000) {
  if (!a.valid || !b.valid || a.tid != b.tid || b.run_ns < a.run_ns || b.wait_ns < a.wait_ns) return -1;
  const std::uint64_t run = b.run_ns - a.run_ns, wait = b.wait_ns - a.wait_ns;
  if (run + wait < min_ns) return -1;
  return double(wait) / double(run + wait);
}

}  // namespace collx::detail
