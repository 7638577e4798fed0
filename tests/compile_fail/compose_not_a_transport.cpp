// Must not compile: a transport that does not state its capabilities (here:
// no `multicast`) is not a collx::transport, and the gate says so before it
// reads any rule. With -DCOLLX_CONTROL the capability is declared.
#include <collx/algo/ring.hpp>
#include <collx/composition.hpp>
#include <collx/proto/simple.hpp>
#include <collx/transport/shm.hpp>

struct partial_transport {
  static constexpr const char* name = "partial";
  static constexpr bool direct_load_store = true;
  static constexpr bool in_order_128b_lines = true;
  static constexpr bool peer_buffer_access = true;
  static constexpr bool user_buffer_access = true;
#ifdef COLLX_CONTROL
  static constexpr bool multicast = false;
#endif
  static constexpr bool needs_proxy = false;
  using view = collx::transport::shm_view;
};

static_assert(collx::check_composable<collx::algo::ring, collx::proto::simple, partial_transport>());

int main() { return 0; }
