// collx/options.hpp — communicator options and their environment overrides.
//
// Environment (read by comm_options::from_env, applied over the defaults):
//   COLLX_TIMEOUT      seconds every wait may take before it fails (default 120)
//   COLLX_BUFFSIZE     bytes of one connection's FIFO (slots × slot bytes)
//   COLLX_NSLOTS       number of step slots per FIFO (default 8)
//   COLLX_ALGO         algorithms the automatic choice may use (NCCL list syntax,
//                      see collx/selection.hpp), e.g. "ring,tree", "^nvls",
//                      "allreduce:tree;allgather:ring"
//   COLLX_PROTO        protocols likewise, e.g. "simple"
//   COLLX_DETERMINISTIC 1: all_reduce results bitwise identical on every rank
//                      and across calls (0 or unset: no such promise)
// Bad values throw collx::error naming the variable.
#pragma once

#include <collx/error.hpp>
#include <collx/selection.hpp>
#include <collx/variants.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace collx {

struct comm_options {
  /// How long any wait inside a collective may take before the call fails
  /// with status::timeout and aborts the communicator on every rank.
  std::chrono::milliseconds timeout{120'000};
  /// FIFO geometry per directed connection. The default (8 × 64 KiB) keeps a
  /// ring's working set in L2 while giving each primitive call 4 slots to
  /// pipeline; measured with collx-perf all_reduce on 2 processes.
  std::uint32_t fifo_slots = 8;
  std::uint32_t slot_bytes = 64 * 1024;
  /// How long a wait busy-polls before it starts yielding the CPU. 0 = choose:
  /// long (100 µs) when this node's ranks fit on the CPUs this process may
  /// use, so a running peer is answered without a context switch; short (2 µs)
  /// when ranks outnumber CPUs, so a waiting rank hands its core to the peer it
  /// waits for. COLLX_SPIN_US overrides.
  std::chrono::nanoseconds spin{0};
  /// Variant used when a call does not name one.
  variant_choice variant{};
  /// What the automatic choice may pick, per collective (COLLX_ALGO, COLLX_PROTO).
  selection allowed = selection::all();
  /// all_reduce results bitwise identical on every rank and across repeated
  /// calls: the automatic choice then only picks algorithms whose
  /// `deterministic` trait is true (each element's final value is computed once,
  /// by one rank, in a fixed order, then copied), and naming any other
  /// algorithm for all_reduce is an error. COLLX_DETERMINISTIC=1.
  bool deterministic = false;

  /// Defaults overridden by COLLX_* environment variables.
  static comm_options from_env() {
    comm_options o;
    if (const char* v = std::getenv("COLLX_TIMEOUT")) {
      char* end = nullptr;
      const double s = std::strtod(v, &end);
      require(end != v && *end == '\0' && s > 0 && s < 1e7, "COLLX_TIMEOUT",
              std::string("expected a positive number of seconds, got '") + v + "'");
      o.timeout = std::chrono::milliseconds(static_cast<long long>(s * 1000));
    }
    if (const char* v = std::getenv("COLLX_SPIN_US"))
      o.spin = std::max<std::chrono::nanoseconds>(
          std::chrono::microseconds(parse_u32("COLLX_SPIN_US", v, 0, 10'000'000)),
          std::chrono::nanoseconds(1));  // 0 asks for no spinning, not "choose"
    if (const char* v = std::getenv("COLLX_NSLOTS")) o.fifo_slots = parse_u32("COLLX_NSLOTS", v, 2, 1024);
    if (const char* v = std::getenv("COLLX_BUFFSIZE")) {
      const std::uint32_t b = parse_u32("COLLX_BUFFSIZE", v, 1024, 1u << 30);
      require(b % o.fifo_slots == 0 && (b / o.fifo_slots) % 128 == 0, "COLLX_BUFFSIZE",
              "must be a multiple of " + std::to_string(o.fifo_slots) + " slots × 128 bytes, got " + v);
      o.slot_bytes = b / o.fifo_slots;
    }
    if (const char* v = std::getenv("COLLX_ALGO")) o.allowed.restrict_algos(v);
    if (const char* v = std::getenv("COLLX_PROTO")) o.allowed.restrict_protos(v);
    if (const char* v = std::getenv("COLLX_DETERMINISTIC"))
      o.deterministic = parse_u32("COLLX_DETERMINISTIC", v, 0, 1) == 1;
    return o;
  }

  /// Throws collx::error if the geometry cannot work.
  void validate() const {
    require(timeout.count() > 0, "comm_options", "timeout must be positive");
    require(fifo_slots >= 2 && fifo_slots <= 1024, "comm_options",
            "fifo_slots must be in [2, 1024], got " + std::to_string(fifo_slots));
    require(slot_bytes >= 128 && slot_bytes % 128 == 0 && slot_bytes <= (1u << 28), "comm_options",
            "slot_bytes must be a multiple of 128 in [128, 256 MiB], got " + std::to_string(slot_bytes));
  }

 private:
  static std::uint32_t parse_u32(const char* var, const char* v, std::uint64_t lo, std::uint64_t hi) {
    char* end = nullptr;
    const unsigned long long x = std::strtoull(v, &end, 10);
    require(end != v && *end == '\0' && x >= lo && x <= hi && v[0] != '-', var,
            std::string("expected an integer in [") + std::to_string(lo) + ", " + std::to_string(hi) +
                "], got '" + v + "'");
    return static_cast<std::uint32_t>(x);
  }
};

}  // namespace collx
