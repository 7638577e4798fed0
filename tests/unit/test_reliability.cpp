// Reliability on thread ranks: abort from any thread reaches every rank, even
// idle ones; mismatched calls (count, dtype, root, collective) end as
// status::mismatch naming the ranks and the field instead of garbage or a
// hang; and the process-liveness probe used for dead peers.
#include <collx/communicator.hpp>
#include <collx/detail/proc.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace collx;
using Catch::Matchers::Contains;

namespace {

comm_options opts(std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  comm_options o;
  o.timeout = timeout;
  return o;
}

struct rank_outcome {
  status code = status::ok;  // of the first call that threw, ok if none did
  std::string what;
  status error_after = status::ok;  // comm.error() once every rank is done
  std::string error_message;
};

/// Runs body(rank, comm) on one thread per rank; each body runs its calls and
/// stops at the first collx::error.
std::vector<rank_outcome> on_threads(std::vector<communicator>& comms,
                                     const std::function<void(int, communicator&)>& body) {
  std::vector<rank_outcome> out(comms.size());
  std::vector<std::thread> ts;
  for (std::size_t r = 0; r < comms.size(); ++r)
    ts.emplace_back([&, r] {
      try {
        body(static_cast<int>(r), comms[r]);
      } catch (const collx::error& e) {
        out[r].code = e.code();
        out[r].what = e.what();
      }
    });
  for (auto& t : ts) t.join();
  // After every rank is done: a rank that finished cleanly before another
  // raised the abort word still reports the error, which is sticky.
  for (std::size_t r = 0; r < comms.size(); ++r) {
    out[r].error_after = comms[r].error();
    out[r].error_message = comms[r].error_message();
  }
  return out;
}

/// A thread that aborts comms[victim] `delay` after every rank has counted
/// itself in `started`.
std::thread abort_once_started(std::vector<communicator>& comms, const std::atomic<int>& started,
                               std::chrono::milliseconds delay, std::size_t victim) {
  return std::thread([&comms, &started, delay, victim] {
    while (started.load() < static_cast<int>(comms.size())) std::this_thread::yield();
    std::this_thread::sleep_for(delay);
    comms[victim].abort();
  });
}

/// Every rank's first failing call, and its error state after, say aborted.
void check_every_rank_aborted(const std::vector<rank_outcome>& out, int round) {
  for (const rank_outcome& o : out) {
    INFO("round " << round << ": " << o.what);
    CHECK(o.code == status::aborted);
    CHECK(o.error_after == status::aborted);
  }
}

}  // namespace

TEST_CASE("abort() on an idle communicator: every rank's error() and next call report it", "[reliability]") {
  auto comms = communicator::create_thread_group(3, opts());
  CHECK(comms[0].error() == status::ok);
  comms[1].abort();
  for (auto& c : comms) {
    CHECK(c.error() == status::aborted);
    CHECK_THAT(c.error_message(), Contains("communicator::abort()"));
  }
  // P = 1-like calls that would never wait (count 0) fail too: the check is up front.
  float x = 1, y = 0;
  for (auto& c : comms) {
    try {
      c.all_reduce(&x, &y, 0, reduce_op::sum);
      FAIL("a call on an aborted communicator succeeded");
    } catch (const collx::error& e) {
      CHECK(e.code() == status::aborted);
      CHECK_THAT(e.what(), Contains("error state") && Contains("abort()"));
    }
  }
}

TEST_CASE("abort() from a side thread ends back-to-back large all_reduces on every rank", "[reliability]") {
  auto comms = communicator::create_thread_group(4, opts());
  std::atomic<int> started{0};
  std::thread aborter([&] {
    while (started.load() < 4) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    comms[2].abort();
  });
  const auto t0 = std::chrono::steady_clock::now();
  auto out = on_threads(comms, [&](int, communicator& c) {
    std::vector<float> a(1 << 20, 1.0f), b(a.size());
    ++started;
    for (;;) c.all_reduce(a.data(), b.data(), a.size(), reduce_op::sum);
  });
  aborter.join();
  for (auto& o : out) {
    CHECK(o.code == status::aborted);
    CHECK_THAT(o.what, Contains("communicator::abort()"));
    CHECK(o.error_after == status::aborted);
  }
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30));  // far below the 60 s deadline
}

TEST_CASE("thread ranks loading each other's buffers: a rank that leaves an aborted call has no reader left",
          "[reliability][single_copy]") {
  // nvls's single copy: every rank loads its peers' send and recv through
  // their pointers. Each rank's buffers live only for the call (allocated
  // before, freed and poisoned right after it returns, also when it throws),
  // and ranks are aborted in the middle of back-to-back calls: no rank may
  // load a buffer whose owner has returned (ASan reports the load of a freed
  // buffer; without ASan the poison is only written, so this checks the
  // outcome). Repeated, with the abort at different points.
  for (int round = 0; round < 6; ++round) {
    auto comms = communicator::create_thread_group(3, opts());
    std::atomic<int> started{0};
    std::atomic<bool> wrong{false};
    std::thread aborter =
        abort_once_started(comms, started, std::chrono::milliseconds(5 + 7 * round), std::size_t(round % 3));
    auto out = on_threads(comms, [&](int r, communicator& c) {
      const std::size_t n = std::size_t{1} << 18;  // floats: 1 MiB
      ++started;
      for (int k = 0;; ++k) {
        auto a = std::make_unique<float[]>(n), b = std::make_unique<float[]>(n);
        std::fill(a.get(), a.get() + n, float(r + k));
        try {
          c.all_reduce(a.get(), b.get(), n, reduce_op::sum, {algo_id::nvls, proto_id::simple});
        } catch (...) {
          std::fill(a.get(), a.get() + n, -1.0f);  // what a reader that came too late would see
          throw;
        }
        if (b[n - 1] != float(3 * k + 3)) wrong = true;  // (the abort ends the loop)
      }
    });
    aborter.join();
    CHECK(!wrong);
    check_every_rank_aborted(out, round);
  }
}

TEST_CASE("thread ranks reading messages in place: a sender that leaves an aborted group has no reader left",
          "[reliability][single_copy][p2p]") {
  // send/recv groups are not numbered calls, yet a receiver loads a long
  // message from its sender's buffer (direct's message streams). Rank 0
  // sends rank 1 large messages in back-to-back groups, each from a buffer
  // mapped for that group and unmapped as soon as the group returns, also
  // when it throws; the communicator is aborted at different points, mostly
  // while rank 1 is copying and rank 0 only waits for its token. A receiver
  // that loads a buffer whose sender has returned faults.
  comm_options o = opts();
  o.single_copy_min_bytes = 4096;              // messages read in place from 32 KiB
  const std::size_t n = std::size_t{1} << 22;  // floats: 16 MiB per message
  const std::size_t bytes = n * sizeof(float);
  for (int round = 0; round < 8; ++round) {
    auto comms = communicator::create_thread_group(2, o);
    std::atomic<int> started{0};
    std::atomic<bool> wrong{false};
    std::thread aborter =
        abort_once_started(comms, started, std::chrono::milliseconds(1 + 4 * round), std::size_t(round % 2));
    auto out = on_threads(comms, [&](int r, communicator& c) {
      std::vector<float> b(r == 1 ? n + 16 : 0);
      ++started;
      for (int k = 0;; ++k) {
        if (r == 1) {
          std::fill(b.begin() + std::ptrdiff_t(n), b.end(), -5.0f);
          c.recv(b.data(), n, dtype::float32, 0);
          if (b[0] != float(k) || b[n - 1] != float(k) || b[n] != -5.0f) wrong = true;
          continue;
        }
        void* m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) throw std::runtime_error("mmap failed");
        auto* a = static_cast<float*>(m);
        std::fill(a, a + n, float(k));
        try {
          c.send(a, n, dtype::float32, 1);
        } catch (...) {
          ::munmap(m, bytes);  // a reader that came too late faults
          throw;
        }
        ::munmap(m, bytes);
      }
    });
    aborter.join();
    CHECK(!wrong);
    check_every_rank_aborted(out, round);
  }
}

TEST_CASE("thread ranks loading each other's buffers: a mismatched count is refused before any load",
          "[reliability][single_copy][mismatch]") {
  // Rank 1's buffers hold half the elements the others' calls would load from
  // them: every rank must fail with a mismatch naming the count, and nothing
  // may load past rank 1's buffers (ASan would report it) nor write into any
  // recv past what its own call offered.
  auto comms = communicator::create_thread_group(3, opts());
  std::vector<std::vector<float>> recvs(3);
  auto out = on_threads(comms, [&](int r, communicator& c) {
    const std::size_t n = r == 1 ? (std::size_t{1} << 17) : (std::size_t{1} << 18);
    std::vector<float> a(n, 1.0f);
    recvs[std::size_t(r)].assign(n + 16, -5.0f);
    c.all_reduce(a.data(), recvs[std::size_t(r)].data(), n, reduce_op::sum,
                 {algo_id::nvls, proto_id::simple});
  });
  for (int r = 0; r < 3; ++r) {
    const rank_outcome& o = out[std::size_t(r)];
    INFO("rank " << r << ": " << o.what << " / " << o.error_message);
    CHECK(o.error_after == status::mismatch);
    CHECK_THAT(o.error_message, Contains("count"));
    const std::vector<float>& y = recvs[std::size_t(r)];
    for (std::size_t i = y.size() - 16; i < y.size(); ++i) CHECK(y[i] == -5.0f);  // the guard
  }
}

TEST_CASE("mismatched count: status::mismatch naming both ranks and the count", "[reliability][mismatch]") {
  // A small difference (both calls move the same number of FIFO slots and
  // complete) and a large one (one rank waits for data that never comes).
  const std::size_t other = GENERATE(std::size_t{1200}, std::size_t{1} << 20);
  INFO("rank 1's count = " << other);
  auto comms = communicator::create_thread_group(2, opts());
  auto out = on_threads(comms, [&](int r, communicator& c) {
    const std::size_t n = r == 0 ? 1000 : other;
    std::vector<float> a(n, 1.0f), b(n);
    c.all_reduce(a.data(), b.data(), n, reduce_op::sum);
    c.all_reduce(a.data(), b.data(), n, reduce_op::sum);  // a rank that got through must fail here
  });
  int named = 0;
  for (auto& o : out) {
    CHECK(o.code == status::mismatch);
    CHECK(o.error_after == status::mismatch);
    CHECK_THAT(o.what, Contains("count"));
    if (o.what.find("count 1000") != std::string::npos &&
        o.what.find("count " + std::to_string(other)) != std::string::npos)
      ++named;
  }
  CHECK(named >= 1);  // the rank that detected it names both calls
}

TEST_CASE("check_calls off: a mismatch that stalls a wait is still found by the watch",
          "[reliability][mismatch]") {
  comm_options o = opts();
  o.check_calls = false;  // no comparison at the end of each call
  auto comms = communicator::create_thread_group(2, o);
  auto out = on_threads(comms, [&](int r, communicator& c) {
    const std::size_t n = r == 0 ? 1000 : std::size_t{1} << 20;  // rank 1 waits for data never sent
    std::vector<float> a(n, 1.0f), b(n);
    c.all_reduce(a.data(), b.data(), n, reduce_op::sum);
    c.all_reduce(a.data(), b.data(), n, reduce_op::sum);
  });
  // Rank 0 may finish both calls before rank 1's watch sees the mismatch;
  // the abort reaches its communicator within a tick of the watch.
  int threw = 0;
  for (std::size_t r = 0; r < comms.size(); ++r) {
    INFO("rank " << r << ": " << out[r].what);
    if (out[r].code == status::mismatch) ++threw;
    else CHECK(out[r].code == status::ok);
    const auto t0 = std::chrono::steady_clock::now();
    while (comms[r].error() == status::ok && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20))
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    CHECK(comms[r].error() == status::mismatch);
    CHECK_THAT(comms[r].error_message(), Contains("count"));
  }
  CHECK(threw >= 1);
}

TEST_CASE("COLLX_CHECK_CALLS sets check_calls and refuses other values", "[reliability][options]") {
  ::setenv("COLLX_CHECK_CALLS", "0", 1);
  CHECK_FALSE(comm_options::from_env().check_calls);
  ::setenv("COLLX_CHECK_CALLS", "1", 1);
  CHECK(comm_options::from_env().check_calls);
  ::setenv("COLLX_CHECK_CALLS", "2", 1);
  CHECK_THROWS_WITH(comm_options::from_env(), Contains("COLLX_CHECK_CALLS"));
  ::unsetenv("COLLX_CHECK_CALLS");
  CHECK(comm_options::from_env().check_calls);
}

TEST_CASE("mismatched dtype, collective and root are reported as such", "[reliability][mismatch]") {
  comm_options o = opts();
  std::string field;
  std::function<void(int, communicator&)> body;
  SECTION("dtype: float32 on rank 2, int32 elsewhere") {
    field = "dtype";
    body = [](int r, communicator& c) {
      std::vector<std::int32_t> a(4096, 1), b(4096);
      const dtype dt = r == 2 ? dtype::float32 : dtype::int32;
      c.all_reduce(a.data(), b.data(), a.size(), dt, reduce_op::sum);
      c.all_reduce(a.data(), b.data(), a.size(), dtype::int32, reduce_op::sum);
    };
  }
  SECTION("collective: all_gather on rank 0, all_reduce elsewhere") {
    field = "collective";
    body = [](int r, communicator& c) {
      std::vector<float> a(3 * 999, 1.0f), b(3 * 999);
      if (r == 0) c.all_gather(a.data(), b.data(), 999);
      else c.all_reduce(a.data(), b.data(), 999, reduce_op::sum);
      c.all_reduce(a.data(), b.data(), 999, reduce_op::sum);
    };
  }
  SECTION("root: broadcast from 0 on rank 0, from 1 elsewhere") {
    field = "root";
    body = [](int r, communicator& c) {
      std::vector<double> a(5000, r), b(5000);
      c.broadcast(a.data(), b.data(), a.size(), r == 0 ? 0 : 1);
      c.all_reduce(a.data(), b.data(), a.size(), reduce_op::sum);
    };
  }
  SECTION("root, with the ranks that compare it running ahead") {
    // Rank 1 (a root in its view) returns before rank 0 publishes, and rank 0
    // (a root in its own) before rank 2 does: both put their next comparison
    // off. The all_reduce after it ends only once every rank has begun it, so
    // it compares at once, and finds the roots that differ. Waits spin for
    // 5 s before the periodic check joins in, so that only the comparisons
    // at the ends of calls can find it within the sleeps.
    field = "root";
    o.spin = std::chrono::seconds(5);
    body = [](int r, communicator& c) {
      std::vector<double> a(5000, r), b(5000);
      std::this_thread::sleep_for(std::chrono::milliseconds(r == 0 ? 30 : r == 2 ? 60 : 0));
      c.broadcast(a.data(), b.data(), a.size(), r == 0 ? 0 : 1);
      c.all_reduce(a.data(), b.data(), a.size(), reduce_op::sum);
    };
  }
  SECTION("op: max on rank 1, sum elsewhere") {
    field = "reduce_op";
    body = [](int r, communicator& c) {
      std::vector<float> a(777, 1.0f), b(777);
      c.all_reduce(a.data(), b.data(), a.size(), r == 1 ? reduce_op::max : reduce_op::sum);
      c.all_reduce(a.data(), b.data(), a.size(), reduce_op::sum);
    };
  }
  auto comms = communicator::create_thread_group(3, o);
  const auto t0 = std::chrono::steady_clock::now();
  auto out = on_threads(comms, body);
  INFO("field " << field);
  int threw = 0;
  for (auto& res : out) {
    INFO(res.what << " / " << res.error_message);
    CHECK(res.error_after == status::mismatch);
    CHECK_THAT(res.error_message, Contains(field));
    if (res.code == status::mismatch) ++threw;
    else CHECK(res.code == status::ok);  // finished before anyone saw it; error() still reports it
  }
  CHECK(threw >= 1);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30));
}

TEST_CASE("a mismatched call is a mismatch even on one rank pair of many", "[reliability][mismatch]") {
  auto comms = communicator::create_thread_group(5, opts());
  auto out = on_threads(comms, [](int r, communicator& c) {
    std::vector<std::int64_t> a(100000, 1), b(100000);
    for (int i = 0; i < 3; ++i) c.all_reduce(a.data(), b.data(), a.size(), reduce_op::sum);
    c.all_reduce(a.data(), b.data(), r == 3 ? 50000 : a.size(), reduce_op::sum);
    c.all_reduce(a.data(), b.data(), a.size(), reduce_op::sum);
  });
  for (auto& o : out) {
    INFO(o.what);
    CHECK(o.error_after == status::mismatch);
    CHECK_THAT(o.error_message, Contains("count"));
    const std::string& m = o.error_message;
    CHECK((m.find("rank 3 called") != std::string::npos || m.find("ranks 3 and") != std::string::npos ||
           m.find("and 3 issued") != std::string::npos));  // the pair named includes rank 3
  }
  for (auto& c : comms) CHECK(c.calls_issued() >= 3);  // the three matching calls went through
}

TEST_CASE("the call check's chain of neighbours finds a mismatch on any one rank",
          "[reliability][mismatch]") {
  // max on one rank, sum elsewhere: the same bytes move, nothing stalls, so
  // only the end-of-call comparisons (ranks 1..P-1 with their neighbours) can
  // find it, on the first rank (which compares with nobody), the last and one
  // in between.
  const int P = 4;
  const int odd = GENERATE(0, 1, P - 1);
  auto comms = communicator::create_thread_group(P, opts());
  auto out = on_threads(comms, [odd](int r, communicator& c) {
    std::vector<float> a(256, float(r + 1)), b(256);
    c.all_reduce(a.data(), b.data(), a.size(), r == odd ? reduce_op::max : reduce_op::sum);
    c.all_reduce(a.data(), b.data(), a.size(), reduce_op::sum);
    c.all_reduce(a.data(), b.data(), a.size(), reduce_op::sum);
  });
  INFO("max on rank " << odd);
  for (auto& o : out) {
    INFO(o.what << " / " << o.error_message);
    CHECK(o.error_after == status::mismatch);
    CHECK_THAT(o.error_message, Contains("reduce_op"));
  }
}

TEST_CASE("a broadcast root running ahead of a late rank still has every call compared",
          "[reliability][mismatch]") {
  // The last rank starts late, so the root fills its FIFO credits (and, with
  // 128 slots, more than the call window of 64 calls) before the late rank
  // publishes a call. dtype int32 against float32 moves the same bytes and stalls
  // nothing: only the call check can find it, on a call far past the first.
  const int P = GENERATE(2, 3);
  const std::uint32_t slots = GENERATE(8u, 128u);
  const int calls = 200, odd = 150;
  comm_options o = opts();
  o.fifo_slots = slots;
  auto comms = communicator::create_thread_group(P, o);
  std::vector<int> good_calls(static_cast<std::size_t>(P), 0);
  auto out = on_threads(comms, [&](int r, communicator& c) {
    if (r == P - 1) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    for (int i = 0; i < calls; ++i) {
      std::vector<float> a(2, r == 0 ? float(i + 1) : -1.0f), b(3, -7.0f);  // b[2]: a guard
      const dtype dt = r == P - 1 && i == odd ? dtype::int32 : dtype::float32;
      c.broadcast(a.data(), b.data(), 2, dt, 0);
      if (b[0] == float(i + 1) && b[1] == float(i + 1) && b[2] == -7.0f)
        ++good_calls[static_cast<std::size_t>(r)];
    }
  });
  INFO("P " << P << ", " << slots << " slots");
  for (std::size_t r = 0; r < out.size(); ++r) {
    INFO("rank " << r << ": " << out[r].what << " / " << out[r].error_message);
    CHECK(out[r].error_after == status::mismatch);
    CHECK_THAT(out[r].error_message, Contains("dtype"));
    CHECK(good_calls[r] >= odd);  // the calls before the mismatched one delivered the root's values
  }
}

TEST_CASE("the call window holds ranks running ahead without a false mismatch", "[reliability][mismatch]") {
  // Roots and leaves running ahead by more calls than the window (128 slots
  // of credit against a window of 64 calls): every call completes with the right values, nothing is
  // reported, and the window lets every rank finish.
  const int P = 3, calls = 300;
  comm_options o = opts();
  o.fifo_slots = 128;
  auto comms = communicator::create_thread_group(P, o);
  std::vector<int> right(static_cast<std::size_t>(P), 0);
  auto out = on_threads(comms, [&](int r, communicator& c) {
    if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    for (int i = 0; i < calls; ++i) {
      std::vector<float> a(2, float(r + i)), b(3, -7.0f);
      c.broadcast(a.data(), b.data(), 2, 0);
      bool ok = b[0] == float(i) && b[1] == float(i) && b[2] == -7.0f;
      b.assign(3, -7.0f);
      c.reduce(a.data(), b.data(), 2, reduce_op::sum, 2);  // rank 2 is the root; 0 and 1 run ahead
      if (r == 2) ok = ok && b[0] == float(3 * i + 3) && b[1] == float(3 * i + 3) && b[2] == -7.0f;
      if (ok) ++right[static_cast<std::size_t>(r)];
    }
  });
  for (std::size_t r = 0; r < out.size(); ++r) {
    INFO("rank " << r << ": " << out[r].what << " / " << out[r].error_message);
    CHECK(out[r].code == status::ok);
    CHECK(out[r].error_after == status::ok);
    CHECK(right[r] == calls);
    CHECK(comms[r].calls_issued() == std::uint64_t(2 * calls));
  }
}

TEST_CASE("process liveness probe: alive, zombie, reaped, reused pid", "[reliability][proc]") {
  using namespace collx::detail;
  const proc_identity me = self_identity();
  CHECK(me.pid == ::getpid());
  CHECK(me.start_time > 0);
  CHECK(me.pid_ns != 0);
  CHECK(probe(me, me.pid_ns) == proc_state::alive);
  proc_identity other_ns = me;
  other_ns.pid_ns = me.pid_ns + 1;
  CHECK(probe(other_ns, me.pid_ns) == proc_state::unknown);  // pids of another namespace mean nothing here
  proc_identity reused = me;
  reused.start_time = me.start_time + 1;
  CHECK(probe(reused, me.pid_ns) == proc_state::dead);

  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  proc_identity c{static_cast<std::int32_t>(child), 0, me.pid_ns};
  char st = 0;
  // The child's start time, once it is visible.
  while (!read_proc_stat(child, st, c.start_time)) std::this_thread::yield();
  CHECK(probe(c, me.pid_ns) == proc_state::alive);
  ::kill(child, SIGKILL);
  // Not reaped yet: a zombie is dead too (kill(pid, 0) would still succeed).
  for (int i = 0; i < 1000 && probe(c, me.pid_ns) != proc_state::dead; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  CHECK(probe(c, me.pid_ns) == proc_state::dead);
  CHECK(::kill(child, 0) == 0);
  int ws = 0;
  REQUIRE(::waitpid(child, &ws, 0) == child);
  CHECK(probe(c, me.pid_ns) == proc_state::dead);
}
