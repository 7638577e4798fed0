// The ib transport on a real RDMA device (rdma-core's provider): two ranks
// as two threads of this process, both on the first device (or
// COLLX_IB_HCA), the collective matrix of tests/net/net_matrix.hpp at small
// sizes. Exits 77 (skipped) where collx was built without libibverbs or no
// device is listed (as `ibv_devices` would show).
#include <collx/net.hpp>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "net_matrix.hpp"

int main() {
#if !defined(COLLX_HAVE_IBVERBS)
  std::puts("SKIP: built without libibverbs");
  return 77;
#else
  const auto devices = collx::net::verbs::system_provider().devices(nullptr);
  if (devices.empty()) {
    std::puts("SKIP: no RDMA device");
    return 77;
  }
  const collx::unique_id id = collx::get_unique_id();
  net_matrix::tally t[2];
  std::string errors[2];
  auto rank = [&](int r) {
    try {
      collx::net::net_options no = collx::net::net_options::from_env();
      no.transport = collx::net::net_options::kind::ib;
      collx::net_communicator c = collx::net::init_rank(2, id, r, collx::comm_options::from_env(), no);
      net_matrix::check_matrix(c, {1, 7, 1000, 65537, 300000}, t[r]);
      c.destroy();
    } catch (const std::exception& e) {
      errors[r] = e.what();
    }
  };
  std::thread t1(rank, 1);
  rank(0);
  t1.join();
  int rc = 0;
  for (int r = 0; r < 2; ++r) {
    std::printf("rank %d on %s: %d checks, %d failures %s%s\n", r, devices.front().name.c_str(), t[r].checks,
                t[r].failures, errors[r].empty() ? "" : "error: ", errors[r].c_str());
    rc |= !errors[r].empty() || t[r].failures != 0 || t[r].checks == 0;
  }
  return rc;
#endif
}
