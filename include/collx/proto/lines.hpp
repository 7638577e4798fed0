// collx/proto/lines.hpp — the line formats of the LL and LL128 protocols and
// the loads/stores that move them, on the host and on the device.
//
// Both protocols put a flag next to the payload, so a reader learns that data
// has arrived from the data itself: no counter to publish, no fence between
// payload and signal. The flag of a step derives from the connection's step
// counter (which persists across calls), so a line left from an earlier step
// never carries the flag the reader waits for.
//
// LL: 16-byte lines {data32, flag32, data32, flag32}; 8 payload bytes.
//   Writer: each 8-byte half {data, flag} is one atomic 8-byte store on the
//   host, the whole line one 16-byte volatile vector store on the device.
//   Reader: loads the line until both flags equal the expected flag; a half
//   from an older step fails the check, so torn lines are never used.
// LL128: 128-byte lines of 15 payload words and one 8-byte flag word (last).
//   Host: the writer stores the payload, then the flag with release; the
//   reader loads the flag with acquire, then the payload. Device: 8 lanes
//   store one line with 16-byte volatile stores, the flag in the last lane's
//   second word; this relies on 128-byte lines arriving in order (NVLink
//   does), which is why a transport must declare in_order_128b_lines.
//
// The format (which byte goes where, which flag a step uses) is shared; only
// the load/store primitives differ between host and device.
#pragma once

#include <collx/config.hpp>
#include <collx/detail/atomic.hpp>
#include <collx/error.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace collx::proto {

/// The LL line: 8 payload bytes, a 32-bit flag beside each 4-byte half.
struct ll_line {
  static constexpr std::size_t line_bytes = 16;
  static constexpr std::size_t payload_bytes = 8;
  /// The flag of a step: never 0 (fresh memory is zero), and equal for two
  /// steps only if they differ by a multiple of 2^32 − 1.
  COLLX_HOST_DEVICE static constexpr std::uint32_t flag(std::uint64_t step) {
    return static_cast<std::uint32_t>(step % 0xffffffffull) + 1u;
  }
  /// A line not written for 2^32 − 1 steps could carry a current flag again.
  /// The sender therefore rewrites every line of a slot (flag, zero payload)
  /// on each clean_period-th use of that slot: a line is then at most
  /// clean_period × slots ≤ 2^30 steps old, far from a flag repeat.
  static constexpr std::uint64_t clean_period = 1ull << 20;
  COLLX_HOST_DEVICE static constexpr bool clean_step(std::uint64_t step, std::uint32_t slots) {
    return (step / slots) % clean_period == 0;
  }
};

/// The LL128 line: 15 payload words, the flag in the last word.
struct ll128_line {
  static constexpr std::size_t line_bytes = 128;
  static constexpr std::size_t payload_bytes = 120;
  /// 64-bit flags do not repeat within the life of a connection.
  COLLX_HOST_DEVICE static constexpr std::uint64_t flag(std::uint64_t step) { return step + 1; }
  COLLX_HOST_DEVICE static constexpr bool clean_step(std::uint64_t, std::uint32_t) { return false; }
};

/// Loads and stores of lines. A line is handled by a team of `team_size()`
/// workers; each member owns a contiguous piece of the line's payload
/// ([piece_begin, piece_end) bytes) and moves it with the widest access the
/// target has. The team's shape comes from the executor's worker group, never
/// from the compilation pass: Group::max_tile says how many lanes may form a
/// tile that votes and exchanges values cheaply (a warp: 32; a host thread:
/// 1), and Group::sequential whether a worker should take several lines per
/// pass (one reduction call per batch on a CPU thread; one line per lane and
/// pass on a GPU, where parallelism comes from the lanes).
template <class Line, class Group>
struct line_io;

template <class Group>
struct line_io<ll_line, Group> {
  using line = ll_line;
  COLLX_HOST_DEVICE static constexpr int team_size() { return 1; }
  static constexpr std::size_t batch_lines = Group::sequential ? 64 : 1;
  COLLX_HOST_DEVICE static constexpr std::size_t piece_begin(int) { return 0; }
  COLLX_HOST_DEVICE static constexpr std::size_t piece_end(int) { return line::payload_bytes; }

  /// Writes `valid` payload bytes from `src` (zero padded) with the step's flag.
  template <class Tile>
  COLLX_HOST_DEVICE static void store(const Tile&, std::byte* l, int, const std::byte* src, std::size_t valid,
                                      std::uint32_t flag) {
    std::uint64_t p = 0;
    if (valid == line::payload_bytes)
      copy_bytes(&p, src, line::payload_bytes);  // a full line: no library call
    else copy_bytes(&p, src, valid);
    const std::uint32_t lo = static_cast<std::uint32_t>(p), hi = static_cast<std::uint32_t>(p >> 32);
#if COLLX_DEVICE_CODE
    asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(l), "r"(lo), "r"(flag), "r"(hi),
                 "r"(flag)
                 : "memory");
#else
    auto* w = reinterpret_cast<std::uint64_t*>(l);
    detail::store_relaxed(w, lo | std::uint64_t(flag) << 32);
    detail::store_relaxed(w + 1, hi | std::uint64_t(flag) << 32);
#endif
  }

  /// Loads the line into `dst` (`valid` bytes) if both halves carry `flag`.
  COLLX_HOST_DEVICE static bool try_load(const std::byte* l, std::byte* dst, std::size_t valid,
                                         std::uint32_t flag) {
    std::uint32_t lo, f0, hi, f1;
#if COLLX_DEVICE_CODE
    asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(lo), "=r"(f0), "=r"(hi), "=r"(f1)
                 : "l"(l)
                 : "memory");
#else
    const auto* w = reinterpret_cast<const std::uint64_t*>(l);
    const std::uint64_t h0 = detail::load_relaxed(w), h1 = detail::load_relaxed(w + 1);
    lo = static_cast<std::uint32_t>(h0), f0 = static_cast<std::uint32_t>(h0 >> 32);
    hi = static_cast<std::uint32_t>(h1), f1 = static_cast<std::uint32_t>(h1 >> 32);
#endif
    if (f0 != flag || f1 != flag) return false;
    const std::uint64_t p = lo | std::uint64_t(hi) << 32;
    if (valid == line::payload_bytes) copy_bytes(dst, &p, line::payload_bytes);
    else copy_bytes(dst, &p, valid);
    return true;
  }

  /// Waits (with the executor's deadline and abort check) for the line.
  template <class Exec, class Tile>
  COLLX_HOST_DEVICE static status wait_load(const Exec& ex, const Tile&, const std::byte* l, int,
                                            std::byte* dst, std::size_t valid, std::uint32_t flag) {
    return ex.wait_own([&] { return try_load(l, dst, valid, flag); });
  }

  COLLX_HOST_DEVICE static void copy_bytes(void* d, const void* s, std::size_t n) {
#if COLLX_DEVICE_CODE
    auto* dd = static_cast<unsigned char*>(d);
    const auto* ss = static_cast<const unsigned char*>(s);
    for (std::size_t i = 0; i < n; ++i) dd[i] = ss[i];
#else
    std::memcpy(d, s, n);
#endif
  }
};

template <class Group>
struct line_io<ll128_line, Group> {
  using line = ll128_line;
  static constexpr std::size_t flag_offset = 120;
  /// Eight lanes per line where the group has tiles of eight (16 bytes each,
  /// the last lane's second word is the flag); else one worker per line.
  static constexpr int team = Group::max_tile >= 8 ? 8 : 1;
  COLLX_HOST_DEVICE static constexpr int team_size() { return team; }
  static constexpr std::size_t batch_lines = Group::sequential ? 16 : 1;
  COLLX_HOST_DEVICE static constexpr std::size_t piece_begin(int m) {
    return team == 1 ? 0 : std::size_t(m) * 16;
  }
  COLLX_HOST_DEVICE static constexpr std::size_t piece_end(int m) {
    return team == 1 || m == 7 ? line::payload_bytes : std::size_t(m) * 16 + 16;
  }
  // A team of eight needs the device's 16-byte volatile accesses; one worker
  // per line needs release/acquire on the flag word (the host path).
  static_assert(team == 1 || COLLX_DEVICE_CODE, "8-lane LL128 teams run in device code only");

  template <class Tile>
  COLLX_HOST_DEVICE static void store(const Tile& tile, std::byte* l, int member, const std::byte* src,
                                      std::size_t valid, std::uint64_t flag) {
    if constexpr (team == 8) {
#if COLLX_DEVICE_CODE
      std::uint64_t w[2] = {0, 0};
      line_io<ll_line, Group>::copy_bytes(w, src, valid);
      if (member == 7) w[1] = flag;
      // The eight lanes store the line with one warp instruction: converge first.
      tile.sync();
      asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};" ::"l"(l + piece_begin(member)), "l"(w[0]),
                   "l"(w[1])
                   : "memory");
#endif
    } else {
      (void)tile, (void)member;
#if !COLLX_DEVICE_CODE
      std::memcpy(l, src, valid);
      if (valid < flag_offset) std::memset(l + valid, 0, flag_offset - valid);
      detail::store_release(reinterpret_cast<std::uint64_t*>(l + flag_offset), flag);
#endif
    }
  }

  template <class Exec, class Tile>
  COLLX_HOST_DEVICE static status wait_load(const Exec& ex, const Tile& tile, const std::byte* l, int member,
                                            std::byte* dst, std::size_t valid, std::uint64_t flag) {
    if constexpr (team == 8) {
#if COLLX_DEVICE_CODE
      // The team polls together: the eight lanes load their pieces with one
      // warp instruction until the flag lane sees the flag; the verdict (and
      // the deadline) is the flag lane's, so all leave on the same iteration.
      // Then every lane loads its piece again: a 128-byte load is not
      // guaranteed to be one access, but once the flag is visible the line's
      // payload, stored before or with it, is too.
      for (std::uint32_t polls = 1;; ++polls) {
        tile.sync();
        const std::uint64_t w1 = load_piece(l, member)[1];
        status st = status::ok;
        bool ready = false;
        if (member == 7) {
          ready = w1 == flag;
          if (!ready) st = ex.check(polls);
        }
        if (tile.any(ready)) {
          tile.sync();
          const auto w = load_piece(l, member);
          line_io<ll_line, Group>::copy_bytes(dst, w.data, valid);
          return status::ok;
        }
        st = tile.broadcast(st, 7);
        if (st != status::ok) return st;
      }
#else
      (void)ex, (void)tile, (void)l, (void)member, (void)dst, (void)valid, (void)flag;
      return status::invalid_argument;
#endif
    } else {
      (void)tile, (void)member;
#if !COLLX_DEVICE_CODE
      return ex.wait_own([&] { return try_load(l, dst, valid, flag); });
#else
      (void)ex, (void)l, (void)dst, (void)valid, (void)flag;
      return status::invalid_argument;
#endif
    }
  }

 private:
#if COLLX_DEVICE_CODE
  struct piece {
    std::uint64_t data[2];
    COLLX_HOST_DEVICE std::uint64_t operator[](int i) const { return data[i]; }
  };
  COLLX_HOST_DEVICE static piece load_piece(const std::byte* l, int member) {
    piece p;
    asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];"
                 : "=l"(p.data[0]), "=l"(p.data[1])
                 : "l"(l + piece_begin(member))
                 : "memory");
    return p;
  }
#else
  static bool try_load(const std::byte* l, std::byte* dst, std::size_t valid, std::uint64_t flag) {
    if (detail::load_acquire(reinterpret_cast<const std::uint64_t*>(l + flag_offset)) != flag) return false;
    std::memcpy(dst, l, valid);
    return true;
  }
#endif
};

}  // namespace collx::proto
