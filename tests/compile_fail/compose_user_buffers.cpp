// Must not compile: an algorithm that reads peers' user buffers in place
// composed with a transport that cannot reach them. With -DCOLLX_CONTROL the
// transport offers user buffer access.
#include <collx/algo/ring.hpp>
#include <collx/composition.hpp>
#include <collx/proto/simple.hpp>
#include <collx/transport/shm.hpp>

struct in_place_ring : collx::algo::ring {
  static constexpr bool needs_user_buffers = true;
};

struct registered_only_transport : collx::transport::shm {
#ifdef COLLX_CONTROL
  static constexpr bool user_buffer_access = true;
#else
  static constexpr bool user_buffer_access = false;
#endif
};

static_assert(collx::check_composable<in_place_ring, collx::proto::simple, registered_only_transport>());

int main() { return 0; }
