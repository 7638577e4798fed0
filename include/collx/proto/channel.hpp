// collx/proto/channel.hpp — what a protocol asks of the FIFOs it runs on.
//
// Every connection has one FIFO ("channel") per compiled protocol, so a
// protocol's lines never sit where another protocol's reader could take them
// for its own. A protocol states its channel's shape here; the transport lays
// out channels by number (proto/list.hpp gives the numbers) and never names a
// protocol, and comm_options reads sizes and environment names from these
// specs. Adding a protocol therefore touches no transport, option or tuner
// file: only the protocol and the compiled list.
#pragma once

#include <cstdint>

namespace collx::proto {

struct channel_spec {
  const char* name;                  // the protocol's name, for messages
  std::uint32_t line_bytes;          // a slot holds whole lines of this many bytes
  std::uint32_t default_slot_bytes;  // slot bytes when nothing is configured
  const char* fifo_bytes_env;        // environment variable: bytes of one FIFO (slots × slot bytes)
};

}  // namespace collx::proto
