// collx/proto/step_flags.hpp — what one primitive asks of a protocol engine.
//
// Every primitive is one pass over n elements that may receive from a peer,
// combine with a local source, write a local destination and send to a peer.
// The primitives front end (collx/prims.hpp) composes these bits; protocol
// engines implement run<Flags>() once for all of them.
#pragma once

#include <collx/config.hpp>

namespace collx::proto {

enum step_flags : unsigned {
  recv_in = 1u << 0,    // read the incoming FIFO of `from`
  send_out = 1u << 1,   // write the outgoing FIFO to `to`
  src_in = 1u << 2,     // read the local source buffer
  dst_out = 1u << 3,    // write the local destination buffer
  reduce_in = 1u << 4,  // combine incoming data with the local source
  post_op = 1u << 5,    // finish elements (avg's division)
};

COLLX_HOST_DEVICE constexpr bool has(unsigned flags, unsigned bit) { return (flags & bit) != 0; }

}  // namespace collx::proto
