// Unit tests of the socket transport's parts that need no second host:
// interface selection (net/ifname.hpp), frame and hello checks
// (net/frame.hpp), and one proxy (net/proxy.hpp) fed hostile, truncated and
// valid bytes through a socketpair, with guard bytes around the FIFO slots;
// net::init_rank with two thread ranks over loopback; socket_options.
#include <collx/bootstrap/root.hpp>
#include <collx/net.hpp>
#include <collx/net/frame.hpp>
#include <collx/net/ifname.hpp>
#include <collx/net/proxy.hpp>
#include <collx/transport/shm_segment.hpp>

#include "net_matrix.hpp"

#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace collx;
using namespace collx::net;

namespace {

bool refused(const std::string& text, std::string_view what = "COLLX_SOCKET_IFNAME") {
  try {
    parse_if_filter(text, what);
  } catch (const error& e) {
    return e.code() == status::invalid_argument && std::string(e.what()).find(what) != std::string::npos;
  }
  return false;
}

std::vector<if_address> sample_host() {
  return {{"lo", AF_INET, "127.0.0.1"},    {"eth0", AF_INET6, "fd00::10"},
          {"eth0", AF_INET, "10.0.0.10"},  {"docker0", AF_INET, "172.17.0.1"},
          {"eth10", AF_INET, "10.1.0.10"}, {"ib0", AF_INET6, "fe80::1%ib0"},
          {"lo", AF_INET6, "::1"}};
}

std::vector<std::string> hosts(const std::vector<if_address>& v) {
  std::vector<std::string> out;
  for (const auto& a : v) out.push_back(a.host);
  return out;
}

}  // namespace

TEST_CASE("interface filter: NCCL's syntax parsed", "[net][ifname]") {
  if_filter f = parse_if_filter("eth0");
  CHECK((!f.exclude && !f.exact && f.names == std::vector<std::string>{"eth0"}));
  f = parse_if_filter("^docker,lo");
  CHECK((f.exclude && !f.exact && f.names == std::vector<std::string>{"docker", "lo"}));
  f = parse_if_filter("=eth1");
  CHECK((!f.exclude && f.exact && f.names == std::vector<std::string>{"eth1"}));
  f = parse_if_filter("^=eth1,eth2");
  CHECK((f.exclude && f.exact && f.names == std::vector<std::string>{"eth1", "eth2"}));
  for (const char* bad :
       {"", "^", "=", "^=", "eth0,,eth1", "eth0,", ",eth0", "eth 0", "eth0\t", "averyveryverylongname"})
    CHECK(refused(bad));
}

TEST_CASE("interface filter: prefixes, exact names, exclusion", "[net][ifname]") {
  CHECK(matches(parse_if_filter("eth"), "eth0"));
  CHECK(matches(parse_if_filter("eth"), "eth10"));
  CHECK_FALSE(matches(parse_if_filter("eth"), "ib0"));
  CHECK(matches(parse_if_filter("=eth1"), "eth1"));
  CHECK_FALSE(matches(parse_if_filter("=eth1"), "eth10"));
  CHECK_FALSE(matches(parse_if_filter("^docker,lo"), "docker0"));
  CHECK_FALSE(matches(parse_if_filter("^docker,lo"), "lo"));
  CHECK(matches(parse_if_filter("^docker,lo"), "eth0"));
  CHECK(matches(parse_if_filter("^=eth1"), "eth10"));
  CHECK_FALSE(matches(parse_if_filter("^=eth1"), "eth1"));
}

TEST_CASE("interface selection: order, families, default and fallback", "[net][ifname]") {
  const auto all = sample_host();
  // Interfaces in order; IPv4 before IPv6 within one.
  CHECK(hosts(select_interfaces(parse_if_filter("eth"), all)) ==
        std::vector<std::string>{"10.0.0.10", "fd00::10", "10.1.0.10"});
  CHECK(hosts(select_interfaces(parse_if_filter("eth"), all, AF_INET6)) ==
        std::vector<std::string>{"fd00::10"});
  CHECK(hosts(select_interfaces(parse_if_filter("^docker,lo"), all)) ==
        std::vector<std::string>{"10.0.0.10", "fd00::10", "10.1.0.10", "fe80::1%ib0"});
  // Unset: the default filter; only loopback present: loopback.
  CHECK(pick_interface(nullptr, nullptr, all).host == "10.0.0.10");
  CHECK(pick_interface(nullptr, "AF_INET6", all).host == "fd00::10");
  CHECK(pick_interface("=eth10", nullptr, all).host == "10.1.0.10");
  CHECK(pick_interface("ib", nullptr, all).host == "fe80::1%ib0");
  const std::vector<if_address> lo_only{{"lo", AF_INET, "127.0.0.1"}, {"lo", AF_INET6, "::1"}};
  CHECK(pick_interface(nullptr, nullptr, lo_only).host == "127.0.0.1");
  CHECK(pick_interface(nullptr, "AF_INET6", lo_only).host == "::1");
  // Nothing matches: not supported, naming the variable and what exists.
  try {
    pick_interface("wlan", nullptr, all);
    FAIL("no error");
  } catch (const error& e) {
    CHECK(e.code() == status::not_supported);
    CHECK(std::string(e.what()).find("COLLX_SOCKET_IFNAME='wlan'") != std::string::npos);
    CHECK(std::string(e.what()).find("eth0 10.0.0.10") != std::string::npos);
  }
  CHECK_THROWS_AS(pick_interface(nullptr, "AF_UNIX", all), error);
}

TEST_CASE("frames: round trip, and hostile bytes refused", "[net][frame]") {
  const frame f{frame_kind::data, 2, 0x1122334455667788ull, 4096};
  std::byte b[frame_bytes];
  encode(f, b);
  frame g;
  REQUIRE(decode(b, g).empty());
  CHECK((g.kind == f.kind && g.channel == f.channel && g.step == f.step && g.bytes == f.bytes));
  // Every single-bit flip of a valid header is refused.
  int flips_refused = 0;
  for (std::size_t bit = 0; bit < 8 * frame_bytes; ++bit) {
    std::byte c[frame_bytes];
    std::memcpy(c, b, frame_bytes);
    c[bit / 8] ^= std::byte(1u << (bit % 8));
    flips_refused += decode(c, g).empty() ? 0 : 1;
  }
  CHECK(flips_refused == int(8 * frame_bytes));
  // Random bytes are never a frame.
  std::mt19937_64 rng(42);
  int random_refused = 0;
  for (int i = 0; i < 100000; ++i) {
    std::byte c[frame_bytes];
    for (auto& x : c) x = std::byte(rng());
    random_refused += decode(c, g).empty() ? 0 : 1;
  }
  CHECK(random_refused == 100000);
  // A call record is exactly 16 bytes; a control frame may not announce a payload.
  encode(frame{frame_kind::call, 0, 1, 17}, b);
  CHECK(decode(b, g).find("call record of 17 bytes") != std::string::npos);
  CHECK(validate({frame_kind::call, 0, 0, call_bytes}, nullptr, 1).find("numbered 0") != std::string::npos);
  encode(frame{frame_kind::credit, 0, 1, 8}, b);
  CHECK(decode(b, g).find("control frame") != std::string::npos);
}

TEST_CASE("frames: limits of a channel", "[net][frame]") {
  // 4 slots of 256 bytes; next step 8 on this stream; receiver consumed 6;
  // 10 steps sent to the peer, which credited 5.
  const channel_rx rx[1] = {{4, 256, 8, 6, 10, 5}};
  CHECK(validate({frame_kind::data, 0, 8, 256}, rx, 1).empty());
  CHECK(validate({frame_kind::data, 0, 8, 0}, rx, 1).empty());
  CHECK(validate({frame_kind::data, 1, 8, 16}, rx, 1).find("channel 1") != std::string::npos);
  CHECK(validate({frame_kind::data, 0, 9, 16}, rx, 1).find("sequence broken") != std::string::npos);
  CHECK(validate({frame_kind::data, 0, 7, 16}, rx, 1).find("sequence broken") != std::string::npos);
  CHECK(validate({frame_kind::data, 0, 8, 257}, rx, 1).find("slot holds 256") != std::string::npos);
  const channel_rx full[1] = {{4, 256, 8, 4, 10, 5}};  // steps 4..7 still unread
  CHECK(validate({frame_kind::data, 0, 8, 16}, full, 1).find("flow control") != std::string::npos);
  CHECK(validate({frame_kind::credit, 0, 5, 0}, rx, 1).empty());
  CHECK(validate({frame_kind::credit, 0, 10, 0}, rx, 1).empty());
  CHECK(validate({frame_kind::credit, 0, 4, 0}, rx, 1).find("backwards") != std::string::npos);
  CHECK(validate({frame_kind::credit, 0, 11, 0}, rx, 1).find("never") == std::string::npos);
  CHECK(validate({frame_kind::credit, 0, 11, 0}, rx, 1).find("only 10 steps were sent") != std::string::npos);
  CHECK(validate({frame_kind::credit, 3, 5, 0}, rx, 1).find("channel 3") != std::string::npos);
}

TEST_CASE("frames: an abort carries a known cause", "[net][frame]") {
  CHECK(validate({frame_kind::abort, 0, 3 | (2ull << 16), 0}, nullptr, 1).empty());
  CHECK(validate({frame_kind::abort, 0, 0, 0}, nullptr, 1).find("unknown cause") != std::string::npos);
  CHECK(validate({frame_kind::abort, 0, 200, 0}, nullptr, 1).find("unknown cause") != std::string::npos);
  CHECK(validate({frame_kind::bye, 0, 0, 0}, nullptr, 1).empty());
}

TEST_CASE("hello: the job's secret and who connects to whom", "[net][frame]") {
  bootstrap::secret_bytes secret{};
  for (std::size_t i = 0; i < secret.size(); ++i) secret[i] = std::uint8_t(i * 7 + 1);
  std::byte b[hello_bytes];
  hello got;
  encode(hello{secret, 1, 3, 1, 2, 4}, b);
  CHECK(check_hello(b, secret, 3, 4, 2, got).empty());
  CHECK((got.src == 1 && got.dst == 3 && got.stream == 1));
  auto wrong = secret;
  wrong[15] ^= 1;
  CHECK(check_hello(b, wrong, 3, 4, 2, got).find("wrong job secret") != std::string::npos);
  CHECK(check_hello(b, secret, 2, 4, 2, got).find("addressed to rank 3") != std::string::npos);
  CHECK(check_hello(b, secret, 3, 5, 2, got).find("ranks") != std::string::npos);
  CHECK(check_hello(b, secret, 3, 4, 3, got).find("COLLX_SOCKET_NSTREAMS") != std::string::npos);
  encode(hello{secret, 7, 3, 0, 2, 4}, b);
  CHECK(check_hello(b, secret, 3, 4, 2, got).find("from rank 7") != std::string::npos);
  encode(hello{secret, 1, 3, 2, 2, 4}, b);
  CHECK(check_hello(b, secret, 3, 4, 2, got).find("stream 2") != std::string::npos);
  b[0] = std::byte('X');
  CHECK(check_hello(b, secret, 3, 4, 2, got).find("not a collx") != std::string::npos);
}

namespace {

constexpr std::uint32_t slots = 4, slot_bytes = 256;

/// Rank 0's proxy, its peer rank 1 played by the test through a socketpair.
struct proxy_rig {
  std::shared_ptr<transport::shm_segment> seg;
  transport::shm_view v;
  std::vector<std::uint32_t> step_bytes;
  std::unique_ptr<proxy> px;
  bootstrap::socket_fd peer;  // the test's end
  std::atomic<int> raised{0}, raised_peer{-1};

  proxy_rig() {
    seg = transport::shm_segment::create_anonymous(transport::shm_layout::make(2, slots, {slot_bytes}));
    v = seg->view();
    step_bytes.assign(2 * slots, 0);
    // Every FIFO byte starts as a guard value: whatever the proxy writes is visible.
    for (int src = 0; src < 2; ++src)
      for (int dst = 0; dst < 2; ++dst) std::memset(v.fifo(src, dst, 0).buffer, 0xEE, slots * slot_bytes);
    int sv[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0);
    peer = bootstrap::socket_fd(sv[1]);
    std::vector<peer_link> links(1);
    links[0].rank = 1;
    links[0].where = "rank 1 (test peer)";
    links[0].streams.emplace_back(sv[0]);
    proxy::hooks h;
    h.raise = [this](status, int q) {
      raised_peer = q;
      raised = 1;
      detail::store_release(v.abort_word(), 1u);
    };
    h.adopt = [this](std::uint64_t) { raised = 2; };
    h.cause = [] { return std::uint64_t{0}; };
    px = std::make_unique<proxy>(v, 0, std::move(links), 1, step_bytes.data(), 1000, std::move(h));
  }
  ~proxy_rig() {
    peer.reset();
    px->stop(std::chrono::milliseconds(200));
  }

  void send(const void* p, std::size_t n) {
    REQUIRE(
        bootstrap::detail::wait_fd(peer.get(), POLLOUT, bootstrap::clock::now() + std::chrono::seconds(5)));
    REQUIRE(::send(peer.get(), p, n, MSG_NOSIGNAL) == static_cast<ssize_t>(n));
  }
  void send(const frame& f, const std::vector<std::byte>& payload = {}) {
    std::byte b[frame_bytes];
    encode(f, b);
    send(b, frame_bytes);
    if (!payload.empty()) send(payload.data(), payload.size());
  }
  template <class Pred>
  bool within(Pred p, int ms = 5000) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < end)
      if (p()) return true;
      else std::this_thread::sleep_for(std::chrono::microseconds(200));
    return p();
  }
  std::uint64_t rx_tail() const { return detail::load_acquire(v.fifo(1, 0, 0).tail); }
  /// Bytes of FIFO 1→0 equal to the guard value from `from` to the end.
  bool untouched_from(std::size_t from) const {
    const std::byte* b = v.fifo(1, 0, 0).buffer;
    for (std::size_t i = from; i < std::size_t(slots) * slot_bytes; ++i)
      if (b[i] != std::byte(0xEE)) return false;
    return true;
  }
  bool failed_with(const std::string& what) {
    if (!within([&] { return raised.load() == 1; })) return false;
    const std::string t = px->failure_text(1);
    INFO(t);
    return raised_peer == 1 && t.find("rank 1 (test peer)") != std::string::npos &&
           t.find(what) != std::string::npos;
  }
};

std::vector<std::byte> bytes(std::size_t n, int seed) {
  std::vector<std::byte> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = std::byte((i * 31 + seed) & 0xff);
  return out;
}

}  // namespace

TEST_CASE("proxy: a valid step lands in its slot, nothing past it", "[net][proxy]") {
  proxy_rig r;
  const auto payload = bytes(100, 1);
  r.send(frame{frame_kind::data, 0, 0, 100}, payload);
  REQUIRE(r.within([&] { return r.rx_tail() == 1; }));
  CHECK(std::memcmp(r.v.fifo(1, 0, 0).buffer, payload.data(), 100) == 0);
  CHECK(r.untouched_from(100));
  CHECK(r.raised == 0);
  // The rank consumes the step: the proxy credits it on the stream.
  detail::store_release(r.v.fifo(1, 0, 0).head, std::uint64_t{1});
  std::byte b[frame_bytes];
  REQUIRE(r.within([&] { return ::recv(r.peer.get(), b, frame_bytes, MSG_PEEK) == ssize_t(frame_bytes); }));
  REQUIRE(::recv(r.peer.get(), b, frame_bytes, 0) == ssize_t(frame_bytes));
  frame f;
  REQUIRE(decode(b, f).empty());
  CHECK((f.kind == frame_kind::credit && f.step == 1));
}

TEST_CASE("proxy: a posted step goes out with the bytes it holds, credits reach head", "[net][proxy]") {
  proxy_rig r;
  const transport::fifo_ref out = r.v.fifo(0, 1, 0);
  const auto payload = bytes(40, 2);
  std::memcpy(out.slot(0), payload.data(), payload.size());
  r.step_bytes[(1 * 1 + 0) * slots + 0] = 40;
  detail::store_release(out.tail, std::uint64_t{1});
  std::byte b[frame_bytes + 40];
  REQUIRE(r.within([&] { return ::recv(r.peer.get(), b, sizeof b, MSG_PEEK) == ssize_t(sizeof b); }));
  REQUIRE(::recv(r.peer.get(), b, sizeof b, 0) == ssize_t(sizeof b));
  frame f;
  REQUIRE(decode(b, f).empty());
  CHECK((f.kind == frame_kind::data && f.step == 0 && f.bytes == 40));
  CHECK(std::memcmp(b + frame_bytes, payload.data(), 40) == 0);
  r.send(frame{frame_kind::credit, 0, 1, 0});
  CHECK(r.within([&] { return detail::load_acquire(out.head) == 1; }));
  // A credit for a step never sent is refused.
  r.send(frame{frame_kind::credit, 0, 2, 0});
  CHECK(r.failed_with("only 1 steps were sent"));
  CHECK(detail::load_acquire(out.head) == 1);
}

TEST_CASE("proxy: the previous rank's call records land in its record, in order only", "[net][proxy]") {
  proxy_rig r;
  std::vector<std::byte> rec(call_bytes);
  frame_detail::put64(rec.data(), 0x1234);
  frame_detail::put64(rec.data() + 8, 777);
  r.send(frame{frame_kind::call, 0, 5, call_bytes}, rec);
  const auto& e = r.v.record(1)->calls[5 % transport::call_history];
  REQUIRE(r.within([&] { return detail::load_acquire(&e.seq) == 5; }));
  CHECK((e.signature == 0x1234 && e.count == 777));
  r.send(frame{frame_kind::call, 0, 5, call_bytes}, rec);  // the same call again
  CHECK(r.failed_with("out of turn"));
  // The rank's own records go to the next rank (rank 1 here).
  proxy_rig q;
  auto& mine = q.v.record(0)->calls[1];
  detail::store_release(&mine.signature, std::uint64_t{42});
  detail::store_release(&mine.count, std::uint64_t{9});
  detail::store_release(&mine.seq, std::uint64_t{1});
  detail::store_release(q.v.fifo(1, 0, 0).head, std::uint64_t{0});
  const std::uint64_t one = 1;
  REQUIRE(::write(q.px->wake_fd(), &one, sizeof one) == sizeof one);
  std::byte b[frame_bytes + call_bytes];
  REQUIRE(q.within([&] { return ::recv(q.peer.get(), b, sizeof b, MSG_PEEK) == ssize_t(sizeof b); }));
  REQUIRE(::recv(q.peer.get(), b, sizeof b, 0) == ssize_t(sizeof b));
  frame f;
  REQUIRE(decode(b, f).empty());
  CHECK((f.kind == frame_kind::call && f.step == 1 && f.bytes == call_bytes));
  CHECK((frame_detail::get64(b + frame_bytes) == 42 && frame_detail::get64(b + frame_bytes + 8) == 9));
  // A rank that got call_history calls ahead of its proxy overwrote call 2:
  // the proxy goes on with the oldest call left (3), then the next ones in order.
  constexpr std::uint64_t h = transport::call_history;
  for (std::uint64_t k = 2; k <= h + 2; ++k) {
    auto& entry = q.v.record(0)->calls[k % h];
    detail::store_relaxed(&entry.seq, std::uint64_t{0});
    detail::store_release(&entry.signature, 1000 + k);
    detail::store_release(&entry.count, k);
    detail::store_release(&entry.seq, k);
  }
  REQUIRE(::write(q.px->wake_fd(), &one, sizeof one) == sizeof one);
  for (std::uint64_t want : {std::uint64_t{3}, std::uint64_t{4}}) {
    REQUIRE(q.within([&] { return ::recv(q.peer.get(), b, sizeof b, MSG_PEEK) == ssize_t(sizeof b); }));
    REQUIRE(::recv(q.peer.get(), b, sizeof b, 0) == ssize_t(sizeof b));
    REQUIRE(decode(b, f).empty());
    CHECK((f.kind == frame_kind::call && f.step == want));
    CHECK((frame_detail::get64(b + frame_bytes) == 1000 + want &&
           frame_detail::get64(b + frame_bytes + 8) == want));
  }
}

TEST_CASE("proxy: hostile or truncated bytes fail the communicator, write nothing, never hang",
          "[net][proxy]") {
  SECTION("garbage") {
    proxy_rig r;
    const char junk[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    r.send(junk, sizeof junk);
    CHECK(r.failed_with("not a collx frame"));
    CHECK(r.untouched_from(0));
  }
  SECTION("a payload larger than a slot") {
    proxy_rig r;
    r.send(frame{frame_kind::data, 0, 0, slot_bytes + 1}, bytes(slot_bytes + 1, 3));
    CHECK(r.failed_with("slot holds 256"));
    CHECK(r.untouched_from(0));
    CHECK(r.rx_tail() == 0);
  }
  SECTION("a step out of sequence") {
    proxy_rig r;
    r.send(frame{frame_kind::data, 0, 1, 8}, bytes(8, 4));
    CHECK(r.failed_with("sequence broken"));
    CHECK(r.untouched_from(0));
  }
  SECTION("a channel that does not exist") {
    proxy_rig r;
    r.send(frame{frame_kind::data, 5, 0, 8}, bytes(8, 5));
    CHECK(r.failed_with("channel 5"));
    CHECK(r.untouched_from(0));
  }
  SECTION("a sender ignoring its credits") {
    proxy_rig r;
    for (std::uint64_t s = 0; s < slots; ++s)
      r.send(frame{frame_kind::data, 0, s, slot_bytes}, bytes(slot_bytes, 6));
    REQUIRE(r.within([&] { return r.rx_tail() == slots; }));
    const std::vector<std::byte> before(r.v.fifo(1, 0, 0).buffer,
                                        r.v.fifo(1, 0, 0).buffer + slots * slot_bytes);
    r.send(frame{frame_kind::data, 0, slots, 8}, bytes(8, 7));  // slot 0 not consumed yet
    CHECK(r.failed_with("flow control"));
    CHECK(std::memcmp(before.data(), r.v.fifo(1, 0, 0).buffer, before.size()) == 0);
    CHECK(r.rx_tail() == slots);
  }
  SECTION("a header cut short, then the end of stream") {
    proxy_rig r;
    std::byte b[frame_bytes];
    encode(frame{frame_kind::data, 0, 0, 64}, b);
    r.send(b, 10);
    r.peer.reset();
    CHECK(r.failed_with("closed without a goodbye"));
    CHECK(r.untouched_from(0));
  }
  SECTION("a payload cut short, then the end of stream") {
    proxy_rig r;
    std::byte b[frame_bytes];
    encode(frame{frame_kind::data, 0, 0, 64}, b);
    r.send(b, frame_bytes);
    const auto half = bytes(32, 8);
    r.send(half.data(), half.size());
    r.peer.reset();
    CHECK(r.failed_with("closed without a goodbye"));
    CHECK(r.rx_tail() == 0);  // the step was never published
    CHECK(r.untouched_from(64));
  }
  SECTION("a bye, then the end of stream: no failure") {
    proxy_rig r;
    r.send(frame{frame_kind::bye, 0, 0, 0});
    r.peer.reset();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    CHECK(r.raised == 0);
  }
}

TEST_CASE("proxy: a step posted to a peer that said goodbye fails, naming the peer", "[net][proxy]") {
  // The peer closed its communicator: whatever this rank posts to it now is
  // never read, so the call must fail at once instead of waiting for the
  // deadline (or, for a send alone, returning as if delivered).
  proxy_rig r;
  r.send(frame{frame_kind::bye, 0, 0, 0});
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the proxy reads the bye
  REQUIRE(r.raised == 0);
  const transport::fifo_ref out = r.v.fifo(0, 1, 0);
  r.step_bytes[(1 * 1 + 0) * slots + 0] = 8;
  detail::store_release(out.tail, std::uint64_t{1});
  const std::uint64_t one = 1;
  REQUIRE(::write(r.px->wake_fd(), &one, sizeof one) == sizeof one);
  CHECK(r.failed_with("said goodbye"));
}

TEST_CASE("proxy: a step the peer left unread when it said goodbye fails, naming the peer", "[net][proxy]") {
  // The step went out before the goodbye arrived, but the peer's last credit
  // (sent before its goodbye) says it never read it: lost, not delivered.
  proxy_rig r;
  const transport::fifo_ref out = r.v.fifo(0, 1, 0);
  r.step_bytes[(1 * 1 + 0) * slots + 0] = 8;
  detail::store_release(out.tail, std::uint64_t{1});
  const std::uint64_t one = 1;
  REQUIRE(::write(r.px->wake_fd(), &one, sizeof one) == sizeof one);
  std::byte b[frame_bytes + 8];
  REQUIRE(r.within([&] { return ::recv(r.peer.get(), b, sizeof b, MSG_PEEK) == ssize_t(sizeof b); }));
  REQUIRE(::recv(r.peer.get(), b, sizeof b, 0) == ssize_t(sizeof b));
  r.send(frame{frame_kind::bye, 0, 0, 0});
  CHECK(r.failed_with("said goodbye"));
  CHECK(r.px->failure_text(1).find("1 step") != std::string::npos);
}

TEST_CASE("proxy: waiting for a peer's end of stream at destruction sleeps, bounded", "[net][proxy]") {
  // The peer never closes: stop() gives up at its limit, and meanwhile the
  // proxy thread sleeps in epoll_wait instead of spinning on a CPU its
  // rank's peers may need.
  proxy_rig r;
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  rusage before{}, after{};
  ::getrusage(RUSAGE_SELF, &before);
  const auto start = std::chrono::steady_clock::now();
  r.px->stop(std::chrono::milliseconds(600));
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ::getrusage(RUSAGE_SELF, &after);
  auto secs = [](const timeval& t) { return double(t.tv_sec) + double(t.tv_usec) * 1e-6; };
  const double cpu =
      secs(after.ru_utime) - secs(before.ru_utime) + secs(after.ru_stime) - secs(before.ru_stime);
  INFO("stop took " << wall << " s of wall time, " << cpu << " s of CPU");
  CHECK(wall >= 0.5);
  CHECK(wall < 3.0);
  CHECK(cpu < 0.15);
}

TEST_CASE("proxy: a failure of the proxy thread itself keeps its text for the rank", "[net][proxy]") {
  // Anything the thread did not foresee (here: a hook that throws) reaches
  // the rank as an error whose text says what happened.
  auto seg = transport::shm_segment::create_anonymous(transport::shm_layout::make(2, slots, {slot_bytes}));
  const transport::shm_view v = seg->view();
  std::vector<std::uint32_t> step_bytes(2 * slots, 0);
  int sv[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0);
  bootstrap::socket_fd peer(sv[1]);
  std::vector<peer_link> links(1);
  links[0].rank = 1;
  links[0].where = "rank 1 (test peer)";
  links[0].streams.emplace_back(sv[0]);
  std::atomic<int> raised{0}, raised_rank{-2};
  proxy::hooks h;
  h.raise = [&](status, int q) {
    raised_rank = q;
    raised = 1;
  };
  h.adopt = [](std::uint64_t) { throw std::runtime_error("hook out of order"); };
  h.cause = [] { return std::uint64_t{0}; };
  proxy px(v, 0, std::move(links), 1, step_bytes.data(), 1000, std::move(h));
  std::byte b[frame_bytes];
  encode(frame{frame_kind::abort, 0, 5, 0}, b);
  REQUIRE(::send(peer.get(), b, frame_bytes, MSG_NOSIGNAL) == ssize_t(frame_bytes));
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (raised == 0 && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  REQUIRE(raised == 1);
  CHECK(raised_rank == 0);
  const std::string t = px.failure_text(0);
  INFO(t);
  CHECK(t.find("the proxy thread failed: hook out of order") != std::string::npos);
  peer.reset();
  px.stop(std::chrono::milliseconds(200));
}

// net::init_rank end to end on loopback: two ranks as two threads of this
// process, each with its own proxy; values against a reference, guard words
// past the output, then a clean destroy (goodbyes, no error).

namespace {

/// What two loopback ranks of one test share: a fresh id, the loopback
/// interface, and a deadline that fails a broken test instead of hanging it.
/// Steps go over the network although the ranks share this host (they test
/// the socket path) unless `on_host` asks for shared memory.
struct loopback_job {
  explicit loopback_job(net::net_options::same_host on_host = net::net_options::same_host::network) {
    so.peers_on_host = on_host;
  }
  unique_id id = get_unique_id();
  net::net_options so = [] {
    net::socket_options o;
    o.ifname = "lo";
    return net::net_options(o);
  }();
  comm_options opt = [] {
    comm_options o;
    o.timeout = std::chrono::seconds(20);
    return o;
  }();
};

}  // namespace

TEST_CASE("net::init_rank: two ranks over loopback, all_reduce and all_gather", "[net][init]") {
  loopback_job job;
  job.so.socket.nstreams = 2;
  const auto& [id, so, opt] = job;
  constexpr std::size_t n = 100000, guard = 8;
  std::vector<std::string> errors(2);
  std::vector<std::vector<float>> out(2), gathered(2);
  auto rank = [&](int r) {
    try {
      net_communicator c = net::init_rank(2, id, r, opt, so);
      std::vector<float> x(n), y(n + guard, -7.0f), g(2 * n + guard, -7.0f);
      for (std::size_t i = 0; i < n; ++i) x[i] = float((r + 1) * (i % 17));
      c.all_reduce(x.data(), y.data(), n, reduce_op::sum);
      c.all_gather(x.data(), g.data(), n);
      out[r] = y;
      gathered[r] = g;
      c.destroy();
    } catch (const std::exception& e) {
      errors[r] = e.what();
    }
  };
  std::thread t1(rank, 1);
  rank(0);
  t1.join();
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r << ": " << errors[r]);
    REQUIRE(errors[r].empty());
    bool ok = true;
    for (std::size_t i = 0; i < n; ++i) ok = ok && out[r][i] == float(3 * (i % 17));
    for (std::size_t i = n; i < n + guard; ++i) ok = ok && out[r][i] == -7.0f;
    for (int q = 0; q < 2; ++q)
      for (std::size_t i = 0; i < n; ++i) ok = ok && gathered[r][q * n + i] == float((q + 1) * (i % 17));
    for (std::size_t i = 2 * n; i < 2 * n + guard; ++i) ok = ok && gathered[r][i] == -7.0f;
    CHECK(ok);
  }
}

namespace {

/// Two ranks over loopback do one all_reduce; then rank 1 closes its
/// communicator (after `linger`), and rank 0 runs `call` — once rank 1 has
/// left, or at once when `wait_before` (so it is already waiting when the
/// goodbye comes). Checks that rank 0's call fails promptly with peer_dead,
/// naming rank 1 and its departure.
template <class Call>
void check_fails_after_peer_left(bool wait_before, std::chrono::milliseconds linger, Call call,
                                 net::net_options::same_host on_host = net::net_options::same_host::network) {
  const loopback_job job(on_host);
  const auto& [id, so, opt] = job;
  constexpr std::size_t n = 1000;
  std::atomic<bool> left{false};
  std::string error1, msg0;
  status code0 = status::ok;
  double took0 = 0;
  std::thread t1([&] {
    try {
      net_communicator c = net::init_rank(2, id, 1, opt, so);
      std::vector<float> x(n, 1.0f), y(n);
      c.all_reduce(x.data(), y.data(), n, reduce_op::sum);
      std::this_thread::sleep_for(linger);
      c.destroy();  // says goodbye: rank 0's next step has no partner
    } catch (const std::exception& e) {
      error1 = e.what();
    }
    left = true;
  });
  try {
    net_communicator c = net::init_rank(2, id, 0, opt, so);
    std::vector<float> x(n, 1.0f), y(n);
    c.all_reduce(x.data(), y.data(), n, reduce_op::sum);
    if (!wait_before) {
      while (!left) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the goodbye has arrived
    }
    const auto start = std::chrono::steady_clock::now();
    try {
      call(c, x.data(), y.data(), n);
      msg0 = "no error";
    } catch (const error& e) {
      code0 = e.code();
      msg0 = e.what();
    }
    took0 = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  } catch (const std::exception& e) {
    msg0 = std::string("setup: ") + e.what();
  }
  t1.join();
  INFO("rank 0: " << msg0 << " after " << took0 << " s; rank 1: " << error1);
  REQUIRE(error1.empty());
  CHECK(code0 == status::peer_dead);
  CHECK(msg0.find("rank 1 (127.0.0.1:") != std::string::npos);
  CHECK(msg0.find("said goodbye") != std::string::npos);
  CHECK(took0 < 5.0);
}

}  // namespace

TEST_CASE("net::init_rank: a call after a peer closed its communicator fails at once, naming it",
          "[net][init]") {
  check_fails_after_peer_left(
      false, std::chrono::milliseconds(0),
      [](net_communicator& c, float* x, float* y, std::size_t n) { c.all_reduce(x, y, n, reduce_op::sum); });
}

TEST_CASE("net::init_rank: a receive from a peer that closed its communicator fails at once, naming it",
          "[net][init]") {
  // Rank 0 only receives in a broadcast from rank 1, which has left (or
  // leaves while rank 0 waits): it posts nothing, so only its wait can see
  // that the step never comes.
  const bool already_waiting = GENERATE(false, true);
  const bool shared = GENERATE(false, true);
  INFO("rank 0 " << (already_waiting ? "waits before" : "calls after") << " rank 1 leaves; steps "
                 << (shared ? "through shared memory" : "over the network"));
  check_fails_after_peer_left(
      already_waiting, std::chrono::milliseconds(already_waiting ? 300 : 0),
      [](net_communicator& c, float* x, float* y, std::size_t n) { c.broadcast(x, y, n, 1); },
      shared ? net::net_options::same_host::shared_memory : net::net_options::same_host::network);
}

TEST_CASE("net::init_rank: a send to a peer of this host that closed its communicator fails, naming it",
          "[net][init][host]") {
  // Through shared memory the proxy carries no step, so only the goodbye and
  // the credits the peer stored in memory can tell that rank 0's steps are
  // never read.
  check_fails_after_peer_left(
      false, std::chrono::milliseconds(0),
      [](net_communicator& c, float* x, float* y, std::size_t n) { c.all_reduce(x, y, n, reduce_op::sum); },
      net::net_options::same_host::shared_memory);
}

TEST_CASE("net::init_rank: ranks of one host move their steps through shared memory", "[net][init][host]") {
  // Thread ranks: every collective and algorithm (net_matrix.hpp: values
  // against a reference, guard words on both sides), then where the steps
  // went. One host, shared memory: no step over the network, every other
  // rank through memory. One host, network (the control): every step over
  // TCP. Two hosts of two ranks (net_options::host): the host mate through
  // memory, the other two over TCP, both in one schedule.
  enum class layout { one_host_memory, one_host_network, two_hosts };
  const layout lay = GENERATE(layout::one_host_memory, layout::one_host_network, layout::two_hosts);
  const int P = lay == layout::two_hosts ? 4 : 3;
  auto host_of = [&](int r) { return lay == layout::two_hosts ? r / 2 : 0; };
  INFO((lay == layout::one_host_memory    ? "one host, shared memory"
        : lay == layout::one_host_network ? "one host, network"
                                          : "two hosts"));
  loopback_job job(lay == layout::one_host_network ? net::net_options::same_host::network
                                                   : net::net_options::same_host::shared_memory);
  std::vector<std::string> errors(P);
  std::vector<net_matrix::tally> t(P);
  std::vector<std::vector<int>> through(P);
  std::vector<std::uint64_t> sent(P), sends(P);
  std::vector<std::vector<proto_id>> small_protos(P);
  auto rank = [&](int r) {
    try {
      net::net_options so = job.so;
      so.host = "test-host-" + std::to_string(host_of(r));
      net_communicator c = net::init_rank(P, job.id, r, job.opt, so);
      net_matrix::check_matrix(c, {1, 7, 1000, 65537, 300001}, t[r]);
      // The automatic choice's protocols at small sizes: LL only where no
      // peer's steps arrive whole through the proxy (one host, memory).
      for (std::size_t n : {1, 2, 4, 8, 16, 64, 256}) {
        std::vector<float> x(n, 1.0f), y(n);
        c.all_reduce(x.data(), y.data(), n, reduce_op::sum);
        small_protos[r].push_back(c.last_variant().proto);
      }
      through[r] = net::peers_through_memory(c);
      sent[r] = net::steps_over_network(c);
      sends[r] = net::sends_over_network(c);
      c.destroy();
    } catch (const std::exception& e) {
      errors[r] = e.what();
    }
  };
  std::vector<std::thread> threads;
  for (int r = 1; r < P; ++r) threads.emplace_back(rank, r);
  rank(0);
  for (auto& th : threads) th.join();
  for (int r = 0; r < P; ++r) {
    INFO("rank " << r << ": " << errors[r] << t[r].first);
    REQUIRE(errors[r].empty());
    CHECK(t[r].checks > 100);
    CHECK(t[r].failures == 0);
    std::vector<int> mates;
    for (int q = 0; q < P; ++q)
      if (q != r && host_of(q) == host_of(r) && lay != layout::one_host_network) mates.push_back(q);
    CHECK(through[r] == mates);
    if (lay == layout::one_host_memory) {
      CHECK(sent[r] == 0);
      CHECK(sends[r] == 0);  // nor call records: the next rank reads them in this rank's memory
    } else {
      CHECK(sent[r] > 0);
    }
    // Every rank took the same protocols; with a peer over the network never
    // LL, whose step waits there for the proxy's whole step as Simple's
    // does, with twice the bytes (bench/results/net_ll.md).
    CHECK(small_protos[r] == small_protos[0]);
    if (lay != layout::one_host_memory)
      CHECK(std::count(small_protos[r].begin(), small_protos[r].end(), proto_id::ll) == 0);
  }
}

TEST_CASE("net::init_rank: the automatic choice takes LL through memory, never over the network",
          "[net][init][host]") {
  // Two thread ranks (they fit this host's CPUs, where the shm preset takes
  // direct/LL for 8 B, tune::shm_host): one host through shared memory,
  // where LL's reader polls the lines as they land, against the same host
  // over the network and two hosts, where every step arrives whole through
  // the proxy and LL is priced no quicker than Simple (tune::on_whole_steps).
  // The first call, before contention is measured.
  enum class layout { one_host_memory, one_host_network, two_hosts };
  const layout lay = GENERATE(layout::one_host_memory, layout::one_host_network, layout::two_hosts);
  INFO((lay == layout::one_host_memory    ? "one host, shared memory"
        : lay == layout::one_host_network ? "one host, network"
                                          : "two hosts"));
  loopback_job job(lay == layout::one_host_network ? net::net_options::same_host::network
                                                   : net::net_options::same_host::shared_memory);
  std::vector<proto_id> chosen(2, proto_id::automatic);
  std::vector<float> result(2, 0);
  const auto outcomes = net_matrix::run_ranks(2, [&](int r) {
    net::net_options so = job.so;
    so.host = "test-host-" + std::to_string(lay == layout::two_hosts ? r : 0);
    net_communicator c = net::init_rank(2, job.id, r, job.opt, so);
    float x = float(r + 1), y = 0;
    c.all_reduce(&x, &y, 1, reduce_op::sum);
    chosen[r] = c.last_variant().proto;
    result[r] = y;
    c.destroy();
  });
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r << ": " << outcomes[r].error);
    REQUIRE(outcomes[r].error.empty());
    CHECK(result[r] == 3.0f);
    CHECK(chosen[r] == (lay == layout::one_host_memory ? proto_id::ll : proto_id::simple));
  }
}

TEST_CASE("ranks_per_host: hosts of equal size numbered host by host, else 0", "[net][host]") {
  using v = std::vector<std::uint64_t>;
  CHECK(net::ranks_per_host(v{7, 7, 9, 9}) == 2);
  CHECK(net::ranks_per_host(v{7, 7, 7, 9, 9, 9}) == 3);
  CHECK(net::ranks_per_host(v{1, 1, 2, 2, 3, 3}) == 2);
  CHECK(net::ranks_per_host(v{7, 9, 7, 9}) == 0);        // round robin
  CHECK(net::ranks_per_host(v{7, 7, 9, 9, 7, 7}) == 0);  // one host in two blocks
  CHECK(net::ranks_per_host(v{7, 7, 9, 9, 9}) == 0);     // unequal hosts
  CHECK(net::ranks_per_host(v{7, 7, 7, 7}) == 0);        // one host
  CHECK(net::ranks_per_host(v{7, 8, 9}) == 0);           // one rank per host
  CHECK(net::ranks_per_host(v{}) == 0);
}

TEST_CASE("net::init_rank: tree and rhd all_reduce keep their large transfers inside a host",
          "[net][init][host][tree]") {
  // Thread ranks playing hosts of L ranks, numbered host by host, over
  // loopback TCP between hosts and shared memory inside. tree/Simple and
  // rhd/Simple all_reduce against a reference with guard words, then where
  // their steps went (1 Mi floats, even: the two trees' halves are equal).
  // The tree sends over the network one half of the data per link it has to
  // another host in the node-shaped trees (algo::tree::node with L), so its
  // steps over the network are proportional to those links; the flat shape
  // sends other shares (on 2 hosts of 2: 1, 3, 3, 1 halves where the node
  // shape sends 1, 1, 1, 1). rhd across 2 hosts of 2 exchanges its quarters
  // across and its halves inside (nearest partners first): the tree's steps
  // over the network on every rank; farthest first it took twice as many.
  const auto [P, L] = GENERATE(table<int, int>({{4, 2}, {6, 3}, {6, 2}, {8, 4}}));
  INFO("P=" << P << " L=" << L);
  loopback_job job(net::net_options::same_host::shared_memory);
  const variant_choice tree{algo_id::tree, proto_id::simple}, rhd{algo_id::rhd, proto_id::simple};
  std::vector<net_matrix::tally> t(static_cast<std::size_t>(P));
  std::vector<std::uint64_t> steps(static_cast<std::size_t>(P)), rhd_steps(static_cast<std::size_t>(P));
  constexpr std::size_t big = 1 << 20;
  // A proxy counts a step when it queues it, which may be after its rank
  // returned; once every rank has returned from a call, each has received
  // every step, so each was counted. The ranks meet before reading a count.
  std::atomic<int> met{0};
  auto meet = [&](int k) {  // the k-th meeting of the P ranks; a deadline, not a hang
    met.fetch_add(1);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (met.load() < k * P && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  };
  const auto o = net_matrix::run_ranks(P, [&](int r) {
    int meetings = 0;
    net::net_options so = job.so;
    so.host = "tree-host-" + std::to_string(r / L);
    net_communicator c = net::init_rank(P, job.id, r, job.opt, so);
    auto& tally = t[static_cast<std::size_t>(r)];
    for (const variant_choice v : {tree, rhd})
      for (std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{1000}, std::size_t{65537}, big}) {
        std::vector<float> x(n);
        for (std::size_t i = 0; i < n; ++i) x[i] = float(net_matrix::input(r, i));
        net_matrix::guarded<float> y(n);
        if (n == big) meet(++meetings);
        const std::uint64_t before = net::steps_over_network(c);
        c.all_reduce(x.data(), y.data(), n, reduce_op::sum, v);
        if (n == big) {
          meet(++meetings);
          (v.algo == algo_id::tree ? steps : rhd_steps)[r] = net::steps_over_network(c) - before;
        }
        bool ok = y.guards_intact(n);
        for (std::size_t i = 0; i < n && ok; ++i) {
          double want = 0;
          for (int q = 0; q < P; ++q) want += net_matrix::input(q, i);
          ok = double(y.data()[i]) == want;
        }
        tally.expect(ok, std::string(name(v.algo)) + " all_reduce n=" + std::to_string(n));
      }
    c.destroy();
  });
  std::vector<int> halves(static_cast<std::size_t>(P), 0);  // halves each rank sends to another host
  for (int r = 0; r < P; ++r)
    for (int w = 0; w < 2; ++w) {
      const auto l = algo::tree::node(coll::all_reduce, P, r, 0, w, L);
      halves[static_cast<std::size_t>(r)] += l.parent >= 0 && l.parent / L != r / L;
      for (int k = 0; k < l.nkids; ++k) halves[static_cast<std::size_t>(r)] += l.kids[k] / L != r / L;
    }
  for (int r = 0; r < P; ++r) {
    const auto i = static_cast<std::size_t>(r);
    INFO("rank " << r << ": " << o[i].error << t[i].first << "; tree: " << steps[i]
                 << " steps over the network for " << halves[i] << " half(s); rhd: " << rhd_steps[i]);
    REQUIRE(o[i].error.empty());
    CHECK(t[i].failures == 0);
    CHECK(t[i].checks == 10);
    CHECK((steps[i] == 0) == (halves[i] == 0));
    // Equal steps per half on every rank.
    CHECK(steps[i] * std::uint64_t(halves[0]) == steps[0] * std::uint64_t(halves[i]));
    if ((P & (P - 1)) == 0) CHECK(rhd_steps[i] == rhd_steps[0]);  // a hypercube: symmetric
    if (P == 4) CHECK(rhd_steps[i] == steps[i]);
  }
}

TEST_CASE("net::init_rank: the automatic choice prices what crosses hosts", "[net][init][host][tree]") {
  // 4 thread ranks, all_reduce of 8 MiB, automatic. On one host the
  // one-node model takes rhd: direct two-shot, one step shorter, passes its
  // own block through its loopback FIFO, which costs more at this size (the
  // preset's pick at 4 MiB, test_tune_constexpr.cpp). On 2 hosts of 2 it
  // is placed on them (comm/dispatch.hpp, model_for): direct would send
  // (P − L)/(P − 1) of everything across, rhd (nearest partners first) and
  // the tree's node shape half as much, so the choice is one of those two.
  const bool two_hosts = GENERATE(false, true);
  INFO((two_hosts ? "two hosts of two" : "one host"));
  loopback_job job(net::net_options::same_host::shared_memory);
  constexpr int P = 4;
  constexpr std::size_t n = std::size_t(2) << 20;  // floats: 8 MiB
  std::vector<algo_id> picked(P, algo_id::automatic);
  std::vector<net_matrix::tally> t(P);
  const auto o = net_matrix::run_ranks(P, [&](int r) {
    net::net_options so = job.so;
    so.host = "pick-host-" + std::to_string(two_hosts ? r / 2 : 0);
    net_communicator c = net::init_rank(P, job.id, r, job.opt, so);
    std::vector<float> x(n);
    for (std::size_t i = 0; i < n; ++i) x[i] = float(net_matrix::input(r, i));
    net_matrix::guarded<float> y(n);
    c.all_reduce(x.data(), y.data(), n, reduce_op::sum);
    picked[static_cast<std::size_t>(r)] = c.last_variant().algo;
    bool ok = y.guards_intact(n);
    for (std::size_t i = 0; i < n && ok; ++i) {
      double want = 0;
      for (int q = 0; q < P; ++q) want += net_matrix::input(q, i);
      ok = double(y.data()[i]) == want;
    }
    t[static_cast<std::size_t>(r)].expect(ok, "automatic all_reduce");
    c.destroy();
  });
  for (int r = 0; r < P; ++r) {
    const auto i = static_cast<std::size_t>(r);
    INFO("rank " << r << ": " << o[i].error << t[i].first << " picked " << name(picked[i]));
    REQUIRE(o[i].error.empty());
    CHECK(t[i].failures == 0);
    CHECK(picked[i] == picked[0]);
    if (two_hosts) CHECK((picked[i] == algo_id::rhd || picked[i] == algo_id::tree));
    else CHECK(picked[i] == algo_id::rhd);
  }
}

TEST_CASE("net::init_rank: calls that differ in reduce_op fail with mismatch, on one host and across",
          "[net][init][host]") {
  // Rank 1 compares its calls with rank 0's record after each call: read in
  // rank 0's memory when they share a host (the steps, through memory, may
  // outrun a record sent over the network), else the copy the proxy keeps.
  const bool shared = GENERATE(true, false);
  INFO((shared ? "shared memory" : "network"));
  const loopback_job job(shared ? net::net_options::same_host::shared_memory
                                : net::net_options::same_host::network);
  const auto o = net_matrix::run_ranks(2, [&](int r) {
    net_communicator c = net::init_rank(2, job.id, r, job.opt, job.so);
    std::vector<float> x(1000, 1.0f), y(1000);
    for (int i = 0; i < 5; ++i)
      c.all_reduce(x.data(), y.data(), x.size(), r == 1 ? reduce_op::max : reduce_op::sum);
  });
  INFO(o[0].error << "\n" << o[1].error);
  CHECK(o[1].code == status::mismatch);
  CHECK(o[1].error.find("reduce_op") != std::string::npos);
  CHECK(o[0].code != status::ok);
}

TEST_CASE("net::init_rank: a small call's credit and call record ride its step: one send per call",
          "[net][init]") {
  // Two ranks over loopback TCP, 400 back-to-back 8-byte all_reduces (one
  // step each way per call). Each rank's step carries the credit for the
  // peer's previous step and this call's record, so a rank makes about one
  // send per call (at most: a send may carry two steps); sent as soon as
  // they appear, credits and records took two to three. Values are checked
  // at every call.
  const loopback_job job;
  constexpr int calls = 400;
  std::vector<std::string> errors(2);
  std::vector<std::uint64_t> sends(2), steps(2);
  std::vector<int> wrong(2, 0);
  auto rank = [&](int r) {
    try {
      net_communicator c = net::init_rank(2, job.id, r, job.opt, job.so);
      std::vector<float> x(2), y(4, -1.0f);  // y[2..3]: guards
      // A call may return before the proxy has sent its own step (the peer
      // still waits for it): count from when the warm-up's step went, and
      // to when the last call's did (each within 5 s).
      auto steps_reach = [&](std::uint64_t want) {
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (net::steps_over_network(c) < want && std::chrono::steady_clock::now() < until)
          std::this_thread::sleep_for(std::chrono::microseconds(100));
      };
      c.all_reduce(x.data(), y.data(), 2, reduce_op::sum);  // connections warm
      steps_reach(1);
      const std::uint64_t s0 = net::sends_over_network(c), t0 = net::steps_over_network(c);
      for (int i = 0; i < calls; ++i) {
        x = {float(r + i), float(2 * r - i)};
        c.all_reduce(x.data(), y.data(), 2, reduce_op::sum);
        wrong[r] += y[0] != float(1 + 2 * i) || y[1] != float(2 - 2 * i) || y[2] != -1.0f || y[3] != -1.0f;
      }
      steps_reach(t0 + calls);
      sends[r] = net::sends_over_network(c) - s0;
      steps[r] = net::steps_over_network(c) - t0;
      c.destroy();
    } catch (const std::exception& e) {
      errors[r] = e.what();
    }
  };
  std::thread t(rank, 1);
  rank(0);
  t.join();
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r << ": " << errors[r] << "; " << sends[r] << " sends, " << steps[r] << " steps");
    REQUIRE(errors[r].empty());
    CHECK(wrong[r] == 0);
    CHECK(steps[r] == calls);
    CHECK(sends[r] > 0);  // several steps may share a send when one waited for the socket
    CHECK(sends[r] < calls * 3 / 2);
  }
}

TEST_CASE("net options: COLLX_NET_SHM", "[net][init][host]") {
  ::unsetenv("COLLX_NET_SHM");
  CHECK(net::net_options::from_env().peers_on_host == net::net_options::same_host::shared_memory);
  ::setenv("COLLX_NET_SHM", "0", 1);
  CHECK(net::net_options::from_env().peers_on_host == net::net_options::same_host::network);
  ::setenv("COLLX_NET_SHM", "yes", 1);
  CHECK_THROWS_WITH(net::net_options::from_env(), Catch::Contains("COLLX_NET_SHM"));
  ::unsetenv("COLLX_NET_SHM");
}

TEST_CASE("net::init_rank: a rank waiting for a late peer sleeps, leaving the CPU to the proxies",
          "[net][init]") {
  // Rank 1 comes 1.5 s late. Rank 0 waits in its all_reduce: after its spin
  // and a few yields it must sleep on its doorbell (the proxy rings it), not
  // yield for the whole wait, which takes a CPU its proxy (and here rank 1's)
  // needs. Its thread's CPU time during the call tells which it did: a
  // yielding loop uses the CPU whenever no other thread wants it.
  // Through shared memory the peer, not the proxy, rings the doorbell.
  const bool shared = GENERATE(false, true);
  INFO((shared ? "shared memory" : "network"));
  const loopback_job job(shared ? net::net_options::same_host::shared_memory
                                : net::net_options::same_host::network);
  const auto& [id, so, opt] = job;
  constexpr std::size_t n = 4096;
  std::string error1, error0;
  double cpu0 = 0, wall0 = 0;
  bool ok0 = false;
  std::thread t1([&] {
    try {
      net_communicator c = net::init_rank(2, id, 1, opt, so);
      std::vector<float> x(n, 2.0f), y(n);
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      c.all_reduce(x.data(), y.data(), n, reduce_op::sum);
      c.destroy();
    } catch (const std::exception& e) {
      error1 = e.what();
    }
  });
  try {
    net_communicator c = net::init_rank(2, id, 0, opt, so);
    std::vector<float> x(n, 1.0f), y(n + 8, -7.0f);
    auto thread_cpu = [] {
      timespec ts{};
      ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
      return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
    };
    const double c0 = thread_cpu();
    const auto w0 = std::chrono::steady_clock::now();
    c.all_reduce(x.data(), y.data(), n, reduce_op::sum);
    wall0 = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
    cpu0 = thread_cpu() - c0;
    ok0 = std::all_of(y.begin(), y.begin() + n, [](float v) { return v == 3.0f; }) &&
          std::all_of(y.begin() + n, y.end(), [](float v) { return v == -7.0f; });
    c.destroy();
  } catch (const std::exception& e) {
    error0 = e.what();
  }
  t1.join();
  INFO("rank 0: " << error0 << "; rank 1: " << error1 << "; rank 0 waited " << wall0 << " s using " << cpu0
                  << " s of CPU");
  REQUIRE(error0.empty());
  REQUIRE(error1.empty());
  CHECK(ok0);
  CHECK(wall0 > 1.0);  // it did wait for the late peer
  CHECK(cpu0 < 0.25 * wall0);
}

TEST_CASE("net options: COLLX_NET chooses the transport, bad stream counts refused", "[net][init]") {
  ::setenv("COLLX_NET", "ib", 1);
  CHECK(net::net_options::from_env().transport == net::net_options::kind::ib);
  ::setenv("COLLX_NET", "tcp", 1);
  CHECK_THROWS_WITH(net::net_options::from_env(), Catch::Contains("expected socket or ib"));
  ::setenv("COLLX_NET", "socket", 1);
  ::setenv("COLLX_SOCKET_NSTREAMS", "17", 1);
  CHECK_THROWS_AS(net::socket_options::from_env(), error);
  ::setenv("COLLX_SOCKET_NSTREAMS", "4", 1);
  CHECK(net::socket_options::from_env().nstreams == 4);
  ::unsetenv("COLLX_SOCKET_NSTREAMS");
  ::unsetenv("COLLX_NET");
}
