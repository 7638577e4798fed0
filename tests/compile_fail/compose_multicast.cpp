// Must not compile: an algorithm written against a switch channel (multicast
// load-reduce and store) on a transport that offers none. With
// -DCOLLX_CONTROL the transport offers multicast.
#include <collx/algo/nvls.hpp>
#include <collx/composition.hpp>
#include <collx/proto/simple.hpp>
#include <collx/transport/shm.hpp>

struct switch_nvls : collx::algo::nvls {
  static constexpr bool needs_multicast = true;
};

struct switch_transport : collx::transport::shm {
#ifdef COLLX_CONTROL
  static constexpr bool multicast = true;
#else
  static constexpr bool multicast = false;
#endif
};

static_assert(collx::check_composable<switch_nvls, collx::proto::simple, switch_transport>());

int main() { return 0; }
