// The protocols (Simple, LL, LL128) under the ring on thread ranks: the full
// small-count matrix per protocol, ~1M elements for a spread of dtypes and
// ops, counts that end mid-line, unaligned buffers, protocols and sizes
// alternating on one communicator, step counters started near the LL flag's
// wrap point and its cleaning step, and an abort while ranks wait on lines.
// (ring/simple at ~1M for every dtype and op is in test_ring_matrix.cpp.)
#include "../support/matrix.hpp"

#include <atomic>
#include <cstdlib>
#include <thread>

using namespace collx;
using namespace collx::test;

namespace {

constexpr proto_id all_protos[] = {proto_id::simple, proto_id::ll, proto_id::ll128};

case_desc make(coll kind, dtype dt, reduce_op op, std::size_t count, proto_id p, int root = 0,
               bool in_place = false) {
  return make_case(kind, dt, op, count, {algo_id::ring, p}, root, in_place);
}

}  // namespace

TEST_CASE("protocols: every collective, dtype and op at small and prime counts", "[proto][matrix]") {
  const proto_id p = GENERATE(proto_id::ll, proto_id::ll128);
  const int P = GENERATE(1, 2, 3, 4, 5, 7, 8);
  INFO("proto = " << name(p) << ", P = " << P);
  const std::size_t counts[] = {
      0,   1, static_cast<std::size_t>(P - 1), static_cast<std::size_t>(P), static_cast<std::size_t>(P + 1),
      1009};
  std::vector<case_desc> cases;
  std::size_t k = 0;
  add_dtype_op_matrix(cases, five_colls, counts, {algo_id::ring, p}, P, k, every_pair);
  report(run_on_threads(P, cases));
}

TEST_CASE("protocols: ~1M elements for a spread of dtypes and ops", "[proto][matrix][large]") {
  const proto_id p = GENERATE(proto_id::ll, proto_id::ll128);
  const int P = GENERATE(2, 3, 5, 8);
  INFO("proto = " << name(p) << ", P = " << P);
  const std::size_t big = (1u << 20) + 3;
  const std::pair<dtype, reduce_op> spread[] = {
      {dtype::float32, reduce_op::sum},  {dtype::int32, reduce_op::max},
      {dtype::bfloat16, reduce_op::avg}, {dtype::float8_e4m3, reduce_op::sum},
      {dtype::uint8, reduce_op::bxor},   {dtype::float64, reduce_op::prod},
      {dtype::float16, reduce_op::min},  {dtype::int64, reduce_op::sum}};
  std::vector<case_desc> cases;
  int k = 0;
  for (coll kind : five_colls) {
    // One dtype/op pair per collective (rotating), both placements.
    const auto [dt, op] = spread[(k * 3 + P) % 8];
    const std::size_t count =
        kind == coll::all_gather || kind == coll::reduce_scatter ? big / static_cast<std::size_t>(P) : big;
    cases.push_back(make(kind, dt, is_reduction(kind) ? op : reduce_op::sum, count, p, k % P, k % 2 == 0));
    ++k;
  }
  report(run_on_threads(P, cases));
}

TEST_CASE("protocols: counts that end in the middle of a line", "[proto]") {
  const proto_id p = GENERATE(proto_id::ll, proto_id::ll128);
  const int P = GENERATE(2, 3);
  INFO("proto = " << name(p) << ", P = " << P);
  // LL lines hold 8 payload bytes, LL128 lines 120; a slot holds 512 resp. 256 lines.
  std::vector<case_desc> cases;
  for (std::size_t bytes : {1, 7, 9, 15, 119, 121, 239, 241, 4095, 4097, 30719, 30721, 61441})
    for (dtype dt : {dtype::int8, dtype::float16, dtype::float32, dtype::float64}) {
      const std::size_t n = bytes / size_of(dt) + 1;
      cases.push_back(make(coll::all_reduce, dt, reduce_op::sum, n, p));
      cases.push_back(make(coll::broadcast, dt, reduce_op::sum, n, p, P - 1, true));
      cases.push_back(make(coll::all_gather, dt, reduce_op::sum, n, p));
    }
  report(run_on_threads(P, cases));
}

TEST_CASE("protocols: buffers off vector alignment", "[proto]") {
  const proto_id p = GENERATE(proto_id::ll, proto_id::ll128);
  const int P = GENERATE(2, 5);
  std::vector<case_desc> cases;
  for (coll kind : five_colls)
    for (std::size_t mis : {1, 3, 7})
      for (dtype dt : {dtype::float32, dtype::float16, dtype::int8, dtype::float64}) {
        case_desc c =
            make(kind, dt, reduce_op::sum, 4099, p, static_cast<int>(mis % static_cast<std::size_t>(P)));
        c.misalign = mis;
        cases.push_back(c);
      }
  report(run_on_threads(P, cases));
}

namespace {

// Back-to-back calls that rotate protocol, collective, dtype and size.
std::vector<case_desc> alternating(int P, int calls) {
  std::vector<case_desc> cases;
  for (int i = 0; i < calls; ++i) {
    const std::size_t sizes[] = {1, 13, 600, 4097, 33000, 70001};
    case_desc c = make(five_colls[i % 5], static_cast<dtype>((i / 3) % dtype_count), reduce_op::sum,
                       sizes[(i * 7) % 6], all_protos[i % 3], i % P, i % 4 == 0);
    cases.push_back(c);
  }
  return cases;
}

}  // namespace

TEST_CASE("protocols alternate with sizes and collectives on one communicator", "[proto]") {
  const int P = GENERATE(2, 4);
  report(run_on_threads(P, alternating(P, 240)));
}

TEST_CASE("the last variant reports the protocol that ran", "[proto]") {
  auto comms = communicator::create_thread_group(1, test_options());
  float x = 1, y = 0;
  for (proto_id p : all_protos) {
    comms[0].all_reduce(&x, &y, 1, reduce_op::sum, {algo_id::ring, p});
    CHECK(comms[0].last_variant().proto == p);
    CHECK(y == 1);
  }
}

TEST_CASE("step counters started near the LL flag's wrap point and cleaning step", "[proto][wrap]") {
  using line = proto::ll_line;
  // The flag is never 0 (fresh memory), repeats only after 2^32 - 1 steps, and
  // 0xffffffff steps is where a 32-bit step + 1 would have produced 0.
  STATIC_REQUIRE(line::flag(0) == 1);
  STATIC_REQUIRE(line::flag(0xfffffffeull) == 0xffffffffu);
  STATIC_REQUIRE(line::flag(0xffffffffull) == 1);
  STATIC_REQUIRE(line::flag(0x1'0000'0000ull) == 2);
  STATIC_REQUIRE(line::clean_step(8 * line::clean_period, 8));
  STATIC_REQUIRE(!line::clean_step(8 * line::clean_period + 8, 8));

  const std::uint64_t origin = GENERATE(0xffffffffull - 3,     // the LL flag wraps from 0xffffffff to 1
                                        0x1'0000'0000ull - 8,  // 32-bit step counter wraps
                                        8 * proto::ll_line::clean_period - 20);  // a cleaning round of slots
  const int P = GENERATE(2, 3);
  INFO("origin = " << origin << ", P = " << P);
  comm_options o = test_options();
  o.step_origin = origin;
  // Small slots so that many steps pass: 8 slots of 32 lines each.
  o.slot_bytes_of<proto::ll>() = 512;
  o.slot_bytes_of<proto::ll128>() = 32 * 128;
  o.slot_bytes_of<proto::simple>() = 4096;
  // Each protocol first alone, so its first steps land on slots never written
  // (zero memory, which a flag of 0 would accept), then all alternating.
  std::vector<case_desc> cases;
  for (proto_id p : all_protos)
    for (int i = 0; i < 8; ++i)
      cases.push_back(make(five_colls[i % 5], dtype::float32, reduce_op::sum, 700 + 997 * i, p, i % P));
  for (const case_desc& c : alternating(P, 120)) cases.push_back(c);
  report(run_on_threads(P, cases, o));
}

TEST_CASE("a receiver first at a never-written slot waits for the flag", "[proto][wrap]") {
  // Fresh FIFO memory is zero. Start the counters where a naive flag (the
  // step's low 32 bits + 1) would be 0, and make the receiver arrive first.
  const proto_id p = GENERATE(proto_id::ll, proto_id::ll128);
  const std::uint64_t origin = GENERATE(0xffffffffull, 0x1'0000'0000ull);
  INFO("proto = " << name(p) << ", origin = " << origin);
  comm_options o = test_options();
  o.step_origin = origin;
  auto comms = communicator::create_thread_group(2, o);
  const std::size_t n = 300;
  std::vector<std::int32_t> root_buf(n), got(n, -1);
  for (std::size_t i = 0; i < n; ++i) root_buf[i] = static_cast<std::int32_t>(i * 7 + 1);
  std::thread root([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    comms[0].broadcast(root_buf.data(), root_buf.data(), n, 0, {algo_id::ring, p});
  });
  comms[1].broadcast(got.data(), got.data(), n, 0, {algo_id::ring, p});
  root.join();
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i) wrong += got[i] != static_cast<std::int32_t>(i * 7 + 1);
  CHECK(wrong == 0);
}

TEST_CASE("an abort while ranks wait on lines releases them", "[proto][errors]") {
  const proto_id p = GENERATE(proto_id::simple, proto_id::ll, proto_id::ll128);
  INFO("proto = " << name(p));
  const int P = 3;
  auto comms = communicator::create_thread_group(P, test_options());
  std::atomic<int> aborted{0}, other{0};
  std::vector<std::thread> ranks;
  for (int r = 0; r < P - 1; ++r)
    ranks.emplace_back([&, r] {
      std::vector<float> in(100000, 1.0f), out(100000);
      try {
        comms[static_cast<std::size_t>(r)].all_reduce(in.data(), out.data(), in.size(), reduce_op::sum,
                                                      {algo_id::ring, p});
        ++other;
      } catch (const error& e) {
        ++(e.code() == status::aborted ? aborted : other);
      }
    });
  // The last rank never joins the call; it aborts once the others are waiting.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  comms[P - 1].abort();
  for (auto& t : ranks) t.join();
  CHECK(aborted == P - 1);
  CHECK(other == 0);
  // Later calls fail at once instead of waiting.
  float x = 0;
  CHECK_THROWS_AS(comms[0].all_reduce(&x, &x, 1, reduce_op::sum, {algo_id::ring, p}), error);
}

TEST_CASE("per-protocol FIFO sizes from the environment and options are checked", "[proto][errors]") {
  using Catch::Matchers::Contains;
  struct env_var {
    const char* name;
    env_var(const char* n, const char* v) : name(n) { ::setenv(n, v, 1); }
    ~env_var() { ::unsetenv(name); }
  };
  {
    env_var e("COLLX_LL_BUFFSIZE", "65536");
    CHECK(comm_options::from_env().slot_bytes_of<proto::ll>() == 65536 / 8);
  }
  {
    env_var e("COLLX_LL128_BUFFSIZE", "262144");
    CHECK(comm_options::from_env().slot_bytes_of<proto::ll128>() == 262144 / 8);
  }
  for (const char* bad : {"1000", "abc", "-16", "8", "100000000000"}) {
    env_var e("COLLX_LL_BUFFSIZE", bad);
    CHECK_THROWS_WITH(comm_options::from_env(), Contains("COLLX_LL_BUFFSIZE"));
  }
  {
    env_var e("COLLX_LL128_BUFFSIZE", "8000");  // 1000-byte slots: not whole 128-byte lines
    CHECK_THROWS_WITH(comm_options::from_env(), Contains("COLLX_LL128_BUFFSIZE"));
  }
  comm_options o = test_options();
  o.slot_bytes_of<proto::ll>() = 24;
  CHECK_THROWS_WITH(communicator::create_thread_group(2, o), Contains("ll slot bytes") && Contains("multiple of 16"));
  o = test_options();
  o.slot_bytes_of<proto::ll128>() = 200;
  CHECK_THROWS_WITH(communicator::create_thread_group(2, o), Contains("ll128 slot bytes") && Contains("multiple of 128"));
}
