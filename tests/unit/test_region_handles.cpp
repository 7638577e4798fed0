// cuda/region_handles.hpp: how process ranks agree on the way they share
// their GPU regions. The agreement is plain host code, so it runs here with
// ranks as threads and an in-memory allgather; the ways themselves
// (cuMemCreate, cudaIpc*) are gpu.comm_procs's.
#include <collx/cuda/region_handles.hpp>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace collx;
using gpu::region_handle;

namespace {

constexpr std::uint8_t all_ways = gpu::handle_bit(region_handle::posix_fd) |
                                  gpu::handle_bit(region_handle::fabric) |
                                  gpu::handle_bit(region_handle::cuda_ipc);

/// The bootstrap's allgather among P threads, with a deadline: a rank that
/// votes more or fewer times than the others gets a timeout, not a hang.
class thread_allgather {
 public:
  explicit thread_allgather(int P) : slots_(static_cast<std::size_t>(P)), P_(P) {}
  std::vector<gpu::stage_vote> operator()(int rank, const gpu::stage_vote& v) {
    std::unique_lock lock(m_);
    const std::uint64_t round = round_;
    slots_[static_cast<std::size_t>(rank)] = v;
    if (++arrived_ == P_) {
      done_ = slots_, arrived_ = 0, ++round_;
      cv_.notify_all();
      return done_;
    }
    if (!cv_.wait_for(lock, std::chrono::seconds(5), [&] { return round_ != round; }))
      throw_error(status::timeout, "rank " + std::to_string(rank) + ": the others did not vote");
    return done_;
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  std::vector<gpu::stage_vote> slots_, done_;
  int P_, arrived_ = 0;
  std::uint64_t round_ = 0;
};

/// What a stand-in attempt does on one rank: which stage fails for which way.
struct failure {
  int rank;
  region_handle way;
  int stage;  // 1: export, 2: import
};

/// Per rank: the ways tried, the way taken or the error, and how many of the
/// attempt's objects are alive afterwards (abandoned attempts must release theirs).
struct outcome {
  std::vector<region_handle> tried;
  region_handle way = region_handle::automatic;
  std::string error;
  status code = status::ok;
  std::vector<std::string> refused;  // what on_refused was told
};

std::atomic<int> live_objects{0};
struct region_object {
  region_object() { ++live_objects; }
  region_object(region_object&&) noexcept { ++live_objects; }
  ~region_object() { --live_objects; }
};

/// Runs negotiate on P threads with `fails` injected; each rank keeps the
/// winning attempt's object in `kept`.
std::vector<outcome> run(int P, const std::vector<region_handle>& candidates,
                         const std::vector<failure>& fails, std::vector<region_object>& kept) {
  thread_allgather gather(P);
  std::vector<outcome> out(static_cast<std::size_t>(P));
  kept.clear();
  kept.reserve(static_cast<std::size_t>(P));
  std::mutex kept_lock;
  std::vector<std::thread> ranks;
  for (int r = 0; r < P; ++r)
    ranks.emplace_back([&, r] {
      outcome& o = out[static_cast<std::size_t>(r)];
      auto fails_here = [&](region_handle h, int stage) {
        for (const failure& f : fails)
          if (f.rank == r && f.way == h && f.stage == stage) return true;
        return false;
      };
      auto attempt = [&](region_handle h, const gpu::stage_agreement& agree) {
        o.tried.push_back(h);
        region_object exported;
        agree(fails_here(h, 1) ? std::string("export of ") + gpu::name(h) + " refused" : std::string());
        region_object imported;
        agree(fails_here(h, 2) ? std::string("import of ") + gpu::name(h) + " refused" : std::string());
        std::lock_guard l(kept_lock);
        kept.push_back(std::move(exported));
      };
      try {
        o.way = gpu::negotiate(
            candidates, attempt, [&](const gpu::stage_vote& v) { return gather(r, v); }, "test",
            [&](region_handle h, const std::string& why) {
              o.refused.push_back(std::string(gpu::name(h)) + ": " + why);
            });
      } catch (const error& e) {
        o.error = e.what(), o.code = e.code();
      }
    });
  for (auto& t : ranks) t.join();
  return out;
}

const std::vector<region_handle> every_way = {region_handle::posix_fd, region_handle::fabric,
                                              region_handle::cuda_ipc};

}  // namespace

TEST_CASE("region handles: the candidates follow every rank's offer and ask", "[region_handles]") {
  using V = std::vector<region_handle>;
  const std::uint8_t no_fabric = all_ways & ~gpu::handle_bit(region_handle::fabric);
  const std::uint8_t ipc_only = gpu::handle_bit(region_handle::cuda_ipc);

  CHECK(gpu::handle_candidates({{all_ways, {}}, {all_ways, {}}}, "t") == every_way);
  CHECK(gpu::handle_candidates({{all_ways, {}}, {all_ways, {}}, {no_fabric, {}}}, "t") ==
        V{region_handle::posix_fd, region_handle::cuda_ipc});
  CHECK(gpu::handle_candidates({{ipc_only, {}}, {all_ways, {}}}, "t") == V{region_handle::cuda_ipc});
  // One rank names a way, the others leave it automatic: that way only.
  CHECK(gpu::handle_candidates({{all_ways, {}}, {all_ways, region_handle::fabric}}, "t") ==
        V{region_handle::fabric});

  auto refusal = [](const std::vector<gpu::handle_request>& asks, status expected) {
    try {
      (void)gpu::handle_candidates(asks, "gpu::init_rank");
    } catch (const error& e) {
      CHECK(e.code() == expected);
      return std::string(e.what());
    }
    FAIL("no error");
    return std::string();
  };
  // A way named that some rank's GPU lacks: refused, naming the rank.
  std::string why =
      refusal({{all_ways, region_handle::fabric}, {all_ways, {}}, {no_fabric, {}}}, status::not_supported);
  CHECK(why.find("fabric: rank 2's GPU does not offer it") != std::string::npos);
  CHECK(why.find("rank 0 asked for fabric") != std::string::npos);
  // Ranks naming different ways.
  why = refusal({{all_ways, region_handle::posix_fd}, {all_ways, {}}, {all_ways, region_handle::cuda_ipc}},
                status::invalid_argument);
  CHECK(why.find("rank 0 asked for posix_fd") != std::string::npos);
  CHECK(why.find("rank 2 for cuda_ipc") != std::string::npos);
  // Nothing in common.
  why =
      refusal({{gpu::handle_bit(region_handle::posix_fd), {}}, {gpu::handle_bit(region_handle::fabric), {}}},
              status::not_supported);
  CHECK(why.find("posix_fd: rank 1") != std::string::npos);
  CHECK(why.find("fabric: rank 0") != std::string::npos);
  CHECK(why.find("cuda_ipc: rank 0") != std::string::npos);

  CHECK(gpu::parse_region_handle("fabric", "X") == region_handle::fabric);
  CHECK_THROWS_AS(gpu::parse_region_handle("nvshmem", "X"), error);
}

TEST_CASE("region handles: a way that fails on one rank is left by every rank alike", "[region_handles]") {
  std::vector<region_object> kept;
  SECTION("it works everywhere: the first way, tried once") {
    const auto out = run(3, every_way, {}, kept);
    for (const outcome& o : out) {
      CHECK(o.error.empty());
      CHECK(o.way == region_handle::posix_fd);
      CHECK(o.tried == std::vector<region_handle>{region_handle::posix_fd});
      CHECK(o.refused.empty());
    }
  }
  SECTION("one rank cannot export the first way") {
    const auto out = run(3, every_way, {{1, region_handle::posix_fd, 1}}, kept);
    for (const outcome& o : out) {
      CHECK(o.error.empty());
      CHECK(o.way == region_handle::fabric);
      CHECK(o.tried == std::vector<region_handle>{region_handle::posix_fd, region_handle::fabric});
      REQUIRE(o.refused.size() == 1);
      CHECK(o.refused[0] == "posix_fd: rank 1: export of posix_fd refused");
    }
  }
  SECTION("one rank cannot map the second way, after everyone exported it") {
    const auto out =
        run(4, every_way, {{2, region_handle::posix_fd, 1}, {3, region_handle::fabric, 2}}, kept);
    for (const outcome& o : out) {
      CHECK(o.error.empty());
      CHECK(o.way == region_handle::cuda_ipc);
      CHECK(o.tried == every_way);
      CHECK(o.refused.size() == 2);
    }
  }
  // Abandoned attempts released what they made; the winner's object is kept once per rank.
  CHECK(live_objects.load() == static_cast<int>(kept.size()));
  CHECK(!kept.empty());
}

TEST_CASE("region handles: where every way fails, every rank throws the same error", "[region_handles]") {
  std::vector<region_object> kept;
  const auto out = run(3, every_way,
                       {{0, region_handle::posix_fd, 2},
                        {2, region_handle::fabric, 1},
                        {1, region_handle::cuda_ipc, 1},
                        {2, region_handle::cuda_ipc, 2}},
                       kept);
  CHECK(kept.empty());
  CHECK(live_objects.load() == 0);
  for (const outcome& o : out) {
    CHECK(o.code == status::not_supported);
    CHECK(o.error == out[0].error);
    CHECK(o.tried == every_way);
  }
  const std::string& e = out[0].error;
  CHECK(e.find("posix_fd: rank 0: import of posix_fd refused") != std::string::npos);
  CHECK(e.find("fabric: rank 2: export of fabric refused") != std::string::npos);
  // The first failing rank of a stage is named.
  CHECK(e.find("cuda_ipc: rank 1: export of cuda_ipc refused") != std::string::npos);
}

TEST_CASE("region handles: an error that is not a way's refusal propagates", "[region_handles]") {
  thread_allgather gather(2);
  std::vector<std::string> errors(2);
  std::vector<int> tries(2, 0);
  std::vector<status> codes(2, status::ok);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      try {
        (void)gpu::negotiate(
            every_way,
            [&](region_handle, const gpu::stage_agreement&) {
              ++tries[static_cast<std::size_t>(r)];
              throw_error(status::timeout, "the bootstrap timed out");
            },
            [&](const gpu::stage_vote& v) { return gather(r, v); }, "test");
      } catch (const error& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
        codes[static_cast<std::size_t>(r)] = e.code();
      }
    });
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 2; ++r) {
    CHECK(errors[static_cast<std::size_t>(r)] == "collx: the bootstrap timed out");
    CHECK(codes[static_cast<std::size_t>(r)] == status::timeout);
    CHECK(tries[static_cast<std::size_t>(r)] == 1);
  }
}
