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
// The file is opened once per thread and read again from offset 0 (procfs
// regenerates it), so a sample costs one pread of a small procfs file instead
// of an open/read/close (7 µs each on this project's VM, under load from the
// other CPU: bench/results/contention_point_2026-12-05.md); callers still take
// a sample rarely. Where the kernel has no schedstat (CONFIG_SCHED_INFO off)
// the sample is invalid and callers see an unknown share.
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
  // This thread's file, opened by this thread. A forked child's copy of the
  // thread-local names its parent's thread (the tids differ): opened again.
  struct thread_file {
    int fd = -1;
    long tid = 0;
    ~thread_file() {
      if (fd >= 0) ::close(fd);
    }
  };
  thread_local thread_file f;
  sched_sample s;
  s.tid = ::syscall(SYS_gettid);
  if (f.fd < 0 || f.tid != s.tid) {
    if (f.fd >= 0) ::close(f.fd);
    f.fd = ::open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    f.tid = s.tid;
    if (f.fd < 0) return s;
  }
  char buf[128];
  const ssize_t n = ::pread(f.fd, buf, sizeof buf - 1, 0);
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
