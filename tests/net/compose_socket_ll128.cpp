// Must not compile: LL128 composed explicitly on a socket communicator (its
// 128-byte lines need peer load/store and in-order delivery, which no proxy
// gives; the gate says which capability is missing). With -DCOLLX_CONTROL:
// LL, whose reader waits for the whole step a proxy delivers, and Simple
// compile; nvls is refused (static_asserts below).
#include <collx/net.hpp>

static_assert(!collx::composable<collx::algo::ring, collx::proto::ll128, collx::transport::proxied>);
static_assert(!collx::composable<collx::algo::nvls, collx::proto::simple, collx::transport::proxied>);
static_assert(collx::composable<collx::algo::ring, collx::proto::simple, collx::transport::proxied>);
static_assert(collx::composable<collx::algo::ring, collx::proto::ll, collx::transport::proxied>);

void call(collx::net_communicator& c, const float* x, float* y) {
#ifdef COLLX_CONTROL
  collx::all_reduce<collx::algo::ring, collx::proto::ll>(c, x, y, 4, collx::reduce_op::sum);
  collx::all_reduce<collx::algo::ring, collx::proto::simple>(c, x, y, 4, collx::reduce_op::sum);
#else
  collx::all_reduce<collx::algo::ring, collx::proto::ll128>(c, x, y, 4, collx::reduce_op::sum);
#endif
}

int main() { return 0; }
