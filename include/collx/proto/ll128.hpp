// collx/proto/ll128.hpp — the LL128 protocol: 128-byte lines of 120 payload
// bytes and an 8-byte flag, so data carries its own signal at 94 % payload.
// Correct only where a 128-byte line written with the flag last is seen
// whole once its flag is seen (release/acquire on the host; NVLink's in-order
// delivery on the device); a transport declares that with
// in_order_128b_lines, and composing LL128 with one that does not is a
// compile-time error (collx/composition.hpp). See lines.hpp and line_engine.hpp.
#pragma once

#include <collx/proto/channel.hpp>
#include <collx/proto/ids.hpp>
#include <collx/proto/line_engine.hpp>
#include <collx/proto/lines.hpp>

namespace collx::proto {

struct ll128 {
  static constexpr proto_id id = proto_id::ll128;
  static constexpr const char* name = "ll128";

  /// Payload bytes per byte moved through the FIFO.
  static constexpr double payload_efficiency =
      double(ll128_line::payload_bytes) / double(ll128_line::line_bytes);

  /// Lines are stored straight into the peer's FIFO and must arrive whole
  /// (collx/composition.hpp checks both against the transport).
  static constexpr bool needs_direct_load_store = true;
  static constexpr bool needs_in_order_128b_lines = true;

  /// 8 slots × 32 KiB by default (bench/results/protocols.md).
  static constexpr channel_spec channel{name, ll128_line::line_bytes, 32 * 1024, "COLLX_LL128_BUFFSIZE"};

  template <class Exec, class View, std::size_t Connections = default_connections>
  using engine = line_engine<ll128_line, Exec, View, Connections>;
};

}  // namespace collx::proto
