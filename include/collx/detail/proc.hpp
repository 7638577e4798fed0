// collx/detail/proc.hpp — is a peer process still alive? (host only, Linux)
//
// A rank publishes its identity once (pid, the kernel's start time of that
// pid, and its pid namespace); a peer later asks whether that very process
// still runs. /proc/<pid>/stat answers all three cases that matter: the pid is
// gone (exited and reaped), the process is a zombie (exited or killed, not yet
// reaped by its parent), or the pid now belongs to another process (its start
// time differs). kill(pid, 0) alone would miss the last two.
//
// Costs one open/read/close of a small procfs file (a few µs): callers rate-
// limit it. Pids are only compared within one pid namespace; across
// namespaces (containers) the answer is `unknown`.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace collx::detail {

struct proc_identity {
  std::int32_t pid = 0;
  std::uint64_t start_time = 0;  // clock ticks after boot (stat field 22)
  std::uint64_t pid_ns = 0;      // inode of /proc/<pid>/ns/pid, 0 if unreadable
};

enum class proc_state { alive, dead, unknown };

/// Reads state (field 3) and starttime (field 22) of /proc/<pid>/stat.
/// Returns false when the file cannot be read; errno tells why.
inline bool read_proc_stat(int pid, char& state, std::uint64_t& start_time) {
  char path[48];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[1024];
  ssize_t n;
  do n = ::read(fd, buf, sizeof buf - 1);
  while (n < 0 && errno == EINTR);
  const int err = errno;
  ::close(fd);
  if (n <= 0) {
    errno = n == 0 ? ESRCH : err;  // an empty read: the process went away while we read
    return false;
  }
  buf[n] = '\0';
  // The command name (field 2) is in parentheses and may contain anything,
  // so fields are counted from the last ')'.
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr || p[1] != ' ') {
    errno = EINVAL;
    return false;
  }
  p += 2;
  state = *p;
  for (int field = 3; field < 22; ++field) {
    p = std::strchr(p, ' ');
    if (p == nullptr) {
      errno = EINVAL;
      return false;
    }
    ++p;
  }
  start_time = std::strtoull(p, nullptr, 10);
  return true;
}

inline std::uint64_t pid_namespace_of_self() {
  struct stat st {};
  return ::stat("/proc/self/ns/pid", &st) == 0 ? static_cast<std::uint64_t>(st.st_ino) : 0;
}

inline proc_identity self_identity() {
  proc_identity id;
  id.pid = static_cast<std::int32_t>(::getpid());
  char state = 0;
  if (!read_proc_stat(id.pid, state, id.start_time)) id.start_time = 0;
  id.pid_ns = pid_namespace_of_self();
  return id;
}

/// Whether the process `peer` describes still runs, as seen from a process
/// in pid namespace `my_ns`.
inline proc_state probe(const proc_identity& peer, std::uint64_t my_ns) {
  if (peer.pid <= 0 || peer.pid_ns == 0 || peer.pid_ns != my_ns) return proc_state::unknown;
  char state = 0;
  std::uint64_t start = 0;
  if (!read_proc_stat(peer.pid, state, start))
    return errno == ENOENT || errno == ESRCH ? proc_state::dead : proc_state::unknown;
  if (state == 'Z' || state == 'X') return proc_state::dead;
  if (peer.start_time != 0 && start != peer.start_time) return proc_state::dead;  // pid reused
  return proc_state::alive;
}

}  // namespace collx::detail
