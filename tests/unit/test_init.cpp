// Communicators from a unique id: each rank joins through the bootstrap root,
// rank 0 creates a named shm segment and unlinks it once everyone mapped it.
#include <collx/communicator.hpp>
#include <collx/process.hpp>

#include <catch2/catch.hpp>

#include <dirent.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

using namespace collx;

namespace {
int collx_segments_in_dev_shm() {
  int n = 0;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d))
      if (std::string(e->d_name).rfind("collx-", 0) == 0) ++n;
    closedir(d);
  }
  return n;
}
}  // namespace

TEST_CASE("init_rank from a unique id joins ranks and leaves no segment name behind", "[init]") {
  const int before = collx_segments_in_dev_shm();
  const int P = GENERATE(1, 2, 4);
  const unique_id id = get_unique_id();
  comm_options opt;
  opt.timeout = std::chrono::seconds(30);
  std::atomic<int> good{0};
  std::vector<std::thread> ts;
  for (int r = 0; r < P; ++r)
    ts.emplace_back([&, r] {
      communicator c = init_rank(P, id, r, opt);
      std::vector<double> a(5000), b(5000);
      for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<double>(i % 17) * (r + 1);
      c.all_reduce(a.data(), b.data(), a.size(), reduce_op::sum);
      const double ranks_sum = P * (P + 1) / 2.0;
      bool ok = c.rank() == r && c.size() == P;
      for (std::size_t i = 0; i < b.size(); ++i) ok = ok && b[i] == static_cast<double>(i % 17) * ranks_sum;
      if (ok) ++good;
    });
  for (auto& t : ts) t.join();
  CHECK(good == P);
  CHECK(collx_segments_in_dev_shm() == before);
}

TEST_CASE("ranks with different FIFO geometry are refused by name", "[init]") {
  const unique_id id = get_unique_id();
  std::atomic<int> mismatches{0};
  std::vector<std::thread> ts;
  for (int r = 0; r < 2; ++r)
    ts.emplace_back([&, r] {
      comm_options opt;
      opt.timeout = std::chrono::seconds(20);
      opt.fifo_slots = r == 0 ? 8 : 4;
      try {
        init_rank(2, id, r, opt);
      } catch (const collx::error& e) {
        if (e.code() == status::mismatch && std::string(e.what()).find("FIFOs") != std::string::npos)
          ++mismatches;
      }
    });
  for (auto& t : ts) t.join();
  CHECK(mismatches == 2);
}

TEST_CASE("from_env without a launcher says what it looked for", "[init]") {
  for (const char* v : {"COLLX_RANK", "COLLX_SIZE", "RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
                        "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "SLURM_PROCID", "SLURM_NTASKS"})
    unsetenv(v);
  CHECK_THROWS_WITH(collx::from_env(), Catch::Matchers::Contains("no launcher environment"));
}
