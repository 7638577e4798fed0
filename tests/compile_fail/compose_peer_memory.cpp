// Must not compile: nvls, which loads and stores peers' registered buffers,
// composed with a transport that does not map them. With -DCOLLX_CONTROL the
// transport offers peer buffer access.
#include <collx/algo/nvls.hpp>
#include <collx/composition.hpp>
#include <collx/proto/simple.hpp>
#include <collx/transport/shm.hpp>

struct fifo_only_transport : collx::transport::shm {
#ifdef COLLX_CONTROL
  static constexpr bool peer_buffer_access = true;
#else
  static constexpr bool peer_buffer_access = false;
#endif
};

static_assert(collx::check_composable<collx::algo::nvls, collx::proto::simple, fifo_only_transport>());

int main() { return 0; }
