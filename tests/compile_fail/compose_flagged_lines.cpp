// Must not compile: LL, whose readers find lines by their flags, composed
// with a transport that neither lets the writer store lines where the reader
// polls (direct_load_store) nor delivers each step whole before its tail
// (delivers_whole_steps). With -DCOLLX_CONTROL the transport delivers whole
// steps, as a proxy does, and LL composes.
#include <collx/algo/ring.hpp>
#include <collx/composition.hpp>
#include <collx/proto/ll.hpp>
#include <collx/proto/simple.hpp>
#include <collx/transport/shm.hpp>

struct remote_transport : collx::transport::shm {
  static constexpr bool direct_load_store = false;
#ifdef COLLX_CONTROL
  static constexpr bool delivers_whole_steps = true;
#endif
};

static_assert(collx::composable<collx::algo::ring, collx::proto::simple, remote_transport>);
static_assert(collx::check_composable<collx::algo::ring, collx::proto::ll, remote_transport>());

int main() { return 0; }
