// The host communicator refuses buffers in GPU memory with a clear error
// before any byte moves (comm_options::check_pointers), and asks the driver
// once per buffer. The driver is a stand-in (fake_cuda_driver.cpp) loaded
// from COLLX_FAKE_DRIVER: its ranges say which host buffers to call device
// memory, so the refused buffers are real host memory and the test can check
// that nothing was written to them.
#include <collx/communicator.hpp>
#include <collx/detail/memory_kind.hpp>

#include <catch2/catch.hpp>

#include <dlfcn.h>

#include <cstddef>
#include <thread>
#include <vector>

using namespace collx;
using Catch::Matchers::Contains;

namespace {

struct fake_driver {
  void (*init)(int) = nullptr;
  unsigned long (*queries)() = nullptr;
  void (*clear)() = nullptr;
  void (*mark)(const void*, std::size_t, unsigned, int, int) = nullptr;
};

constexpr unsigned host_type = 1, device_type = 2;

// Loaded once for the whole binary, on first use: the cases before it run
// without a driver in the process.
fake_driver& driver() {
  static fake_driver d = [] {
    void* lib = ::dlopen(COLLX_FAKE_DRIVER, RTLD_NOW | RTLD_LOCAL);
    REQUIRE(lib != nullptr);
    fake_driver f;
    f.init = reinterpret_cast<void (*)(int)>(::dlsym(lib, "fake_driver_init"));
    f.queries = reinterpret_cast<unsigned long (*)()>(::dlsym(lib, "fake_driver_queries"));
    f.clear = reinterpret_cast<void (*)()>(::dlsym(lib, "fake_driver_clear"));
    f.mark = reinterpret_cast<void (*)(const void*, std::size_t, unsigned, int, int)>(
        ::dlsym(lib, "fake_driver_mark"));
    REQUIRE((f.init && f.queries && f.clear && f.mark));
    f.init(1);
    return f;
  }();
  d.clear();
  return d;
}

comm_options opts() {
  comm_options o;
  o.timeout = std::chrono::seconds(30);
  return o;
}

// x[i] = rank + 1 + i on rank `rank`; the all_reduce sum over P ranks.
float expected_sum(int P, std::size_t i) { return float(P * (P + 1) / 2) + float(P) * float(i); }

}  // namespace

TEST_CASE("without a driver in the process every buffer is host memory", "[pointers]") {
  // Runs first (declaration order): the stand-in is not loaded yet.
  REQUIRE(::dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY) == nullptr);
  std::vector<float> v(8);
  CHECK(detail::query_memory_kind(v.data()).kind == detail::memory_kind::host);
  CHECK(detail::loaded_driver_query() == nullptr);
}

TEST_CASE("a buffer the driver calls device memory is refused before any byte moves", "[pointers]") {
  fake_driver& d = driver();
  auto comms = communicator::create_thread_group(1, opts());
  communicator& c = comms[0];
  std::vector<float> send(64, 1.0f), recv(64, -7.0f), other(64, -9.0f);
  d.mark(recv.data(), recv.size() * sizeof(float), device_type, 0, 3);
  const auto recv_before = recv;

  try {
    c.all_reduce(send.data(), recv.data(), send.size(), reduce_op::sum);
    FAIL("all_reduce into device memory was accepted");
  } catch (const collx::error& e) {
    CHECK(e.code() == status::invalid_argument);
    CHECK_THAT(e.what(), Contains("all_reduce (rank 0)") && Contains("recv buffer") &&
                             Contains("CUDA device memory (GPU 3)") && Contains("gpu::communicator"));
  }
  CHECK(recv == recv_before);
  CHECK(c.error() == status::ok);

  // Every entry point, the send side too.
  CHECK_THROWS_WITH(c.broadcast(recv.data(), other.data(), 8, 0),
                    Contains("send buffer") && Contains("device"));
  CHECK_THROWS_WITH(c.all_gather(send.data(), recv.data(), 8), Contains("recv buffer") && Contains("device"));
  CHECK_THROWS_WITH(c.reduce_scatter(recv.data(), other.data(), 8, reduce_op::sum),
                    Contains("send buffer") && Contains("device"));
  CHECK_THROWS_WITH(c.all_to_all(send.data(), recv.data(), 8), Contains("recv buffer"));
  const std::size_t counts[1] = {8}, displs[1] = {0};
  CHECK_THROWS_WITH(c.all_to_allv(recv.data(), counts, displs, other.data(), counts, displs, dtype::float32),
                    Contains("all_to_allv") && Contains("send buffer") && Contains("device"));
  CHECK_THROWS_WITH(c.send(recv.data(), 8, 0), Contains("device memory"));
  CHECK_THROWS_WITH(c.recv(recv.data(), 8, 0), Contains("device memory"));
  CHECK(recv == recv_before);
  CHECK(other == std::vector<float>(64, -9.0f));

  // In place on device memory: refused once, as the send buffer.
  CHECK_THROWS_WITH(c.all_reduce(recv.data(), recv.data(), 8, reduce_op::sum), Contains("send buffer"));

  // Host buffers still work on the same communicator.
  c.all_reduce(send.data(), other.data(), send.size(), reduce_op::sum);
  CHECK(other == send);

  // Off: the driver is not asked and the call goes ahead (the memory is
  // really host memory here).
  comm_options off = opts();
  off.check_pointers = false;
  auto unchecked = communicator::create_thread_group(1, off);
  const unsigned long asked = d.queries();
  unchecked[0].all_reduce(send.data(), recv.data(), send.size(), reduce_op::sum);
  CHECK(d.queries() == asked);
  CHECK(recv == send);
}

TEST_CASE("pinned and managed memory is accepted and the driver is asked once per buffer", "[pointers]") {
  fake_driver& d = driver();
  const int P = 2;
  const std::size_t n = 1000, guard = 16;
  // Per rank: send in pinned host memory, recv in managed memory (with guard
  // elements around it), a third buffer the driver does not know.
  std::vector<std::vector<float>> send(P), recv(P), scratch(P);
  for (int r = 0; r < P; ++r) {
    send[r].resize(n);
    for (std::size_t i = 0; i < n; ++i) send[r][i] = float(r + 1) + float(i);
    recv[r].assign(n + 2 * guard, -5.0f);
    scratch[r].assign(n, 0.0f);
    d.mark(send[r].data(), n * sizeof(float), host_type, 0, -2);
    d.mark(recv[r].data(), recv[r].size() * sizeof(float), device_type, 1, 0);
  }
  auto comms = communicator::create_thread_group(P, opts());
  const unsigned long before = d.queries();
  const int calls = 20;
  std::vector<std::thread> ranks;
  for (int r = 0; r < P; ++r)
    ranks.emplace_back([&, r] {
      for (int k = 0; k < calls; ++k) {
        comms[r].all_reduce(send[r].data(), recv[r].data() + guard, n, reduce_op::sum);
        comms[r].all_reduce(send[r].data(), scratch[r].data(), n, reduce_op::sum);
      }
    });
  for (auto& t : ranks) t.join();
  // Three distinct buffers per rank, each asked about once in 2 × 20 calls.
  CHECK(d.queries() - before == 3u * P);
  for (int r = 0; r < P; ++r) {
    for (std::size_t i = 0; i < n; ++i) {
      INFO("rank " << r << " element " << i);
      REQUIRE(recv[r][guard + i] == expected_sum(P, i));
      REQUIRE(scratch[r][i] == expected_sum(P, i));
    }
    for (std::size_t g = 0; g < guard; ++g) {
      REQUIRE(recv[r][g] == -5.0f);
      REQUIRE(recv[r][guard + n + g] == -5.0f);
    }
  }
}

TEST_CASE("a driver loaded but not initialised knows no device memory", "[pointers]") {
  fake_driver& d = driver();
  std::vector<float> v(8);
  d.mark(v.data(), v.size() * sizeof(float), device_type, 0, 0);
  CHECK(detail::query_memory_kind(v.data()).kind == detail::memory_kind::device);
  d.init(0);
  CHECK(detail::query_memory_kind(v.data()).kind == detail::memory_kind::host);
  d.init(1);
}

TEST_CASE("pointer_memo remembers the last pointers by address", "[pointers]") {
  detail::pointer_memo<int, 4> memo;
  int a[64];
  CHECK(memo.find(a) == nullptr);
  for (int i = 0; i < 4; ++i) memo.remember(a + i, i);
  for (int i = 0; i < 4; ++i) {
    REQUIRE(memo.find(a + i) != nullptr);
    CHECK(*memo.find(a + i) == i);
  }
  CHECK(memo.find(a + 4) == nullptr);
  memo.remember(a + 4, 4);  // replaces the oldest, a + 0
  CHECK(memo.find(a) == nullptr);
  CHECK(*memo.find(a + 4) == 4);
  CHECK(*memo.find(a + 1) == 1);
  memo.clear();
  CHECK(memo.find(a + 1) == nullptr);
}
