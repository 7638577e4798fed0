// collx/transport/window_registry.hpp — host side of registered user
// buffers: a group's windows as this process maps them, and the lookup a
// launch makes to find the windows of a call's buffers (the device side, what
// a kernel reads, is transport/user_windows.hpp). Host only.
#pragma once

#include <collx/transport/user_windows.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace collx::transport {

/// Host side: the windows of a group as this process maps them. Not
/// thread-safe; its owner serialises registration and lookups.
class window_registry {
 public:
  explicit window_registry(int nranks = 0) : nranks_(nranks) {}

  int nranks() const { return nranks_; }
  /// Windows ever registered (released ones keep their number, empty).
  int count() const {
    return static_cast<int>(spans_.size() / static_cast<std::size_t>(nranks_ ? nranks_ : 1));
  }

  /// Adds a window: spans[q] is rank q's buffer as mapped here. Returns its number.
  int add(const std::vector<window_span>& spans) {
    spans_.insert(spans_.end(), spans.begin(), spans.end());
    return count() - 1;
  }
  /// Sets rank q's span of window w (a group whose ranks register one by one).
  void set(int w, int q, const window_span& s) { at(w, q) = s; }
  /// Sets window w's multicast address (as this process maps it) in every rank's entry.
  void set_multicast(int w, std::uintptr_t address) {
    for (int q = 0; q < nranks_; ++q) at(w, q).multicast = address;
  }
  /// Forgets window w (its number is not reused).
  void remove(int w) {
    for (int q = 0; q < nranks_; ++q) at(w, q) = {};
  }
  const window_span& span(int w, int q) const { return spans_[index(w, q)]; }

  /// The window whose part for rank `self` holds [p, p + bytes), or -1.
  /// Linear: a group registers a handful of buffers.
  int find(int self, const void* p, std::uint64_t bytes) const {
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    for (int w = 0; w < count(); ++w) {
      const window_span& s = span(w, self);
      if (s.bytes > 0 && s.holds(a, bytes)) return w;
    }
    return -1;
  }

  /// The windows of one call of rank `self` (send_bytes and recv_bytes: the
  /// bytes of each side the call touches); `table` is where the kernel reads
  /// this registry's spans (data() on CPUs, a device copy on a GPU).
  call_windows for_call(int self, const void* send, std::uint64_t send_bytes, const void* recv,
                        std::uint64_t recv_bytes, std::uint64_t min_bytes, const window_span* table) const {
    call_windows c;
    if (count() == 0) return c;
    const int s = find(self, send, send_bytes), r = find(self, recv, recv_bytes);
    if (s < 0 || r < 0) return c;
    c.table = table;
    c.send = s, c.recv = r;
    c.min_bytes = min_bytes;
    c.multicast = span(s, self).multicast != 0 || span(r, self).multicast != 0;
    return c;
  }
  /// The spans, [w * nranks + q], for a kernel that runs on the host.
  const window_span* data() const { return spans_.data(); }

 private:
  std::size_t index(int w, int q) const {
    return static_cast<std::size_t>(w) * static_cast<std::size_t>(nranks_) + static_cast<std::size_t>(q);
  }
  window_span& at(int w, int q) { return spans_[index(w, q)]; }

  int nranks_ = 0;
  std::vector<window_span> spans_;  // [window][rank]
};

}  // namespace collx::transport
