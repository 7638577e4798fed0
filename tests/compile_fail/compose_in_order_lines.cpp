// Must not compile: LL128 composed with a transport whose 128-byte lines may
// arrive out of order. With -DCOLLX_CONTROL the transport declares ordered
// lines and the file compiles (so the failure is the one intended).
#include <collx/algo/ring.hpp>
#include <collx/composition.hpp>
#include <collx/proto/ll128.hpp>
#include <collx/transport/shm.hpp>

struct unordered_transport : collx::transport::shm {
#ifdef COLLX_CONTROL
  static constexpr bool in_order_128b_lines = true;
#else
  static constexpr bool in_order_128b_lines = false;
#endif
};

static_assert(collx::check_composable<collx::algo::ring, collx::proto::ll128, unordered_transport>());
static_assert(collx::composable<collx::algo::ring, collx::proto::ll128, unordered_transport> ==
              unordered_transport::in_order_128b_lines);

int main() { return 0; }
