// collx/options.hpp — communicator options and their environment overrides.
//
// Environment (read by comm_options::from_env, applied over the defaults):
//   COLLX_TIMEOUT      seconds every wait may take before it fails (default 120)
//   COLLX_NSLOTS          number of step slots per FIFO (default 8, every protocol)
//   COLLX_BUFFSIZE        bytes of one connection's Simple FIFO (slots × slot bytes)
//   COLLX_LL_BUFFSIZE     bytes of one connection's LL FIFO (lines of 16 bytes)
//   COLLX_LL128_BUFFSIZE  bytes of one connection's LL128 FIFO (lines of 128 bytes)
//                         (each protocol names its variable in its channel spec,
//                         proto/channel.hpp)
//   COLLX_SPIN_US         µs a wait busy-polls before yielding (default: chosen)
//   COLLX_SLEEP           0: never sleep on a futex (when ranks outnumber CPUs, or
//                         on a proxied transport), keep yielding
//   COLLX_SINGLE_COPY     0: never read peers' user buffers in place
//   COLLX_SINGLE_COPY_MIN bytes from which calls read peers' buffers in place
//   COLLX_CHECK_CALLS     0: skip the per-call mismatch check
//   COLLX_CHECK_POINTERS  0: do not ask a loaded CUDA driver whether buffers
//                         are GPU memory (see comm_options::check_pointers)
//   COLLX_ALGO            algorithms the automatic choice may use (NCCL list
//                         syntax, see collx/selection.hpp), e.g. "ring,tree",
//                         "^nvls", "allreduce:tree;allgather:ring"
//   COLLX_PROTO           protocols likewise, e.g. "simple,ll"
//   COLLX_DETERMINISTIC   1: all_reduce results bitwise identical on every rank
//                         and across calls (0 or unset: no such promise)
//   COLLX_TUNE_FILE       the tuner's profile: a file collx-probe --save wrote,
//                         "builtin", or "preset:NAME" (see collx/tune/active.hpp)
//   COLLX_TUNE_ONLINE     N >= 2: the automatic choice times the model's N
//                         best variants on the first calls of each size class
//                         and keeps the fastest (collx/comm/measured_choice.hpp);
//                         0 or 1 (default): the model's pick alone
//   COLLX_CONTENTION      what the automatic choice assumes about CPU contention:
//                         "auto" (default: measured and agreed by the ranks,
//                         collx/comm/contention.hpp), "off" (none), or a fixed
//                         share of CPU time lost to other tasks in [0, 0.9]
//   COLLX_CONTENTION_INTERVAL  calls between contention decision points
//                         (default 4096, after early ones at calls 64, 320, 1344)
// Bad values throw collx::error naming the variable.
#pragma once

#include <collx/error.hpp>
#include <collx/proto/list.hpp>
#include <collx/selection.hpp>
#include <collx/variants.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

namespace collx {

struct comm_options {
  /// How long any wait inside a collective may take before the call fails
  /// with status::timeout and aborts the communicator on every rank.
  std::chrono::milliseconds timeout{120'000};
  /// FIFO geometry per directed connection: every protocol's FIFO (channel)
  /// has fifo_slots slots; slot_bytes[channel_of<P>] is protocol P's slot
  /// size, by default the one its channel spec states (proto/*.hpp say why).
  static constexpr std::uint32_t default_fifo_slots = 8;
  std::uint32_t fifo_slots = default_fifo_slots;
  std::array<std::uint32_t, proto::channel_count> slot_bytes = default_slot_bytes();

  /// Protocol P's slot bytes: opt.slot_bytes_of<proto::ll>() = 4096.
  template <class P>
  std::uint32_t& slot_bytes_of() {
    return slot_bytes[proto::channel_of<P>];
  }
  template <class P>
  std::uint32_t slot_bytes_of() const {
    return slot_bytes[proto::channel_of<P>];
  }
  /// Value every connection's step counters start from. Only tests change it
  /// (to run across the wrap point of the LL flag); every rank must agree.
  std::uint64_t step_origin = 0;
  /// How long a wait busy-polls before it starts yielding the CPU. 0 = choose:
  /// long (100 µs) when this node's ranks fit on the CPUs this process may
  /// use, so a running peer is answered without a context switch; none (a
  /// wait polls 4 times, then yields) when ranks outnumber CPUs, so a waiting
  /// rank hands its core at once to the peer it most likely waits for
  /// (bench/results/oversubscribed_spin.md: the former 2 µs spin made an
  /// 8-byte all_reduce on 4 ranks of 2 CPUs 2.5× slower). COLLX_SPIN_US overrides.
  std::chrono::nanoseconds spin{0};
  /// When ranks outnumber CPUs, or on a proxied transport (whose proxy thread
  /// needs the CPU a yielding rank would take), a wait that has yielded a few
  /// times sleeps on a futex until the peer (or the proxy) it waits for
  /// publishes (COLLX_SLEEP=0: keep yielding instead). Peers ring the
  /// doorbell either way.
  bool sleep = true;
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
  /// Single copy: calls of at least single_copy_min_bytes (all_reduce: count
  /// bytes; all_gather, reduce_scatter: total bytes) let algorithms that can
  /// (nvls) read peers' user buffers in place instead of staging them through
  /// shared memory; in all_to_allv and send/recv (algo::direct) a message is
  /// read from its sender's buffer from 8 times single_copy_min_bytes, or
  /// from single_copy_min_bytes itself under contention
  /// (stream_read_in_place_bytes). Process ranks need cross-memory
  /// attach, which collx probes at creation; where the OS refuses it, or any rank sets single_copy = false,
  /// every rank stages. Every rank must use the same threshold. COLLX_SINGLE_COPY=0|1,
  /// COLLX_SINGLE_COPY_MIN=<bytes>.
  bool single_copy = true;
  /// Unset: single_copy_min_for() picks by how peers' buffers are read.
  std::optional<std::uint64_t> single_copy_min_bytes;
  /// The single-copy threshold in effect: single_copy_min_bytes where set,
  /// else 256 KiB where peers' buffers are read by cross-memory attach
  /// (process ranks: one system call per read, which loses to the two
  /// cache-resident FIFO copies below that, bench/results/p2p_single_copy_*)
  /// and 0 where they are loads (thread ranks: the automatic choice alone
  /// decides, and loads won from a few KiB, bench/results/single_copy_loads_*).
  std::uint64_t single_copy_min_for(bool loads) const {
    return single_copy_min_bytes.value_or(loads ? std::uint64_t{0} : std::uint64_t{256} * 1024);
  }
  /// At the end of every call, compare its description (collective, dtype,
  /// op, root, count, variant) with the previous rank's, so a mismatch that
  /// still moves the same bytes (sum on one rank, max on another) fails at
  /// once instead of returning wrong values. Costs one cross-core cache-line
  /// read per call, a large part of a small call's latency (see
  /// bench/results). Off: mismatches are found only where they make a wait
  /// slow (the periodic watch), e.g. different counts. COLLX_CHECK_CALLS=0|1.
  bool check_calls = true;
  /// Refuse buffers in GPU memory: where a CUDA driver is loaded in the
  /// process, each new buffer pointer is classified once by the driver
  /// (collx/detail/memory_kind.hpp) and a cudaMalloc'd one fails the call
  /// with status::invalid_argument before any byte moves, instead of a crash.
  /// Pinned, registered and managed memory are accepted. Off: for machines
  /// whose CPUs may address GPU memory (hardware-coherent systems), or to
  /// save the driver query on programs that never reuse a buffer.
  /// COLLX_CHECK_POINTERS=0|1.
  bool check_pointers = true;
  /// The automatic choice's model profile: a JSON file written by
  /// collx-probe --save, "builtin" (the transport's built-in preset), or
  /// "preset:NAME"; empty: COLLX_TUNE_FILE, else the default location, else
  /// the built-in preset (collx/tune/active.hpp). Every rank must use the
  /// same profile, or their choices differ.
  std::string tune_file;
  /// The measured choice (collx/comm/measured_choice.hpp): with N >= 2 the
  /// automatic choice runs each of the model's N best variants (at most
  /// max_tune_online) on the first calls of every size class (a power of two
  /// of bytes, per collective and contention: 3·N·2 calls, 3·N·11 up to
  /// 64 KiB) and keeps the one whose slowest rank's median was least, agreed
  /// by all ranks. 0 or 1: the model's pick alone. Every rank must use the
  /// same value (the per-call check reports calls that differ).
  /// COLLX_TUNE_ONLINE.
  std::uint32_t tune_online = 0;
  static constexpr std::uint32_t max_tune_online = 8;
  /// Replaces the measured time of a timed call of the measured choice
  /// (tests): µs that rank `rank` reports for variant `v`, given `measured_us`.
  double (*tune_online_time)(int rank, variant_choice v, double measured_us) = nullptr;
  /// Contention: the share of CPU time the ranks lose to other tasks, which
  /// the automatic choice prices (tune/model.hpp: pipelined schedules need
  /// both ends of a connection on a CPU at once, single-copy ones only the
  /// reader). Negative: measured from the ranks' run-queue delay and agreed
  /// by all ranks at decision points (comm/contention.hpp); in [0, 0.9]: this
  /// fixed share (0: ignore contention). Every rank must use the same value.
  /// COLLX_CONTENTION=auto|off|<share>.
  double contention = -1;
  /// Replaces the run-queue measurement of `contention` (tests): the share
  /// rank `rank` measured at decision point `point` (negative: unknown).
  double (*contention_probe)(int rank, std::uint64_t point) = nullptr;
  /// Calls between contention decision points, after the first three
  /// (at calls 64, 320 and 1344; comm/contention.hpp). Every rank must use
  /// the same value.
  /// COLLX_CONTENTION_INTERVAL.
  std::uint32_t contention_interval = 4096;

  /// Defaults overridden by COLLX_* environment variables.
  COLLX_COLD static comm_options from_env() {
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
    for (int c = 0; c < proto::channel_count; ++c) {
      const proto::channel_spec& ch = proto::channels[static_cast<std::size_t>(c)];
      auto& b = o.slot_bytes[static_cast<std::size_t>(c)];
      b = buffsize_env(ch.fifo_bytes_env, o.fifo_slots, ch.line_bytes, b);
    }
    if (const char* v = std::getenv("COLLX_ALGO")) o.allowed.restrict_algos(v);
    if (const char* v = std::getenv("COLLX_PROTO")) o.allowed.restrict_protos(v);
    if (const char* v = std::getenv("COLLX_SLEEP")) o.sleep = parse_u32("COLLX_SLEEP", v, 0, 1) == 1;
    if (const char* v = std::getenv("COLLX_SINGLE_COPY"))
      o.single_copy = parse_u32("COLLX_SINGLE_COPY", v, 0, 1) == 1;
    if (const char* v = std::getenv("COLLX_SINGLE_COPY_MIN"))
      o.single_copy_min_bytes = parse_u32("COLLX_SINGLE_COPY_MIN", v, 0, 0xffffffffu);
    if (const char* v = std::getenv("COLLX_CHECK_CALLS"))
      o.check_calls = parse_u32("COLLX_CHECK_CALLS", v, 0, 1) == 1;
    if (const char* v = std::getenv("COLLX_CHECK_POINTERS"))
      o.check_pointers = parse_u32("COLLX_CHECK_POINTERS", v, 0, 1) == 1;
    if (const char* v = std::getenv("COLLX_DETERMINISTIC"))
      o.deterministic = parse_u32("COLLX_DETERMINISTIC", v, 0, 1) == 1;
    if (const char* v = std::getenv("COLLX_TUNE_FILE")) {
      require(*v != '\0', "COLLX_TUNE_FILE", "expected a profile file, 'builtin' or 'preset:NAME', got ''");
      o.tune_file = v;
    }
    if (const char* v = std::getenv("COLLX_TUNE_ONLINE"))
      o.tune_online = parse_u32("COLLX_TUNE_ONLINE", v, 0, max_tune_online);
    if (const char* v = std::getenv("COLLX_CONTENTION")) o.contention = parse_contention(v);
    if (const char* v = std::getenv("COLLX_CONTENTION_INTERVAL"))
      o.contention_interval = parse_u32("COLLX_CONTENTION_INTERVAL", v, 1, 1u << 30);
    return o;
  }

  /// Throws collx::error if the geometry cannot work.
  COLLX_COLD void validate() const {
    require(timeout.count() > 0, "comm_options", "timeout must be positive");
    require(contention < 0 || contention <= max_contention, "comm_options",
            "contention must be negative (measured) or in [0, 0.9], got " + std::to_string(contention));
    require(contention_interval >= 1, "comm_options", "contention_interval must be at least 1");
    require(tune_online <= max_tune_online, "comm_options",
            "tune_online must be at most " + std::to_string(max_tune_online) + " variants, got " +
                std::to_string(tune_online));
    require(fifo_slots >= 2 && fifo_slots <= 1024, "comm_options",
            "fifo_slots must be in [2, 1024], got " + std::to_string(fifo_slots));
    for (int c = 0; c < proto::channel_count; ++c) {
      const proto::channel_spec& ch = proto::channels[static_cast<std::size_t>(c)];
      const std::uint32_t b = slot_bytes[static_cast<std::size_t>(c)], line = ch.line_bytes;
      require(b >= line && b % line == 0 && b <= (1u << 28), "comm_options", [&] {
        return std::string(ch.name) + " slot bytes (slot_bytes_of<proto::" + ch.name +
               ">()) must be a multiple of " + std::to_string(line) + " (one " + ch.name + " line) in [" +
               std::to_string(line) + ", 256 MiB], got " + std::to_string(b);
      });
    }
  }

  static constexpr double max_contention = 0.9;

  /// The default bytes per slot of each protocol channel (proto::channels).
  static constexpr std::array<std::uint32_t, proto::channel_count> default_slot_bytes() {
    std::array<std::uint32_t, proto::channel_count> b{};
    for (int c = 0; c < proto::channel_count; ++c)
      b[static_cast<std::size_t>(c)] = proto::channels[static_cast<std::size_t>(c)].default_slot_bytes;
    return b;
  }

 private:
  COLLX_COLD static double parse_contention(const char* v) {
    const std::string s = v;
    if (s == "auto") return -1;
    if (s == "off") return 0;
    char* end = nullptr;
    const double x = std::strtod(v, &end);
    require(end != v && *end == '\0' && x >= 0 && x <= max_contention, "COLLX_CONTENTION",
            std::string("expected auto, off or a share in [0, 0.9], got '") + v + "'");
    return x;
  }

  // A FIFO size from the environment: total bytes, split into `slots` slots of
  // whole lines of `line` bytes.
  COLLX_COLD static std::uint32_t buffsize_env(const char* var, std::uint32_t slots, std::uint32_t line,
                                               std::uint32_t fallback) {
    const char* v = std::getenv(var);
    if (v == nullptr) return fallback;
    const std::uint32_t b = parse_u32(var, v, std::uint64_t(slots) * line, 1u << 30);
    require(b % slots == 0 && (b / slots) % line == 0, var,
            "must be a multiple of " + std::to_string(slots) + " slots × " + std::to_string(line) +
                " bytes, got " + v);
    return b / slots;
  }

  COLLX_COLD static std::uint32_t parse_u32(const char* var, const char* v, std::uint64_t lo,
                                            std::uint64_t hi) {
    char* end = nullptr;
    const unsigned long long x = std::strtoull(v, &end, 10);
    require(end != v && *end == '\0' && x >= lo && x <= hi && v[0] != '-', var,
            std::string("expected an integer in [") + std::to_string(lo) + ", " + std::to_string(hi) +
                "], got '" + v + "'");
    return static_cast<std::uint32_t>(x);
  }
};

}  // namespace collx
