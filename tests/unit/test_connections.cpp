// How many connections a primitives object caches: an algorithm may state
// it (Algo::connections), run_stripe reads it (connections_of), and every
// protocol engine that takes the number sizes its cache with it
// (proto::engine_for), while an engine without that parameter is used as it
// is. The caches are indexed by peer at run time, so on a GPU they live in
// every thread's local memory; what the ring runs with is checked at run
// time by the matrix tests, this checks that the number arrives.
#include <collx/algo/direct.hpp>
#include <collx/algo/ring.hpp>
#include <collx/algo/tree.hpp>
#include <collx/exec/host.hpp>
#include <collx/prims.hpp>
#include <collx/proto/list.hpp>
#include <collx/proto/runtime.hpp>
#include <collx/reduce_op.hpp>
#include <collx/stripes.hpp>
#include <collx/transport/shm.hpp>

#include <catch2/catch.hpp>

#include <type_traits>

using namespace collx;

namespace {

using red = reducer<float, reduce_op::sum>;
template <class Proto, std::size_t N>
using prims_of = prims<Proto, exec::host, transport::shm_view, float, red, N>;

/// A protocol whose engine takes no connection count: used as it is.
struct fixed_protocol {
  template <class Exec, class View>
  struct engine {
    char state[40];
  };
};

}  // namespace

TEST_CASE("connections: what an algorithm states reaches the protocol engine's cache", "[connections]") {
  STATIC_REQUIRE(connections_of<algo::ring> == 1);
  STATIC_REQUIRE(connections_of<algo::tree> == proto::default_connections);
  STATIC_REQUIRE(connections_of<algo::direct> == proto::default_connections);

  STATIC_REQUIRE(std::is_same_v<proto::engine_for<proto::simple, exec::host, transport::shm_view, 1>,
                                proto::simple::engine<exec::host, transport::shm_view, 1>>);
  STATIC_REQUIRE(std::is_same_v<proto::engine_for<fixed_protocol, exec::host, transport::shm_view, 1>,
                                fixed_protocol::engine<exec::host, transport::shm_view>>);

  // One connection each way against eight: the difference is 7 receiving
  // and 7 sending entries, for every protocol and for the runtime choice
  // among them (which holds one engine of each).
  using any_protocol = proto::runtime<proto::simple, proto::ll, proto::ll128>;
  constexpr std::size_t seven_each_way = 7 * (sizeof(proto::recv_conn) + sizeof(proto::send_conn));
  CHECK(sizeof(prims_of<proto::simple, 8>) - sizeof(prims_of<proto::simple, 1>) == seven_each_way);
  CHECK(sizeof(prims_of<proto::ll, 8>) - sizeof(prims_of<proto::ll, 1>) == seven_each_way);
  CHECK(sizeof(prims_of<proto::ll128, 8>) - sizeof(prims_of<proto::ll128, 1>) == seven_each_way);
  CHECK(sizeof(prims_of<any_protocol, 8>) - sizeof(prims_of<any_protocol, 1>) == seven_each_way);
}
