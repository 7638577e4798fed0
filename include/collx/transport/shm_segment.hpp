// collx/transport/shm_segment.hpp — creating and mapping shm segments (host only).
//
// Thread ranks of one process share an anonymous mapping; process ranks share a
// POSIX shm object that the creator unlinks as soon as every rank has mapped it,
// so that no name is left in /dev/shm even if every process is killed later.
// Mappings are zero-filled by the kernel, which is the initial state of every
// counter and flag.
#pragma once

#include <collx/error.hpp>
#include <collx/transport/shm.hpp>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace collx::transport {

class shm_segment {
 public:
  shm_segment(const shm_segment&) = delete;
  shm_segment& operator=(const shm_segment&) = delete;
  ~shm_segment() {
    if (base_ != nullptr) ::munmap(base_, bytes_);
    if (!name_.empty() && owner_) ::shm_unlink(name_.c_str());
  }

  /// A private mapping for the thread ranks of this process.
  static std::shared_ptr<shm_segment> create_anonymous(const shm_layout& layout) {
    const std::size_t bytes = layout.total_bytes();
    void* p =
        ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) fail("mmap of " + std::to_string(bytes) + " bytes");
    auto seg = std::shared_ptr<shm_segment>(new shm_segment(static_cast<std::byte*>(p), bytes, layout, ""));
    seg->init_header();
    return seg;
  }

  /// Creates the named object `name` (must not exist) and maps it.
  static std::shared_ptr<shm_segment> create_named(const shm_layout& layout, const std::string& name) {
    const int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) fail("shm_open(" + name + ", O_CREAT)");
    const std::size_t bytes = layout.total_bytes();
    if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
      const int e = errno;
      ::close(fd);
      ::shm_unlink(name.c_str());
      errno = e;
      fail("ftruncate of " + name + " to " + std::to_string(bytes) + " bytes");
    }
    auto seg = map_fd(fd, bytes, layout, name);
    seg->owner_ = true;
    seg->init_header();
    return seg;
  }

  /// Maps an existing object created by create_named with the same layout.
  static std::shared_ptr<shm_segment> open_named(const shm_layout& layout, const std::string& name) {
    const int fd = ::shm_open(name.c_str(), O_RDWR, 0600);
    if (fd < 0) fail("shm_open(" + name + ")");
    struct stat st {};
    if (::fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) != layout.total_bytes()) {
      ::close(fd);
      throw_error(status::mismatch,
                  "shared segment " + name + " has an unexpected size (ranks disagree on FIFO sizes?)");
    }
    auto seg = map_fd(fd, layout.total_bytes(), layout, name);
    const shm_header* h = seg->view().header();
    if (h->magic != shm_magic || h->version != shm_version || h->nranks != layout.nranks ||
        !same_geometry(*h, layout))
      throw_error(status::mismatch,
                  "shared segment " + name + " has a different layout than this rank expects");
    return seg;
  }

  /// Removes the name; existing mappings stay valid.
  void unlink() {
    if (!name_.empty() && owner_) ::shm_unlink(name_.c_str());
    owner_ = false;
  }

  shm_view view() const { return shm_view{base_, layout_}; }
  const std::string& name() const { return name_; }

 private:
  shm_segment(std::byte* base, std::size_t bytes, const shm_layout& layout, std::string name)
      : base_(base), bytes_(bytes), layout_(layout), name_(std::move(name)) {}

  static std::shared_ptr<shm_segment> map_fd(int fd, std::size_t bytes, const shm_layout& layout,
                                             const std::string& name) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
    const int e = errno;
    ::close(fd);
    if (p == MAP_FAILED) {
      errno = e;
      fail("mmap of " + name);
    }
    return std::shared_ptr<shm_segment>(new shm_segment(static_cast<std::byte*>(p), bytes, layout, name));
  }

  static bool same_geometry(const shm_header& h, const shm_layout& l) {
    if (h.nchannels != l.nchannels || h.nstripes != l.nstripes) return false;
    for (std::uint32_t c = 0; c < l.nchannels; ++c)
      if (!(h.fifo[c] == l.fifo[c])) return false;
    return true;
  }

  void init_header() {
    shm_header* h = view().header();
    h->magic = shm_magic;
    h->version = shm_version;
    h->nranks = layout_.nranks;
    h->nchannels = layout_.nchannels;
    h->nstripes = layout_.nstripes;
    for (std::uint32_t c = 0; c < layout_.nchannels; ++c) h->fifo[c] = layout_.fifo[c];
    h->total_bytes = bytes_;
  }

  [[noreturn]] static void fail(const std::string& what) {
    throw_error(status::system_error, what + " failed: " + std::strerror(errno));
  }

  std::byte* base_ = nullptr;
  std::size_t bytes_ = 0;
  shm_layout layout_{};
  std::string name_;
  bool owner_ = false;
};

}  // namespace collx::transport
