// collx/transport/symmetric.hpp — memory that every process rank of a host
// maps: single copy by loads instead of cross-memory attach.
//
// Why: between process ranks a single-copy schedule reads a peer's user
// buffer with process_vm_readv (transport/peer_read.hpp). The kernel pins the
// peer's pages for every call and copies under its own loop; on the 2-CPU
// machine the same nvls all_reduce took about 1.4x as long at 16 MiB on process
// ranks as on thread ranks, which load through the pointer. Memory that
// every rank has mapped needs neither: a peer's buffer there is one memcpy
// away. What NCCL's registered windows and PyTorch's symmetric memory do for
// GPUs, for CPU ranks.
//
// How: each rank's share is a memfd of its own, mapped shared. The
// communicator (communicator::alloc_symmetric, collective) hands every peer
// the memfd's (pid, descriptor number, inode, size, address); each peer takes
// its own descriptor with pidfd_getfd(2) (the kernel allows it where it
// allows cross-memory attach: the same ptrace access check), checks the inode,
// and maps it. Where that fails for some rank (a kernel before Linux 5.6 has
// no pidfd_getfd; ptrace rules may refuse it), every rank also serves its
// memfd over a UNIX socket (bootstrap/fd_exchange.hpp: SCM_RIGHTS, a 0700
// directory and a random token, no ptrace check) and the peers still missing
// a share fetch it there. A rank records where it mapped each peer's share
// (symmetric_table); shm_view consults the table before every
// cross-memory-attach read or write of a peer's address, and where the whole
// range lies in a share of that peer it copies through the mapping instead.
// Anything else (other memory, a range that runs past a share, a peer whose
// share could not be mapped) still goes through cross-memory attach, so the
// table is only ever a faster path to the same bytes.
//
// Why ranges can be trusted: an address of a peer names its share only while
// the share lives. When a rank releases its share it unmaps it and reserves
// the address range (PROT_NONE) for the rest of the process, so no later
// buffer of that rank can lie there; peers that still hold their mapping of
// the old share never see an address in it again.
//
// Host only. Thread-safety: a table is changed only by its rank's thread
// between calls (allocation, release) and read during calls by that rank's
// workers. Errors: see communicator::alloc_symmetric.
#pragma once

#include <collx/error.hpp>

#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace collx::transport {

/// Bytes copied through symmetric mappings instead of cross-memory attach
/// (process-wide, relaxed, never reset; tests compare two snapshots, as with
/// peer_read_counters).
struct symmetric_stats {
  std::atomic<std::uint64_t> bytes_read{0};
  std::atomic<std::uint64_t> bytes_written{0};
};
inline symmetric_stats symmetric_counters{};

/// What a peer needs to map one rank's share: published by the owner.
struct symmetric_share {
  std::uint64_t pid = 0;
  std::uint64_t fd = 0;     // the owner's descriptor number (pidfd_getfd takes it)
  std::uint64_t inode = 0;  // the memfd's inode: the descriptor fetched must be this file
  std::uint64_t bytes = 0;
  std::uint64_t address = 0;  // where the owner mapped it, in its address space
  std::uint64_t serial = 0;   // the allocation's number on its communicator
};

/// Where a rank serves its share's descriptor over a UNIX socket when some
/// rank could not take it with pidfd_getfd (bootstrap::fd_server: the socket's
/// path and the token it asks for; an empty path: no server). Sent as words.
struct symmetric_socket_offer {
  char path[112] = {};
  std::array<std::uint8_t, 16> token{};  // bootstrap::secret_bytes
};
static_assert(sizeof(symmetric_socket_offer) % sizeof(std::uint64_t) == 0);

/// Where this rank mapped peers' shares, by peer.
class symmetric_table {
 public:
  struct mapping {
    int peer = -1;
    std::uint64_t serial = 0;
    std::uintptr_t peer_address = 0;  // the share in the peer's address space
    std::size_t bytes = 0;
    std::byte* local = nullptr;  // the same bytes in ours
  };

  /// The local address of peer q's bytes [addr, addr + n), or nullptr where
  /// they do not all lie in one share of q this rank has mapped.
  std::byte* find(int q, std::uint64_t addr, std::size_t n) const {
    for (const mapping& m : maps_)
      if (m.peer == q && holds(m, addr, n)) return m.local + (addr - m.peer_address);
    return nullptr;
  }
  void add(const mapping& m) { maps_.push_back(m); }

  /// This rank's own shares that every peer in another process mapped: a
  /// call whose buffers lie in them is priced as loads (tune::problem::mapped_peers).
  void add_own(std::uintptr_t address, std::size_t bytes, std::uint64_t serial) {
    own_.push_back({-1, serial, address, bytes, nullptr});
  }
  /// Whether this rank's [p, p + n) lies in one of its own shares every peer mapped.
  bool mapped_by_peers(const void* p, std::size_t n) const {
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    return std::any_of(own_.begin(), own_.end(), [&](const mapping& m) { return holds(m, a, n); });
  }
  bool has_own() const { return !own_.empty(); }

  /// Unmaps and forgets every peer's share of allocation `serial`, and this
  /// rank's own entry for it.
  void release(std::uint64_t serial) {
    auto gone = std::remove_if(maps_.begin(), maps_.end(), [&](const mapping& m) {
      if (m.serial != serial) return false;
      ::munmap(m.local, m.bytes);
      return true;
    });
    maps_.erase(gone, maps_.end());
    own_.erase(std::remove_if(own_.begin(), own_.end(), [&](const mapping& m) { return m.serial == serial; }),
               own_.end());
  }
  std::size_t size() const { return maps_.size(); }
  ~symmetric_table() {
    for (const mapping& m : maps_) ::munmap(m.local, m.bytes);
  }

 private:
  /// Whether [addr, addr + n) lies in m's share (addresses of the share's owner).
  static bool holds(const mapping& m, std::uint64_t addr, std::size_t n) {
    return addr >= m.peer_address && addr - m.peer_address <= m.bytes &&
           n <= m.bytes - (addr - m.peer_address);
  }

  std::vector<mapping> maps_;
  std::vector<mapping> own_;  // peer_address: this rank's address of the share
};

namespace symmetric_detail {

inline long pidfd_open(int pid) {
#ifdef SYS_pidfd_open
  return ::syscall(SYS_pidfd_open, pid, 0);
#else
  errno = ENOSYS;
  return -1;
#endif
}

inline long pidfd_getfd(int pidfd, int fd) {
#ifdef SYS_pidfd_getfd
  return ::syscall(SYS_pidfd_getfd, pidfd, fd, 0);
#else
  errno = ENOSYS;
  return -1;
#endif
}

inline std::size_t page_rounded(std::size_t bytes) {
  const long page = ::sysconf(_SC_PAGESIZE);
  const std::size_t p = page > 0 ? static_cast<std::size_t>(page) : 4096;
  return (bytes + p - 1) / p * p;
}

}  // namespace symmetric_detail

/// This rank's share: a memfd of `bytes` (rounded up to pages) mapped shared
/// at `address`. Owned by one symmetric allocation.
struct symmetric_own {
  int fd = -1;
  std::byte* address = nullptr;
  std::size_t bytes = 0;
  std::uint64_t inode = 0;

  /// Creates it; throws collx::error (status::system_error, naming the call
  /// and errno) when the OS refuses.
  static symmetric_own create(std::size_t bytes) {
    symmetric_own s;
    s.bytes = symmetric_detail::page_rounded(bytes == 0 ? 1 : bytes);
    s.fd = ::memfd_create("collx-symmetric", MFD_CLOEXEC);
    if (s.fd < 0)
      throw_error(status::system_error,
                  "alloc_symmetric: memfd_create: " + std::string(std::strerror(errno)));
    struct stat st {};
    if (::ftruncate(s.fd, static_cast<off_t>(s.bytes)) != 0 || ::fstat(s.fd, &st) != 0) {
      const int e = errno;
      ::close(s.fd);
      throw_error(status::system_error, "alloc_symmetric: sizing " + std::to_string(s.bytes) +
                                            " bytes of shared memory: " + std::strerror(e));
    }
    s.inode = static_cast<std::uint64_t>(st.st_ino);
    void* p = ::mmap(nullptr, s.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, s.fd, 0);
    if (p == MAP_FAILED) {
      const int e = errno;
      ::close(s.fd);
      throw_error(status::system_error, "alloc_symmetric: mapping " + std::to_string(s.bytes) +
                                            " bytes of shared memory: " + std::strerror(e));
    }
    s.address = static_cast<std::byte*>(p);
    return s;
  }

  /// Unmaps it and keeps its addresses reserved (see the header comment),
  /// closes the memfd. The pages live on while peers still map them.
  void release() {
    if (address != nullptr) {
      void* kept =
          ::mmap(address, bytes, PROT_NONE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (kept == MAP_FAILED) ::munmap(address, bytes);  // the reservation is an extra; the unmap is not
    }
    if (fd >= 0) ::close(fd);
    fd = -1;
    address = nullptr;
  }
};

/// Maps peer share `s` through `fd`, a descriptor of it this rank owns (the
/// caller closes it): checked to be the published memfd first. Returns the
/// local address, or nullptr with errno set (ESTALE: another file).
inline std::byte* map_symmetric_fd(int fd, const symmetric_share& s) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return nullptr;
  if (static_cast<std::uint64_t>(st.st_ino) != s.inode || static_cast<std::uint64_t>(st.st_size) != s.bytes) {
    errno = ESTALE;
    return nullptr;
  }
  void* p = ::mmap(nullptr, s.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return p == MAP_FAILED ? nullptr : static_cast<std::byte*>(p);
}

/// Maps peer share `s` (published by the peer): its own descriptor by
/// pidfd_getfd, checked to be the published memfd. Returns the local address,
/// or nullptr with errno set (EPERM: not permitted here; ENOSYS: a kernel
/// before Linux 5.6; ESRCH: the peer is gone; ESTALE: the descriptor number
/// names another file now).
inline std::byte* map_symmetric_share(const symmetric_share& s) {
  const long pidfd = symmetric_detail::pidfd_open(static_cast<int>(s.pid));
  if (pidfd < 0) return nullptr;
  const long fd = symmetric_detail::pidfd_getfd(static_cast<int>(pidfd), static_cast<int>(s.fd));
  const int getfd_errno = errno;
  ::close(static_cast<int>(pidfd));
  if (fd < 0) {
    errno = getfd_errno;
    return nullptr;
  }
  std::byte* p = map_symmetric_fd(static_cast<int>(fd), s);
  const int e = errno;
  ::close(static_cast<int>(fd));
  errno = e;
  return p;
}

}  // namespace collx::transport
