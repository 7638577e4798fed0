// Must not compile: LL128 composed with a transport that does not deliver
// 128-byte lines in order. With -DCOLLX_CONTROL the transport does, and the
// file must compile (so the failure is the one intended).
#include <collx/proto/ll128.hpp>

struct unordered_transport {
  static constexpr bool direct_load_store = true;
#ifdef COLLX_CONTROL
  static constexpr bool in_order_128b_lines = true;
#else
  static constexpr bool in_order_128b_lines = false;
#endif
};

static_assert(collx::proto::ll128::check_transport<unordered_transport>());
static_assert(collx::proto::ll128::usable_with<unordered_transport> ==
              (unordered_transport::in_order_128b_lines));

int main() { return 0; }
