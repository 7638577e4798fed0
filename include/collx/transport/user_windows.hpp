// collx/transport/user_windows.hpp — registered user buffers ("windows") of a
// group whose ranks load and store each other's memory (the mesh transport).
//
// A window is one buffer per rank, registered collectively: the k-th buffer
// every rank registers makes window k (NCCL's ncclCommRegister, the
// registered buffers of vLLM's custom all-reduce). Every rank maps every
// rank's buffer of every window into its own address space (on GPUs: the
// same pointer in one process with peer access, an IPC mapping across
// processes), so a schedule can read a peer's send buffer, or write into its
// recv buffer, in place: one copy instead of two through the staging buffer.
//
// A call is registered when its send and recv buffers each lie inside this
// rank's part of some window (a broadcast's non-root send is not looked at).
// The host looks that up when it launches the call (window_registry::find)
// and puts, in the view, the windows of both sides and where the kernel reads
// every rank's mapping of every window (call_windows: on a GPU, a table in
// its own memory). During the call each rank publishes the windows and
// offsets it uses; a peer's address is that peer's mapping of its own
// published window plus its offset, so ranks may use different windows and
// offsets. Every rank of a call is registered or none is (the choice of
// schedule depends on it); a rank that finds a peer unregistered, or of
// another size, fails the call with status::mismatch (transport/mesh.hpp,
// mesh_view::may_load_peers).
#pragma once

#include <collx/config.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace collx::transport {

/// One rank's buffer of one window, as this address space maps it.
struct window_span {
  std::uintptr_t base = 0;
  std::uint64_t bytes = 0;

  constexpr bool holds(std::uintptr_t p, std::uint64_t n) const {
    return p >= base && p - base <= bytes && n <= bytes - (p - base);
  }
};

/// What a launch hands its kernel about the call's registered buffers: the
/// group's window table as the kernel reads it (on a GPU, a copy in its
/// memory), which window holds each side on this rank (-1: none), and the
/// size from which a call reads peers' buffers in place. Trivially copyable
/// and small: it travels in the kernel's arguments (graph replays carry it).
struct call_windows {
  const window_span* table = nullptr;  // [w * nranks + q]
  std::int32_t send = -1, recv = -1;
  std::uint64_t min_bytes = ~std::uint64_t{0};
  /// A single-copy all_reduce up to this many bytes per rank is one-shot
  /// (algo::nvls); 0: never.
  std::uint64_t one_shot_bytes = 0;

  COLLX_HOST_DEVICE constexpr bool registered() const { return table != nullptr && send >= 0 && recv >= 0; }
};

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
