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

  /// LL needs only 8-byte atomic stores into memory both sides can reach
  /// (collx/composition.hpp checks it against the transport).
  static constexpr bool needs_direct_load_store = true;

  /// For latency-bound sizes: 8 slots × 8 KiB by default (bench/results/protocols.md).
  static constexpr channel_spec channel{name, ll_line::line_bytes, 8 * 1024, "COLLX_LL_BUFFSIZE"};

  template <class Exec, class View>
  using engine = line_engine<ll_line, Exec, View>;
};

}  // namespace collx::proto
