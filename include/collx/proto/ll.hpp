// collx/proto/ll.hpp — the LL (low-latency) protocol: every 16-byte line
// carries its own flags, so a receiver uses data the moment it lands, with
// no counter round trip; half of each line is payload. See lines.hpp for the
// line format and line_engine.hpp for the step logic.
#pragma once

#include <collx/proto/channel.hpp>
#include <collx/proto/ids.hpp>
#include <collx/proto/line_engine.hpp>
#include <collx/proto/lines.hpp>

namespace collx::proto {

struct ll {
  static constexpr proto_id id = proto_id::ll;
  static constexpr const char* name = "ll";

  /// Payload bytes per byte moved through the FIFO.
  static constexpr double payload_efficiency = double(ll_line::payload_bytes) / double(ll_line::line_bytes);

  /// Its readers find lines by their flags: the writer's 8-byte atomic
  /// stores must land where the reader polls (direct_load_store), or a proxy
  /// must deliver each step whole before its tail (delivers_whole_steps),
  /// which the reader then waits for (collx/composition.hpp checks it).
  static constexpr bool needs_flagged_lines = true;

  /// For latency-bound sizes: 8 slots × 8 KiB by default (bench/results/protocols.md).
  static constexpr channel_spec channel{name, ll_line::line_bytes, 8 * 1024, "COLLX_LL_BUFFSIZE"};

  template <class Exec, class View, std::size_t Connections = default_connections>
  using engine = line_engine<ll_line, Exec, View, Connections>;
};

}  // namespace collx::proto
