// collx/symmetric_buffer.hpp — one rank's part of a symmetric allocation
// (communicator::alloc_symmetric).
//
// Every rank of a communicator calls alloc_symmetric(bytes) (a collective;
// sizes may differ between ranks) and gets a buffer of its own that every
// other process rank of the host has also mapped. Buffers of a call that lie
// in such memory are read (and, for an in-place broadcast, written) by
// peers' single-copy schedules with a memcpy through their mapping instead
// of a cross-memory-attach system call (transport/symmetric.hpp). Any part of
// a buffer outside it takes the ordinary path, so symmetric memory changes
// how fast a call is, never what it computes; thread ranks load each other's
// memory anyway, and gain nothing.
//
// Lifetime: the handle owns the rank's memory; destroying (or reset()) it
// releases the memory and this rank's mappings of the peers' parts of the same
// allocation. Do it between calls, on the rank's thread, like any use of
// the communicator. A rank may release its part before its peers do: calls
// that still use a peer's part then read it by cross-memory attach.
#pragma once

#include <collx/transport/symmetric.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

namespace collx {

class symmetric_buffer {
 public:
  symmetric_buffer() = default;
  symmetric_buffer(const symmetric_buffer&) = delete;
  symmetric_buffer& operator=(const symmetric_buffer&) = delete;
  symmetric_buffer(symmetric_buffer&& o) noexcept { *this = std::move(o); }
  symmetric_buffer& operator=(symmetric_buffer&& o) noexcept {
    if (this != &o) {
      reset();
      own_ = std::exchange(o.own_, {});
      bytes_ = std::exchange(o.bytes_, 0);
      serial_ = o.serial_;
      mapped_peers_ = o.mapped_peers_;
      table_ = std::move(o.table_);
    }
    return *this;
  }
  ~symmetric_buffer() { reset(); }

  /// This rank's memory: size() bytes, page-aligned, zero-filled when allocated.
  void* data() const { return own_.address; }
  template <class T>
  T* as() const {
    return reinterpret_cast<T*>(own_.address);
  }
  std::size_t size() const { return bytes_; }
  explicit operator bool() const { return own_.address != nullptr; }
  /// How many peers' parts this rank mapped (peers in other processes whose
  /// memory the OS let it map; 0 for thread ranks, which need none).
  int mapped_peers() const { return mapped_peers_; }

  /// Releases the memory (see the header comment); the handle is then empty.
  void reset() {
    if (table_ != nullptr) table_->release(serial_);
    table_.reset();
    own_.release();
    bytes_ = 0;
  }

 private:
  template <class, class>
  friend class basic_communicator;

  transport::symmetric_own own_{};
  std::size_t bytes_ = 0;
  std::uint64_t serial_ = 0;
  int mapped_peers_ = 0;
  std::shared_ptr<transport::symmetric_table> table_;
};

}  // namespace collx
