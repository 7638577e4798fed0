// Process ranks: each rank is a process started by a launcher (collxrun, or a
// torchrun/Open MPI-style environment); they share the segment through a
// POSIX shm object. Runs a representative subset of the matrix and exits
// non-zero, naming every failed case, if anything is wrong.
//
//   proc_matrix [quick]      (also quick when COLLX_TEST_SCALE=quick)
#include "../support/run_case.hpp"

#include <collx/communicator.hpp>
#include <collx/process.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>

using namespace collx;
using namespace collx::test;

int main(int argc, char** argv) {
  const char* scale = std::getenv("COLLX_TEST_SCALE");  // "quick" under sanitizers
  const bool quick = (argc > 1 && std::strcmp(argv[1], "quick") == 0) ||
                     (scale != nullptr && std::strcmp(scale, "quick") == 0);
  comm_options opt = comm_options::from_env();
  opt.timeout = std::chrono::seconds(60);
  communicator comm;
  try {
    comm = collx::from_env(opt);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "proc_matrix: %s\n", e.what());
    return 1;
  }
  // The single-copy runs must really read peers by cross-memory attach: where
  // the OS refuses it (the probe at creation), the run is skipped, not passed.
  if (const char* e = std::getenv("COLLX_EXPECT_SINGLE_COPY");
      e != nullptr && std::strcmp(e, "1") == 0 && comm.size() > 1 && !comm.single_copy_enabled()) {
    if (comm.rank() == 0)
      std::printf(
          "proc_matrix: SKIP: single copy is off (cross-memory attach refused, or COLLX_SINGLE_COPY=0)\n");
    return 77;
  }
  const int P = comm.size();
  std::vector<case_desc> cases;
  const coll colls[] = {coll::all_reduce, coll::all_gather, coll::reduce_scatter, coll::broadcast,
                        coll::reduce};
  const std::vector<std::size_t> counts =
      quick ? std::vector<std::size_t>{0, 1, static_cast<std::size_t>(P + 1), 1009}
            : std::vector<std::size_t>{0,
                                       1,
                                       static_cast<std::size_t>(P - 1),
                                       static_cast<std::size_t>(P),
                                       static_cast<std::size_t>(P + 1),
                                       1009,
                                       262147};
  const std::pair<dtype, reduce_op> pairs[] = {
      {dtype::float32, reduce_op::sum},    {dtype::float16, reduce_op::sum},
      {dtype::bfloat16, reduce_op::max},   {dtype::int32, reduce_op::prod},
      {dtype::uint8, reduce_op::min},      {dtype::float64, reduce_op::avg},
      {dtype::int64, reduce_op::bxor},     {dtype::float8_e4m3, reduce_op::sum},
      {dtype::float8_e5m2, reduce_op::max}};
  int k = 0;
  for (coll kind : colls)
    for (auto [dt, op] : pairs) {
      if (quick && k % 3 != 0 && kind != coll::all_reduce) {
        ++k;
        continue;
      }
      add_counts(cases, make_case(kind, dt, op, 0), counts, [&] { return k % P; });
      ++k;
    }
  // The direct algorithm: all_to_all, and one-shot/two-shot all_reduce.
  for (std::size_t n : {std::size_t(0), std::size_t(1), static_cast<std::size_t>(P + 1), std::size_t(70001)})
    for (auto [dt, op] : {std::pair{dtype::float32, reduce_op::sum}, std::pair{dtype::int8, reduce_op::max},
                          std::pair{dtype::bfloat16, reduce_op::avg}}) {
      case_desc c = make_case(coll::all_to_all, dt, reduce_op::sum, n);
      cases.push_back(c);
      c.kind = coll::all_reduce;
      c.op = op;
      c.in_place = n % 2 == 1;
      c.variant = {algo_id::direct, proto_id::simple};
      cases.push_back(c);
    }
  int failed = 0;
  for (const auto& c : cases) {
    const std::string e = run_case(comm, c);
    if (!e.empty()) {
      ++failed;
      std::fprintf(stderr, "FAILED %s\n", e.c_str());
    }
  }
  // Point to point across processes: a ring in both directions in one group,
  // larger than a FIFO, then a barrier.
  try {
    const std::size_t n = 300007;
    const int right = (comm.rank() + 1) % P, left = (comm.rank() + P - 1) % P;
    std::vector<std::int32_t> to_r(n), to_l(n), from_l(n, -1), from_r(n, -1);
    for (std::size_t i = 0; i < n; ++i) {
      to_r[i] = static_cast<std::int32_t>(i * 7 + static_cast<std::size_t>(comm.rank()));
      to_l[i] = static_cast<std::int32_t>(i * 11 + static_cast<std::size_t>(comm.rank()));
    }
    comm.group_start();
    comm.recv(from_l.data(), n, left);
    comm.send(to_r.data(), n, right);
    comm.recv(from_r.data(), n, right);
    comm.send(to_l.data(), n, left);
    comm.group_end();
    comm.barrier();
    for (std::size_t i = 0; i < n; ++i)
      if (from_l[i] != static_cast<std::int32_t>(i * 7 + static_cast<std::size_t>(left)) ||
          from_r[i] != static_cast<std::int32_t>(i * 11 + static_cast<std::size_t>(right))) {
        ++failed;
        std::fprintf(stderr, "FAILED send/recv ring: element %zu is wrong\n", i);
        break;
      }
  } catch (const std::exception& e) {
    ++failed;
    std::fprintf(stderr, "FAILED send/recv ring: %s\n", e.what());
  }
  std::printf("rank %d/%d: %zu cases, %d failed\n", comm.rank(), P, cases.size() + 1, failed);
  return failed == 0 ? 0 : 1;
}
