// Must not compile: LL128, which stores its lines straight into the peer's
// FIFO, composed with a transport whose memory the ranks cannot load and
// store. With -DCOLLX_CONTROL the transport offers direct load/store.
#include <collx/algo/ring.hpp>
#include <collx/composition.hpp>
#include <collx/proto/ll128.hpp>
#include <collx/proto/simple.hpp>
#include <collx/transport/shm.hpp>

struct remote_transport : collx::transport::shm {
#ifdef COLLX_CONTROL
  static constexpr bool direct_load_store = true;
#else
  static constexpr bool direct_load_store = false;
#endif
};

// Simple needs nothing, so it composes either way.
static_assert(collx::composable<collx::algo::ring, collx::proto::simple, remote_transport>);
static_assert(collx::check_composable<collx::algo::ring, collx::proto::ll128, remote_transport>());

int main() { return 0; }
