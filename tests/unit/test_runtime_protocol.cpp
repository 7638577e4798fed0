// proto::runtime (proto/runtime.hpp): one schedule instantiation whose
// primitives run the protocol chosen when they are made. For each protocol of
// the list, a call over proto::runtime must behave as the same call over the
// static protocol: right values, guard elements around the output untouched,
// the same chunk size, and the same number of steps on every channel (only
// the chosen protocol's; each protocol packs a slot differently, so another
// engine on that channel would take another number of steps).
#include <collx/algo/ring.hpp>
#include <collx/algo/tree.hpp>
#include <collx/exec/host.hpp>
#include <collx/prims.hpp>
#include <collx/proto/list.hpp>
#include <collx/proto/runtime.hpp>
#include <collx/reduce_op.hpp>
#include <collx/transport/shm.hpp>
#include <collx/transport/shm_segment.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

using namespace collx;

namespace {

using any_protocol = proto::runtime<proto::simple, proto::ll, proto::ll128>;

static_assert(any_protocol::index_of_channel(proto::channel_of<proto::simple>) == 0);
static_assert(any_protocol::index_of_channel(proto::channel_of<proto::ll128>) == 2);
static_assert(proto::runtime<proto::ll128, proto::simple>::index_of_channel(proto::channel_of<proto::ll>) ==
              -1);
static_assert(proto::channel_of_id(proto::ll::id) == proto::channel_of<proto::ll>);

constexpr std::size_t guard = 16;
constexpr float guard_value = -12345.5f;

/// Steps published on channel `ch` over every connection of the segment.
std::uint64_t steps_on(const transport::shm_view& view, int P, int ch) {
  std::uint64_t n = 0;
  for (int a = 0; a < P; ++a)
    for (int b = 0; b < P; ++b)
      if (a != b) n += detail::load_acquire(view.fifo(a, b, ch).tail);
  return n;
}

struct run_result {
  std::vector<std::uint64_t> steps;  // per channel
  std::size_t max_chunk = 0;         // what the schedule saw on rank 0
};

/// Runs Algo's all_reduce on P thread ranks with primitives over Pr (a
/// protocol, or proto::runtime choosing the one on channel `ch`); checks the
/// sums and the guards.
template <class Algo, class Pr>
run_result run_all_reduce(int P, int ch, std::size_t count) {
  // Small FIFOs: a call takes many steps and fills them.
  const auto layout = transport::shm_layout::make(static_cast<std::uint32_t>(P), 4, {2048, 2048, 2048});
  auto seg = transport::shm_segment::create_anonymous(layout);
  const transport::shm_view view = seg->view();
  std::vector<std::vector<float>> send(static_cast<std::size_t>(P)), recv(static_cast<std::size_t>(P));
  for (int r = 0; r < P; ++r) {
    auto& s = send[static_cast<std::size_t>(r)];
    s.resize(count);
    for (std::size_t i = 0; i < count; ++i) s[i] = float((r + 1) * 1000 + int(i % 97));
    recv[static_cast<std::size_t>(r)].assign(count + 2 * guard, guard_value);
  }
  std::vector<status> st(static_cast<std::size_t>(P), status::ok);
  std::size_t max_chunk = 0;
  std::vector<std::thread> ranks;
  for (int r = 0; r < P; ++r)
    ranks.emplace_back([&, r] {
      exec::host ex;
      ex.abort_word = view.abort_word();
      ex.deadline_ns = 0;  // timeout_ns from the first slow wait
      ex.timeout_ns = 30'000'000'000ull;
      ex.spin_ns = 2'000;
      reducer<float, reduce_op::sum> red{static_cast<std::uint32_t>(P)};
      prims<Pr, exec::host, transport::shm_view, float, decltype(red)> p(ex, view, r, red, ch);
      if (r == 0) max_chunk = p.max_chunk();
      schedule_args<float> a{send[static_cast<std::size_t>(r)].data(),
                             recv[static_cast<std::size_t>(r)].data() + guard,
                             count,
                             0,
                             r,
                             P,
                             nullptr,
                             nullptr,
                             nullptr};
      st[static_cast<std::size_t>(r)] = Algo::template run<coll::all_reduce>(p, a);
      if (st[static_cast<std::size_t>(r)] != status::ok)
        detail::store_relaxed(view.abort_word(), std::uint32_t{1});  // the peers stop waiting
    });
  for (auto& t : ranks) t.join();
  for (int r = 0; r < P; ++r) {
    INFO("rank " << r);
    REQUIRE(st[static_cast<std::size_t>(r)] == status::ok);
    const auto& out = recv[static_cast<std::size_t>(r)];
    std::size_t wrong = 0, guards = 0;
    for (std::size_t i = 0; i < count; ++i) {
      float want = 0;  // small integers: exact in float whatever the order
      for (int q = 0; q < P; ++q) want += float((q + 1) * 1000 + int(i % 97));
      wrong += out[guard + i] != want;
    }
    for (std::size_t i = 0; i < guard; ++i)
      guards += (out[i] != guard_value) + (out[guard + count + i] != guard_value);
    CHECK(wrong == 0);
    CHECK(guards == 0);
  }
  run_result res;
  for (int c = 0; c < proto::channel_count; ++c) res.steps.push_back(steps_on(view, P, c));
  res.max_chunk = max_chunk;
  return res;
}

template <class Algo, class Proto>
void check_protocol(int P) {
  constexpr int ch = proto::channel_of<Proto>;
  INFO(Algo::name << " on " << P << " ranks, protocol " << Proto::name);
  const run_result rt = run_all_reduce<Algo, any_protocol>(P, ch, 3000);
  const run_result st = run_all_reduce<Algo, Proto>(P, ch, 3000);
  CHECK(rt.max_chunk == st.max_chunk);
  for (int c = 0; c < proto::channel_count; ++c) {
    INFO("channel " << proto::channel_names[static_cast<std::size_t>(c)] << ": " << rt.steps[c]
                    << " steps over proto::runtime, " << st.steps[c] << " over the protocol itself");
    CHECK(rt.steps[c] == st.steps[c]);
    if (c == ch) CHECK(rt.steps[c] > 0);
    else CHECK(rt.steps[c] == 0);
  }
}

template <class Algo>
void check_each_protocol(int P) {
  check_protocol<Algo, proto::simple>(P);
  check_protocol<Algo, proto::ll>(P);
  check_protocol<Algo, proto::ll128>(P);
}

}  // namespace

TEST_CASE("proto::runtime runs the chosen protocol, on its channel only", "[runtime_protocol]") {
  check_each_protocol<algo::ring>(3);
  check_each_protocol<algo::tree>(4);
}
