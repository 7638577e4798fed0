// Must not compile: an algorithm that hands its transfers to the transport's
// proxy, on the shm transport, whose ranks move bytes themselves. With
// -DCOLLX_CONTROL the transport moves bytes through a proxy.
#include <collx/algo/ring.hpp>
#include <collx/composition.hpp>
#include <collx/proto/simple.hpp>
#include <collx/transport/shm.hpp>

struct proxied_ring : collx::algo::ring {
  static constexpr bool needs_proxy = true;
};

#ifdef COLLX_CONTROL
struct proxy_transport : collx::transport::shm {
  static constexpr bool needs_proxy = true;
};
#else
using proxy_transport = collx::transport::shm;
#endif

static_assert(collx::check_composable<proxied_ring, collx::proto::simple, proxy_transport>());

int main() { return 0; }
