// Bad input gets a clear error naming the argument, before any byte moves;
// failures during a call abort every rank instead of hanging them.
#include <collx/communicator.hpp>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

using namespace collx;
using Catch::Matchers::Contains;

namespace {
comm_options quick(std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  comm_options o;
  o.timeout = timeout;
  return o;
}
}  // namespace

TEST_CASE("bad arguments are rejected with the argument named", "[errors]") {
  auto comms = communicator::create_thread_group(2, quick());
  communicator& c = comms[0];
  std::vector<float> a(16, 1.0f), b(16, 0.0f);
  const auto canary = b;

  SECTION("null buffers with a non-zero count") {
    CHECK_THROWS_WITH(c.all_reduce(static_cast<const float*>(nullptr), b.data(), 4, reduce_op::sum),
                      Contains("send buffer is null"));
    CHECK_THROWS_WITH(c.all_reduce(a.data(), static_cast<float*>(nullptr), 4, reduce_op::sum),
                      Contains("recv buffer is null"));
    CHECK_THROWS_WITH(c.all_gather(static_cast<const float*>(nullptr), b.data(), 1),
                      Contains("send buffer is null"));
  }
  SECTION("count overflow") {
    CHECK_THROWS_WITH(c.all_reduce(a.data(), b.data(), SIZE_MAX / 2, reduce_op::sum), Contains("count"));
    CHECK_THROWS_WITH(c.all_gather(a.data(), b.data(), SIZE_MAX / 4), Contains("overflows"));
    // Byte counts that wrap around to a small number: 2^62 + 1 floats on 2
    // ranks are 2^65 + 8 bytes, 8 modulo 2^64.
    const std::size_t wraps = (std::size_t{1} << 62) + 1;
    CHECK_THROWS_WITH(c.all_gather(a.data(), b.data(), wraps), Contains("overflows"));
    CHECK_THROWS_WITH(c.all_reduce(a.data(), b.data(), wraps, reduce_op::sum), Contains("overflows"));
    CHECK_THROWS_WITH(c.send(a.data(), wraps, 1), Contains("overflows"));
    // One element past the addressable range (PTRDIFF_MAX bytes) of 2 × count floats.
    const auto limit = static_cast<std::size_t>(PTRDIFF_MAX);
    CHECK_THROWS_WITH(c.all_gather(a.data(), b.data(), limit / 8 + 1), Contains("overflows"));
    CHECK(b == canary);
  }
  SECTION("root out of range") {
    CHECK_THROWS_WITH(c.broadcast(a.data(), b.data(), 4, 2), Contains("root 2 is out of range"));
    CHECK_THROWS_WITH(c.reduce(a.data(), b.data(), 4, reduce_op::sum, -1),
                      Contains("root -1 is out of range"));
  }
  SECTION("op unsupported for the dtype, invalid dtype and op") {
    try {
      c.all_reduce(a.data(), b.data(), 4, reduce_op::band);
      FAIL("band on float was accepted");
    } catch (const collx::error& e) {
      CHECK(e.code() == status::not_supported);
      CHECK_THAT(e.what(), Contains("band") && Contains("float"));
    }
    CHECK_THROWS_WITH(c.all_reduce(a.data(), b.data(), 4, static_cast<dtype>(99), reduce_op::sum),
                      Contains("dtype"));
    CHECK_THROWS_WITH(c.all_reduce(a.data(), b.data(), 4, dtype::float32, static_cast<reduce_op>(42)),
                      Contains("reduce_op"));
  }
  SECTION("partially overlapping buffers") {
    CHECK_THROWS_WITH(c.all_reduce(a.data(), a.data() + 1, 8, reduce_op::sum), Contains("overlap"));
  }
  SECTION("a rejected call moves nothing and leaves the communicator usable") {
    CHECK_THROWS(c.broadcast(a.data(), b.data(), 4, 7));
    CHECK(b == canary);
    CHECK(c.error() == status::ok);
  }
}

TEST_CASE("use after destroy and of an empty communicator", "[errors]") {
  auto comms = communicator::create_thread_group(1, quick());
  float x = 1, y = 0;
  comms[0].destroy();
  CHECK_FALSE(comms[0].valid());
  CHECK_THROWS_WITH(comms[0].all_reduce(&x, &y, 1, reduce_op::sum), Contains("after destroy"));
  CHECK_THROWS_WITH(comms[0].rank(), Contains("after destroy"));
  communicator empty;
  CHECK_THROWS_WITH(empty.all_reduce(&x, &y, 1, reduce_op::sum), Contains("not initialised"));
  communicator moved = std::move(comms[0]);
  CHECK_THROWS(comms[0].size());
}

TEST_CASE("bad group sizes and options", "[errors]") {
  CHECK_THROWS_WITH(communicator::create_thread_group(0), Contains("nranks"));
  comm_options o;
  o.fifo_slots = 1;
  CHECK_THROWS_WITH(communicator::create_thread_group(2, o), Contains("fifo_slots"));
  o = comm_options{};
  o.slot_bytes_of<proto::simple>() = 100;
  CHECK_THROWS_WITH(communicator::create_thread_group(2, o), Contains("simple slot bytes"));
  setenv("COLLX_TIMEOUT", "soon", 1);
  CHECK_THROWS_WITH(comm_options::from_env(), Contains("COLLX_TIMEOUT"));
  unsetenv("COLLX_TIMEOUT");
  setenv("COLLX_SPIN_US", "-5", 1);
  CHECK_THROWS_WITH(comm_options::from_env(), Contains("COLLX_SPIN_US"));
  unsetenv("COLLX_SPIN_US");
  setenv("COLLX_BUFFSIZE", "12345", 1);
  CHECK_THROWS_WITH(comm_options::from_env(), Contains("COLLX_BUFFSIZE"));
  unsetenv("COLLX_BUFFSIZE");
}

TEST_CASE("a rank that never arrives makes its peers time out, not hang", "[errors]") {
  auto comms = communicator::create_thread_group(2, quick(std::chrono::milliseconds(300)));
  std::vector<float> a(1000, 1.0f), b(1000);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    comms[0].all_reduce(a.data(), b.data(), a.size(), reduce_op::sum);
    FAIL("all_reduce returned without its peer");
  } catch (const collx::error& e) {
    CHECK(e.code() == status::timeout);
    CHECK_THAT(e.what(), Contains("timed out"));
  }
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
  CHECK(comms[0].error() == status::timeout);
  // The failure aborted the group: the other rank fails fast, naming rank 0.
  try {
    comms[1].all_reduce(a.data(), b.data(), a.size(), reduce_op::sum);
    FAIL("the peer's call succeeded after the group was aborted");
  } catch (const collx::error& e) {
    CHECK(e.code() == status::aborted);
    CHECK_THAT(e.what(), Contains("rank 0 failed"));
  }
  // And the failed communicator refuses further work at once.
  CHECK_THROWS_WITH(comms[0].all_reduce(a.data(), b.data(), 4, reduce_op::sum), Contains("error state"));
}

TEST_CASE("abort() from another thread releases blocked ranks", "[errors]") {
  auto comms = communicator::create_thread_group(3, quick(std::chrono::seconds(60)));
  std::atomic<int> aborted{0};
  std::vector<std::thread> ts;
  for (int r = 0; r < 2; ++r)  // rank 2 never joins
    ts.emplace_back([&, r] {
      std::vector<double> a(4096, 1.0), b(4096);
      try {
        comms[r].all_reduce(a.data(), b.data(), a.size(), reduce_op::sum);
      } catch (const collx::error& e) {
        if (e.code() == status::aborted) ++aborted;
      }
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto t0 = std::chrono::steady_clock::now();
  comms[2].abort();
  for (auto& t : ts) t.join();
  CHECK(aborted == 2);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
}

TEST_CASE("explicit composition and runtime variant choice", "[api]") {
  auto comms = communicator::create_thread_group(3, quick());
  std::vector<std::thread> ts;
  std::atomic<int> good{0};
  for (int r = 0; r < 3; ++r)
    ts.emplace_back([&, r] {
      std::vector<std::int32_t> a(100, r + 1), b(100, 0);
      collx::all_reduce<algo::ring, proto::simple>(comms[r], a.data(), b.data(), a.size(), reduce_op::sum);
      bool ok = std::all_of(b.begin(), b.end(), [](std::int32_t v) { return v == 6; });
      comms[r].all_reduce(a.data(), b.data(), a.size(), reduce_op::max,
                          variant_choice{algo_id::ring, proto_id::simple});
      ok = ok && std::all_of(b.begin(), b.end(), [](std::int32_t v) { return v == 3; });
      ok = ok && comms[r].last_variant().algo == algo_id::ring &&
           comms[r].last_variant().proto == proto_id::simple;
      if (ok) ++good;
    });
  for (auto& t : ts) t.join();
  CHECK(good == 3);
  // A variant that is not compiled in is refused, not silently replaced.
  std::vector<float> x(4), y(4);
  auto one = communicator::create_thread_group(1, quick());
  CHECK_THROWS_WITH(one[0].all_reduce(x.data(), y.data(), 4, reduce_op::sum,
                                      variant_choice{algo_id::bruck, proto_id::simple}),
                    Contains("no compiled variant"));
}

TEST_CASE("streams: where messages are read in place, and ends that disagree on it", "[errors][p2p]") {
  constexpr std::uint64_t off = ~std::uint64_t{0};
  static_assert(stream_read_in_place_bytes(off, false) == off &&
                stream_read_in_place_bytes(off, true) == off);
  static_assert(stream_read_in_place_bytes(256 * 1024, false) == 2 * 1024 * 1024);  // quiet: 8 times
  static_assert(stream_read_in_place_bytes(256 * 1024, true) == 256 * 1024);  // contended: the threshold
  static_assert(stream_read_in_place_bytes(0, false) == 0);
  static_assert(stream_read_in_place_bytes(off / 4, false) == off);  // no overflow into a small threshold
  // The receiver's report when the ends decide differently (algo::direct's header flag).
  mismatch_report rep;
  rep.peer = 2;
  rep.message = 1;
  rep.read_in_place = true;
  rep.expected = 1;  // rank 0 reads it in place
  rep.got = 0;       // rank 2 sends it through the FIFOs
  CHECK_THAT(comm::p2p_mismatch_detail(rep, 0), Contains("message #1 from rank 2") &&
                                                    Contains("rank 2 sends it through the FIFOs") &&
                                                    Contains("rank 0 reads it in place") &&
                                                    Contains("thresholds or contention settings differ"));
  rep.expected = 0;
  rep.got = 1;
  std::vector<std::size_t> storage;
  const std::size_t counts[3] = {100, 100, 100}, displs[3] = {0, 100, 200};
  const comm::buffer_desc side{nullptr, counts, displs, comm::buffer_desc::unknown_length};
  const comm::byte_layout layout(side, side, dtype::float32, 3, storage);
  CHECK_THAT(layout.mismatch_detail(rep, 0), Contains("rank 2 offers it to be read in place") &&
                                                 Contains("rank 0 expects it through the FIFOs"));
}

namespace {
// A transport view that, like the network one, knows what a peer's
// connection did (transport/proxied.hpp, transport_failure).
struct peer_record {
  std::int32_t pid = 4242;
};
struct view_with_connection_text {
  mutable peer_record rec;
  std::string text;
  std::string transport_failure(int) const { return text; }
  peer_record* record(int) const { return &rec; }
};
struct transport_with_connection_text {
  using view = view_with_connection_text;
};
}  // namespace

TEST_CASE("an adopted cause: a mismatch is named as one, whatever a connection saw of the rank that found it",
          "[errors][net]") {
  // Rank 0 finds the mismatch, raises the abort and closes its communicator;
  // rank 1's proxy sees that goodbye (steps unread) before rank 1 describes
  // the cause it adopted. The goodbye is the consequence; the cause is named.
  comm::state<transport_with_connection_text> s;
  s.view.text = "rank 0 (10.0.0.1:4000): closed its communicator (said goodbye) with 1 step(s) unread";
  const std::string mismatch =
      comm::describe(s, comm::abort_cause{status::mismatch, comm::call_field::op, 0, 1});
  CHECK_THAT(mismatch, Contains("ranks 0 and 1 issued mismatched calls (the reduce_op differs)"));
  CHECK_THAT(mismatch, !Contains("goodbye"));
  // A dead peer is described by what its connection did, where known.
  CHECK(comm::describe(s, comm::abort_cause{status::peer_dead, comm::call_field::none, 0, -1}) ==
        s.view.text);
  s.view.text.clear();
  CHECK_THAT(comm::describe(s, comm::abort_cause{status::peer_dead, comm::call_field::none, 0, -1}),
             Contains("died or lost its connections"));
  CHECK_THAT(comm::describe(s, comm::abort_cause{status::system_error, comm::call_field::none, 1, -1}),
             Contains("aborted because rank 1 failed"));
  CHECK(comm::describe(s, comm::abort_cause{status::aborted, comm::call_field::none, -1, -1}) ==
        "aborted by communicator::abort()");
}
