// Must not compile: LL composed explicitly on a socket communicator (the
// proxy cannot store LL's flagged lines into a peer's memory; the gate says
// to use proto::simple). With -DCOLLX_CONTROL: Simple, which compiles; LL128
// and nvls are refused the same way (static_asserts below).
#include <collx/net.hpp>

static_assert(!collx::composable<collx::algo::ring, collx::proto::ll128, collx::transport::proxied>);
static_assert(!collx::composable<collx::algo::nvls, collx::proto::simple, collx::transport::proxied>);
static_assert(collx::composable<collx::algo::ring, collx::proto::simple, collx::transport::proxied>);

void call(collx::net_communicator& c, const float* x, float* y) {
#ifdef COLLX_CONTROL
  collx::all_reduce<collx::algo::ring, collx::proto::simple>(c, x, y, 4, collx::reduce_op::sum);
#else
  collx::all_reduce<collx::algo::ring, collx::proto::ll>(c, x, y, 4, collx::reduce_op::sum);
#endif
}

int main() { return 0; }
