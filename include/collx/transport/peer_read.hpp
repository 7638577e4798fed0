// collx/transport/peer_read.hpp — reading (and writing) another process's
// memory in one copy.
//
// Single-copy collectives read a peer's user buffer during a call instead of
// staging it through shared memory (one copy instead of two). Thread ranks of
// one process simply load through the pointer; process ranks use Linux
// cross-memory attach (process_vm_readv), which the kernel performs as one
// copy from the peer's pages into ours. Whether the OS permits it (ptrace
// access rules, seccomp filters in containers) is probed once when a
// communicator is created (probe_peer_read), and the answer is shared by all
// ranks, so every rank takes the same path. A schedule whose work would
// otherwise fall on the readers alone (an in-place broadcast: the root has
// nothing to copy) also writes into peers' buffers (process_vm_writev, the
// same permission check in the kernel, probed separately: probe_peer_write).
//
// Host only: device code never includes the calls below (prims guard them).
#pragma once

#include <collx/error.hpp>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include <sys/types.h>
#include <sys/uio.h>

namespace collx::transport {

/// The last failed read_peer_memory() of this thread: which rank, which
/// process, and errno. The communicator names them in its error message.
struct peer_read_failure {
  int rank = -1;
  int pid = 0;
  int err = 0;
};
inline thread_local peer_read_failure last_peer_read_failure{};

/// Reads of peers' user buffers this process has made by cross-memory attach
/// (shm_view::read_user_buffer, the single-copy path between process ranks)
/// and the bytes they brought; failed reads and the probe at creation are not
/// counted. Process-wide, relaxed, never reset: a caller compares two
/// snapshots. Tests read it to know single copy really happened.
struct peer_read_stats {
  std::atomic<std::uint64_t> reads{0};
  std::atomic<std::uint64_t> bytes{0};
  /// The same for writes into peers' buffers (process_vm_writev).
  std::atomic<std::uint64_t> writes{0};
  std::atomic<std::uint64_t> bytes_written{0};
};
inline peer_read_stats peer_read_counters{};

/// One cross-memory-attach copy of `bytes` between `local` and address
/// `remote` of process `pid`, by `call` (process_vm_readv or _writev). A
/// partial copy stops at a page the kernel could not pin; it goes on from there.
template <class Call>
status cross_memory_copy(int pid, std::uintptr_t remote, unsigned char* local, std::size_t bytes, Call call) {
  while (bytes > 0) {
    iovec near{local, bytes};
    iovec far{reinterpret_cast<void*>(remote), bytes};
    const ssize_t done = call(static_cast<pid_t>(pid), &near, 1, &far, 1, 0);
    if (done < 0) {
      if (errno == EINTR) continue;
      return status::system_error;
    }
    if (done == 0) {
      errno = EFAULT;
      return status::system_error;
    }
    local += done;
    remote += static_cast<std::uintptr_t>(done);
    bytes -= static_cast<std::size_t>(done);
  }
  return status::ok;
}

/// Copies `bytes` from address `remote` of process `pid` to `dst`. Returns
/// status::ok, or status::system_error with errno left set (EPERM: not
/// permitted; ESRCH: the process is gone; EFAULT: a bad address).
inline status read_peer_memory(int pid, std::uintptr_t remote, void* dst, std::size_t bytes) {
  return cross_memory_copy(pid, remote, static_cast<unsigned char*>(dst), bytes, ::process_vm_readv);
}

/// Copies `bytes` from `src` to address `remote` of process `pid`. Returns
/// status::ok, or status::system_error with errno left set (as read_peer_memory).
inline status write_peer_memory(int pid, std::uintptr_t remote, const void* src, std::size_t bytes) {
  // process_vm_writev only reads the local side.
  return cross_memory_copy(pid, remote, static_cast<unsigned char*>(const_cast<void*>(src)), bytes,
                           ::process_vm_writev);
}

/// Whether this process may read process `pid`'s memory: reads 8 bytes at
/// `remote`, which must hold `expect` there.
inline bool probe_peer_read(int pid, std::uintptr_t remote, std::uint64_t expect) {
  std::uint64_t v = 0;
  return read_peer_memory(pid, remote, &v, sizeof v) == status::ok && v == expect;
}

/// Whether this process may write process `pid`'s memory: writes `expect`
/// over the 8 bytes at `remote`, which already hold it (nothing changes), and
/// reads them back.
inline bool probe_peer_write(int pid, std::uintptr_t remote, std::uint64_t expect) {
  return write_peer_memory(pid, remote, &expect, sizeof expect) == status::ok &&
         probe_peer_read(pid, remote, expect);
}

}  // namespace collx::transport
