// A warm call allocates nothing: after a first call of the same shape, the
// calls with per-peer arrays (all_to_allv with size_t and with signed counts,
// a send/recv group) and an all_reduce run without a heap allocation on the
// calling thread. This binary replaces the global operator new to count them
// (its own executable, so no other test is affected); the results are checked
// against a reference as every collective test does.
#include <collx/communicator.hpp>

#include <catch2/catch.hpp>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <new>
#include <string>
#include <thread>
#include <vector>

namespace {
thread_local bool counting = false;
thread_local long allocations = 0;
/// Out of line: a debugger's breakpoint here shows what allocated.
[[gnu::noinline]] void count_allocation() { ++allocations; }
}  // namespace

void* operator new(std::size_t n) {
  if (counting) count_allocation();
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return ::operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

using namespace collx;

namespace {

/// Runs body(rank, comm) on one thread per rank; rethrows the first failure.
template <class Body>
void on_ranks(std::vector<communicator>& comms, Body body) {
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(comms.size());
  for (std::size_t r = 0; r < comms.size(); ++r)
    threads.emplace_back([&, r] {
      try {
        body(static_cast<int>(r), comms[r]);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

/// Allocations on this thread while f runs.
template <class F>
long allocations_in(F&& f) {
  allocations = 0;
  counting = true;
  f();
  counting = false;
  return allocations;
}

float value(int rank, std::size_t i) { return static_cast<float>(rank * 1000 + static_cast<int>(i % 997)); }

}  // namespace

TEST_CASE("warm calls allocate nothing: all_to_allv, send/recv groups, all_reduce", "[alloc]") {
  const int P = 3;
  const std::size_t n = 5;  // per peer
  auto comms = communicator::create_thread_group(P);
  std::vector<long> counted(P * 4, -1);
  on_ranks(comms, [&](int r, communicator& c) {
    const auto Pz = static_cast<std::size_t>(P);
    std::vector<float> send(Pz * n), recv(Pz * n + 8);  // 8 guard elements after the output
    for (std::size_t i = 0; i < send.size(); ++i) send[i] = value(r, i);
    std::vector<std::size_t> counts(Pz, n), displs(Pz);
    std::vector<std::int32_t> counts32(Pz, static_cast<std::int32_t>(n)), displs32(Pz);
    for (std::size_t j = 0; j < Pz; ++j) {
      displs[j] = j * n;
      displs32[j] = static_cast<std::int32_t>(j * n);
    }
    const float guard = -7.5f;
    auto reset = [&] { std::fill(recv.begin(), recv.end(), guard); };
    // Block q of the output is rank q's block r.
    auto check_a2a = [&] {
      for (int q = 0; q < P; ++q)
        for (std::size_t i = 0; i < n; ++i)
          REQUIRE(recv[static_cast<std::size_t>(q) * n + i] == value(q, static_cast<std::size_t>(r) * n + i));
      for (std::size_t i = Pz * n; i < recv.size(); ++i) REQUIRE(recv[i] == guard);
    };
    auto a2av = [&] {
      c.all_to_allv(send.data(), counts.data(), displs.data(), recv.data(), counts.data(), displs.data(),
                    dtype::float32);
    };
    auto a2av32 = [&] {
      c.all_to_allv(send.data(), counts32.data(), displs32.data(), recv.data(), counts32.data(),
                    displs32.data(), dtype::float32);
    };
    const int next = (r + 1) % P, prev = (r + P - 1) % P;
    auto group = [&] {
      c.group_start();
      c.send(send.data(), n, dtype::float32, next);
      c.recv(recv.data(), n, dtype::float32, prev);
      c.group_end();
    };
    auto reduce = [&] { c.all_reduce(send.data(), recv.data(), n, dtype::float32, reduce_op::sum); };
    // First calls: whatever grows once.
    for (int warm = 0; warm < 2; ++warm) {
      a2av();
      a2av32();
      group();
      reduce();
    }
    const std::size_t at = static_cast<std::size_t>(r) * 4;
    reset();
    counted[at] = allocations_in(a2av);
    check_a2a();
    reset();
    counted[at + 1] = allocations_in(a2av32);
    check_a2a();
    reset();
    counted[at + 2] = allocations_in(group);
    for (std::size_t i = 0; i < n; ++i) REQUIRE(recv[i] == value(prev, i));
    for (std::size_t i = n; i < recv.size(); ++i) REQUIRE(recv[i] == guard);
    reset();
    counted[at + 3] = allocations_in(reduce);
    for (std::size_t i = 0; i < n; ++i) {
      float sum = 0;
      for (int q = 0; q < P; ++q) sum += value(q, i);
      REQUIRE(recv[i] == sum);
    }
    for (std::size_t i = n; i < recv.size(); ++i) REQUIRE(recv[i] == guard);
  });
  const char* what[4] = {"all_to_allv", "all_to_allv (int32 counts)", "send/recv group", "all_reduce"};
  for (int r = 0; r < P; ++r)
    for (int k = 0; k < 4; ++k) {
      INFO("rank " << r << ", " << what[k]);
      CHECK(counted[static_cast<std::size_t>(r * 4 + k)] == 0);
    }
}
