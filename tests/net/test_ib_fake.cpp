// The ib transport (net/ib_proxy.hpp) on the fake verbs fabric
// (net/fake_verbs.hpp), so that it runs where there is no RDMA device:
//   * the fake's RC semantics, each against what verbs specify (ordered
//     writes, immediates, receivers not ready, key and range checks, the
//     error state and its flushes, injected faults, completion events);
//   * communicators of 2-4 thread ranks, 1 or 2 queue pairs per peer: every
//     collective × algorithm the proxied transport serves, against a
//     reference with guard words (tests/net/net_matrix.hpp);
//   * failures: a QP in error, retries exceeded, a remote key that does not
//     match, abort() on one rank, mismatched calls, a peer that left — every
//     rank fails promptly, naming the peer;
//   * options: COLLX_NET=ib and COLLX_IB_*, device selection.
#include <collx/net.hpp>
#include <collx/net/fake_verbs.hpp>

#include "probe_look.hpp"

#include <poll.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "net_matrix.hpp"

using namespace collx;
namespace vb = collx::net::verbs;

namespace {

/// Two devices of a fake fabric, each with 4 KiB registered, a CQ and one
/// QP, the QPs connected to each other.
struct qp_pair {
  vb::fake_fabric fab{2};
  const vb::provider& t = fab.table();
  vb::handle ctx[2]{}, pd[2]{}, cq[2]{}, qp[2]{}, mr[2]{};
  std::uint32_t lkey[2]{}, rkey[2]{}, qpn[2]{};
  std::vector<std::byte> mem[2];

  qp_pair() {
    for (int i = 0; i < 2; ++i) {
      ctx[i] = t.open(t.self, "fake" + std::to_string(i));
      pd[i] = t.alloc_pd(ctx[i]);
      mem[i].assign(4096, std::byte{0});
      mr[i] = t.reg_mr(pd[i], mem[i].data(), mem[i].size(), vb::local_write | vb::remote_write, &lkey[i],
                       &rkey[i]);
      cq[i] = t.create_cq(ctx[i], 64);
      qp[i] = t.create_qp(pd[i], cq[i], {}, &qpn[i]);
    }
    for (int i = 0; i < 2; ++i) {
      vb::qp_address me{static_cast<std::uint16_t>(i + 1), {}, qpn[i], 0, 4096};
      vb::qp_address them{static_cast<std::uint16_t>(2 - i), {}, qpn[1 - i], 0, 4096};
      t.connect_qp(qp[i], {}, me, them);
    }
  }
  ~qp_pair() {
    for (int i = 0; i < 2; ++i) {
      if (qp[i]) t.destroy_qp(qp[i]);
      t.destroy_cq(cq[i]);
      t.dereg_mr(mr[i]);
      t.dealloc_pd(pd[i]);
      t.close(ctx[i]);
    }
  }
  std::uint64_t addr(int i, std::size_t off) { return reinterpret_cast<std::uint64_t>(mem[i].data() + off); }
  /// A write (with immediate when `imm` >= 0) of mem0[src, src+len) to mem1[dst, …).
  int write(std::size_t src, std::size_t dst, std::uint32_t len, long imm, std::uint32_t key_xor = 0) {
    vb::send_wr w;
    w.wr_id = 100 + src;
    w.op = imm >= 0 ? vb::wr_opcode::rdma_write_with_imm : vb::wr_opcode::rdma_write;
    w.local = {addr(0, src), len, lkey[0]};
    w.remote_addr = addr(1, dst);
    w.rkey = rkey[1] ^ key_xor;
    w.imm = imm >= 0 ? static_cast<std::uint32_t>(imm) : 0;
    return t.post_send(qp[0], &w, 1);
  }
  void post_recv(int i, std::uint64_t id, std::size_t off = 0, std::uint32_t len = 32) {
    vb::recv_wr r{id, {addr(i, off), len, lkey[i]}};
    REQUIRE(t.post_recv(qp[i], &r, 1) == 0);
  }
  std::vector<vb::completion> drain(int i) {
    std::vector<vb::completion> v;
    vb::completion c[8];
    for (int n; (n = t.poll_cq(cq[i], c, 8)) > 0;) v.insert(v.end(), c, c + n);
    return v;
  }
  /// Whether mem[i] is zero outside [a, b).
  bool zero_outside(int i, std::size_t a, std::size_t b) {
    for (std::size_t k = 0; k < mem[i].size(); ++k)
      if ((k < a || k >= b) && mem[i][k] != std::byte{0}) return false;
    return true;
  }
  void fill(int i, std::size_t off, std::size_t len, int seed) {
    for (std::size_t k = 0; k < len; ++k)
      mem[i][off + k] = std::byte(static_cast<unsigned char>(seed + 3 * k));
  }
};

}  // namespace

TEST_CASE("fake verbs: writes with immediate land in order, before their completions", "[ib][fake]") {
  qp_pair f;
  f.post_recv(1, 1, 1024);
  f.post_recv(1, 2, 1024);
  f.fill(0, 0, 16, 5);
  f.fill(0, 64, 24, 9);
  REQUIRE(f.write(0, 128, 16, 7) == 0);
  REQUIRE(f.write(64, 256, 24, 8) == 0);
  const auto rx = f.drain(1);
  REQUIRE(rx.size() == 2);
  CHECK((rx[0].wr_id == 1 && rx[0].imm == 7 && rx[0].byte_len == 16 && rx[0].has_imm));
  CHECK((rx[1].wr_id == 2 && rx[1].imm == 8 && rx[1].byte_len == 24));
  CHECK(rx[0].op == vb::wc_opcode::recv_rdma_with_imm);
  CHECK(std::memcmp(f.mem[1].data() + 128, f.mem[0].data(), 16) == 0);
  CHECK(std::memcmp(f.mem[1].data() + 256, f.mem[0].data() + 64, 24) == 0);
  // Nothing else written (the receive buffers at 1024 are not used by a write).
  std::vector<std::byte> want(4096, std::byte{0});
  std::memcpy(want.data() + 128, f.mem[0].data(), 16);
  std::memcpy(want.data() + 256, f.mem[0].data() + 64, 24);
  CHECK(f.mem[1] == want);
  const auto tx = f.drain(0);
  REQUIRE(tx.size() == 2);
  CHECK((tx[0].status == vb::wc_status::success && tx[0].wr_id == 100 && tx[1].wr_id == 164));
}

TEST_CASE("fake verbs: a receiver not ready makes the write wait, with the bytes posted", "[ib][fake]") {
  qp_pair f;
  f.fill(0, 0, 32, 1);
  const std::vector<std::byte> sent(f.mem[0].begin(), f.mem[0].begin() + 32);
  REQUIRE(f.write(0, 512, 32, 3) == 0);
  REQUIRE(f.write(0, 600, 8, -1) == 0);  // a plain write behind it waits too (in order)
  f.fill(0, 0, 32, 77);                  // the sender reuses its buffer
  CHECK(f.zero_outside(1, 0, 0));
  CHECK(f.drain(1).empty());
  f.post_recv(1, 9, 2048);
  const auto rx = f.drain(1);
  REQUIRE(rx.size() == 1);
  CHECK((rx[0].imm == 3 && rx[0].status == vb::wc_status::success));
  CHECK(std::memcmp(f.mem[1].data() + 512, sent.data(), 32) == 0);
  CHECK(std::memcmp(f.mem[1].data() + 600, sent.data(), 8) == 0);
  CHECK(f.zero_outside(1, 512, 608));
}

TEST_CASE("fake verbs: a remote key or range that does not match fails and errors both QPs", "[ib][fake]") {
  const bool bad_key = GENERATE(true, false);
  qp_pair f;
  f.post_recv(1, 5, 1024);
  f.fill(0, 0, 64, 2);
  if (bad_key) REQUIRE(f.write(0, 128, 16, 1, 0x1) == 0);
  else REQUIRE(f.write(0, 4096 - 8, 16, 1) == 0);  // runs 8 bytes past the registration
  auto tx = f.drain(0);
  REQUIRE(tx.size() == 1);
  CHECK(tx[0].status == vb::wc_status::rem_access_err);
  const auto rx = f.drain(1);
  REQUIRE(rx.size() == 1);  // the posted receive, flushed: the responder is in error too
  CHECK((rx[0].wr_id == 5 && rx[0].status == vb::wc_status::wr_flush_err));
  CHECK(f.zero_outside(1, 0, 0));
  REQUIRE(f.write(0, 0, 8, 2) == 0);  // the sender's QP is in error: flushed
  tx = f.drain(0);
  REQUIRE(tx.size() == 1);
  CHECK(tx[0].status == vb::wc_status::wr_flush_err);
}

TEST_CASE("fake verbs: local key and receive length checks", "[ib][fake]") {
  qp_pair f;
  vb::send_wr w;
  w.op = vb::wr_opcode::rdma_write;
  w.local = {f.addr(0, 4000), 200, f.lkey[0]};  // past the local registration
  w.remote_addr = f.addr(1, 0);
  w.rkey = f.rkey[1];
  REQUIRE(f.t.post_send(f.qp[0], &w, 1) == 0);
  auto tx = f.drain(0);
  REQUIRE(tx.size() == 1);
  CHECK(tx[0].status == vb::wc_status::loc_prot_err);

  qp_pair g;
  g.post_recv(1, 4, 1024, 16);
  vb::send_wr s;
  s.op = vb::wr_opcode::send;
  s.local = {g.addr(0, 0), 32, g.lkey[0]};  // longer than the receive buffer
  REQUIRE(g.t.post_send(g.qp[0], &s, 1) == 0);
  const auto rx = g.drain(1);
  REQUIRE(rx.size() == 1);
  CHECK(rx[0].status == vb::wc_status::loc_len_err);
  CHECK(g.zero_outside(1, 0, 0));
}

TEST_CASE("fake verbs: injected faults, a link down and a destroyed peer", "[ib][fake]") {
  using fault = vb::fake_fabric::fault;
  SECTION("retries exceeded on the second write") {
    qp_pair f;
    f.fab.inject("fake0", fault::retry_exceeded, 1);
    REQUIRE(f.write(0, 0, 8, -1) == 0);
    REQUIRE(f.write(0, 8, 8, -1) == 0);
    const auto tx = f.drain(0);
    REQUIRE(tx.size() == 2);
    CHECK(tx[0].status == vb::wc_status::success);
    CHECK(tx[1].status == vb::wc_status::retry_exc_err);
  }
  SECTION("the QP moved to error") {
    qp_pair f;
    f.fab.inject("fake0", fault::qp_error);
    REQUIRE(f.write(0, 0, 8, -1) == 0);
    const auto tx = f.drain(0);
    REQUIRE(tx.size() == 1);
    CHECK(tx[0].status == vb::wc_status::wr_flush_err);
    CHECK(f.zero_outside(1, 0, 0));
  }
  SECTION("a remote key that does not match") {
    qp_pair f;
    f.fab.inject("fake0", fault::bad_rkey);
    f.fill(0, 0, 8, 1);
    REQUIRE(f.write(0, 0, 8, -1) == 0);
    const auto tx = f.drain(0);
    REQUIRE(tx.size() == 1);
    CHECK(tx[0].status == vb::wc_status::rem_access_err);
    CHECK(f.zero_outside(1, 0, 0));
  }
  SECTION("a link down") {
    qp_pair f;
    f.fab.set_link("fake1", false);
    REQUIRE(f.write(0, 0, 8, -1) == 0);
    const auto tx = f.drain(0);
    REQUIRE(tx.size() == 1);
    CHECK(tx[0].status == vb::wc_status::retry_exc_err);
  }
  SECTION("the remote QP destroyed") {
    qp_pair f;
    f.t.destroy_qp(f.qp[1]);
    f.qp[1] = nullptr;
    REQUIRE(f.write(0, 0, 8, -1) == 0);
    const auto tx = f.drain(0);
    REQUIRE(tx.size() == 1);
    CHECK(tx[0].status == vb::wc_status::retry_exc_err);
  }
}

TEST_CASE("fake verbs: the completion event fd is readable once armed and a completion arrives",
          "[ib][fake]") {
  qp_pair f;
  const int fd = f.t.cq_fd(f.cq[1]);
  pollfd p{fd, POLLIN, 0};
  f.t.arm_cq(f.cq[1]);
  CHECK(::poll(&p, 1, 0) == 0);
  f.post_recv(1, 1, 1024);
  REQUIRE(f.write(0, 0, 8, 1) == 0);
  CHECK(::poll(&p, 1, 0) == 1);
  f.t.drain_cq_events(f.cq[1]);
  CHECK(::poll(&p, 1, 0) == 0);
  CHECK(f.drain(1).size() == 1);
}

namespace {

/// P thread ranks, each an ib communicator on its own fake device.
struct ib_job {
  int P;
  vb::fake_fabric fab;
  unique_id id = get_unique_id();
  comm_options opt;
  int qps = 1;
  /// Hosts the ranks are spread over, in contiguous blocks (0: each rank
  /// its own host, so that every step crosses the fabric).
  int hosts = 0;
  explicit ib_job(int p) : P(p), fab(p) { opt.timeout = std::chrono::seconds(30); }

  int host_of(int r) const { return hosts == 0 ? r : r * hosts / P; }
  net::net_options options(int r) const {
    net::ib_options io;
    io.provider = &fab.table();
    io.hca = "=fake" + std::to_string(r);
    io.qps = qps;
    net::net_options no(io);
    no.host = "fake-host-" + std::to_string(host_of(r));
    return no;
  }
  /// Runs body(comm, rank) on every rank; returns each rank's error text ("" if none).
  std::vector<std::string> run(const std::function<void(net_communicator&, int)>& body) {
    std::vector<std::string> errors(static_cast<std::size_t>(P));
    auto rank = [&](int r) {
      try {
        net_communicator c = net::init_rank(P, id, r, opt, options(r));
        body(c, r);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    };
    std::vector<std::thread> ts;
    for (int r = 1; r < P; ++r) ts.emplace_back(rank, r);
    rank(0);
    for (auto& t : ts) t.join();
    return errors;
  }
};

}  // namespace

TEST_CASE("ib over the fake fabric: every collective and algorithm, 2-4 ranks, 1-2 queue pairs",
          "[ib][comm]") {
  const int P = GENERATE(2, 3, 4);
  const int qps = GENERATE(1, 2);
  INFO(P << " ranks, " << qps << " QPs per peer");
  ib_job job(P);
  job.qps = qps;
  std::vector<net_matrix::tally> tallies(static_cast<std::size_t>(P));
  const auto errors = job.run([&](net_communicator& c, int r) {
    net_matrix::check_matrix(c, {1, 7, 1000, 65537, 300000}, tallies[static_cast<std::size_t>(r)]);
    c.destroy();  // goodbyes on every QP; no error
  });
  for (int r = 0; r < P; ++r) {
    INFO("rank " << r << ": " << errors[r] << " " << tallies[r].first);
    CHECK(errors[r].empty());
    CHECK(tallies[r].failures == 0);
    CHECK(tallies[r].checks > 100);
  }
  CHECK(job.fab.writes_posted("fake0") > 0);  // the bytes did go over the fabric
}

TEST_CASE("ib over the fake fabric: ranks of one host through shared memory, the others over the fabric",
          "[ib][comm][host]") {
  // 3 ranks on 2 hosts ({0,1}, {2}) and 4 on 2 ({0,1}, {2,3}): every
  // collective and algorithm mixes both paths in one schedule.
  const int P = GENERATE(3, 4);
  INFO(P << " ranks on 2 hosts");
  ib_job job(P);
  job.hosts = 2;
  std::vector<net_matrix::tally> tallies(static_cast<std::size_t>(P));
  std::vector<std::vector<int>> through(static_cast<std::size_t>(P));
  std::vector<std::uint64_t> sent(static_cast<std::size_t>(P));
  const auto errors = job.run([&](net_communicator& c, int r) {
    net_matrix::check_matrix(c, {1, 7, 1000, 65537, 300000}, tallies[static_cast<std::size_t>(r)]);
    through[static_cast<std::size_t>(r)] = net::peers_through_memory(c);
    sent[static_cast<std::size_t>(r)] = net::steps_over_network(c);
    c.destroy();
  });
  for (int r = 0; r < P; ++r) {
    INFO("rank " << r << ": " << errors[r] << " " << tallies[r].first);
    CHECK(errors[r].empty());
    CHECK(tallies[r].failures == 0);
    CHECK(tallies[r].checks > 100);
    std::vector<int> mates;
    for (int q = 0; q < P; ++q)
      if (q != r && job.host_of(q) == job.host_of(r)) mates.push_back(q);
    CHECK(through[r] == mates);
    CHECK(sent[r] > 0);  // every rank has a peer on the other host that some schedule sends to
  }
}

namespace {

/// Two ranks run all_reduce in a loop; `fault` is applied once rank 0 has
/// done `after` calls. Every rank must fail within 5 s (the deadline is 30),
/// with a message naming the other rank's device.
void check_both_fail(const std::function<void(ib_job&)>& fault, status want0, status want1,
                     const std::string& what) {
  ib_job job(2);
  using clock = std::chrono::steady_clock;
  std::atomic<std::int64_t> injected_at{0};  // clock ticks; 0: not yet
  std::vector<status> codes(2, status::ok);
  std::vector<double> took(2, -1);
  const auto errors = job.run([&](net_communicator& c, int r) {
    std::vector<float> x(1 << 16, 1.0f), y(x.size());
    const auto end = clock::now() + std::chrono::seconds(10);
    try {
      for (int i = 1; clock::now() < end; ++i) {
        c.all_reduce(x.data(), y.data(), x.size(), reduce_op::sum);
        if (r == 0 && i == 20) {
          fault(job);
          injected_at = clock::now().time_since_epoch().count();
        }
      }
    } catch (const error& e) {
      codes[static_cast<std::size_t>(r)] = e.code();
      const std::int64_t at = injected_at.load();
      if (at != 0)
        took[static_cast<std::size_t>(r)] =
            std::chrono::duration<double>(clock::now() - clock::time_point(clock::duration(at))).count();
      throw;
    }
  });
  INFO("rank 0: " << errors[0] << " (" << took[0] << " s)\nrank 1: " << errors[1] << " (" << took[1]
                  << " s)");
  CHECK(codes[0] == want0);
  CHECK(codes[1] == want1);
  CHECK(errors[0].find("rank 1 (fake1") != std::string::npos);
  CHECK(errors[0].find(what) != std::string::npos);
  CHECK((took[0] >= 0 && took[0] < 5.0));
  // Rank 1 may be waiting only to receive: its proxy's liveness writes find
  // rank 0's QP in error (or its own link down) within a second.
  CHECK(errors[1].find("rank 0 (fake0") != std::string::npos);
  CHECK((took[1] >= 0 && took[1] < 5.0));
}

}  // namespace

TEST_CASE("ib over the fake fabric: faults fail every rank promptly, naming the peer", "[ib][fault]") {
  using fault = vb::fake_fabric::fault;
  SECTION("rank 0's writes exceed their retries") {
    check_both_fail([](ib_job& j) { j.fab.inject("fake0", fault::retry_exceeded, 3); }, status::peer_dead,
                    status::peer_dead, "retry counter exceeded");
  }
  SECTION("rank 1's queue pair moves to the error state") {
    // Rank 1's flushed requests are a local failure (reported as aborted,
    // with the text); rank 0's writes to the errored QP exceed their retries.
    check_both_fail([](ib_job& j) { j.fab.inject("fake1", fault::qp_error, 3); }, status::peer_dead,
                    status::aborted, "retry counter exceeded");
  }
  SECTION("rank 0 writes with a remote key that does not match") {
    // A remote access error on rank 0, and rank 1's QP moved to error by it:
    // neither peer died (aborted, with the access error in the text).
    check_both_fail([](ib_job& j) { j.fab.inject("fake0", fault::bad_rkey, 3); }, status::aborted,
                    status::aborted, "remote access error");
  }
  SECTION("rank 1's link goes down") {
    check_both_fail([](ib_job& j) { j.fab.set_link("fake1", false); }, status::peer_dead, status::peer_dead,
                    "retry counter exceeded");
  }
}

TEST_CASE("ib over the fake fabric: abort, mismatched calls, a peer that left", "[ib][fault]") {
  SECTION("abort() on rank 1 fails rank 0's waiting call") {
    ib_job job(2);
    status code0 = status::ok;
    const auto errors = job.run([&](net_communicator& c, int r) {
      std::vector<float> x(1000, 1.0f), y(1000);
      c.all_reduce(x.data(), y.data(), x.size(), reduce_op::sum);
      if (r == 1) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        c.abort();
        return;
      }
      try {
        c.broadcast(x.data(), y.data(), x.size(), 1);  // waits for rank 1's step, which never comes
      } catch (const error& e) {
        code0 = e.code();
        throw;
      }
    });
    INFO(errors[0]);
    CHECK(code0 == status::aborted);
  }
  SECTION("calls that differ in reduce_op fail with mismatch") {
    ib_job job(2);
    std::vector<status> codes(2, status::ok);
    const auto errors = job.run([&](net_communicator& c, int r) {
      std::vector<float> x(1000, 1.0f), y(1000);
      try {
        for (int i = 0; i < 5; ++i)
          c.all_reduce(x.data(), y.data(), x.size(), r == 1 ? reduce_op::max : reduce_op::sum);
      } catch (const error& e) {
        codes[static_cast<std::size_t>(r)] = e.code();
        throw;
      }
    });
    INFO(errors[0] << "\n" << errors[1]);
    CHECK(codes[1] == status::mismatch);
    CHECK(errors[1].find("reduce_op") != std::string::npos);
  }
  SECTION("a receive from a peer that closed its communicator fails naming it") {
    ib_job job(2);
    std::atomic<bool> left{false};
    status code0 = status::ok;
    const auto errors = job.run([&](net_communicator& c, int r) {
      std::vector<float> x(1000, 1.0f), y(1000);
      c.all_reduce(x.data(), y.data(), x.size(), reduce_op::sum);
      if (r == 1) {
        c.destroy();
        left = true;
        return;
      }
      while (!left) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      try {
        c.broadcast(x.data(), y.data(), x.size(), 1);
      } catch (const error& e) {
        code0 = e.code();
        throw;
      }
    });
    INFO(errors[0]);
    CHECK(code0 == status::peer_dead);
    CHECK(errors[0].find("rank 1 (fake1") != std::string::npos);
    CHECK(errors[0].find("said goodbye") != std::string::npos);
    CHECK(errors[1].empty());
  }
  SECTION("ranks that disagree on queue pairs per connection") {
    ib_job job(2);
    const auto o = net_matrix::run_ranks(2, [&](int r) {
      net::net_options io = job.options(r);
      io.ib.qps = r + 1;
      net_communicator c = net::init_rank(2, job.id, r, job.opt, io);
    });
    INFO(o[0].error << "\n" << o[1].error);
    CHECK((o[0].code == status::mismatch && o[1].code == status::mismatch));
    CHECK(o[0].error.find("COLLX_IB_QPS_PER_CONNECTION") != std::string::npos);
  }
}

TEST_CASE("probe look: RDMA devices and ports through a verbs provider", "[ib][probe]") {
  // Two fake devices, the second's link down: the look names both, with each
  // port's state, link layer and LID as the provider reports them.
  net::verbs::fake_fabric fab(2);
  fab.set_link("fake1", false);
  probe::topology t;
  probe::rdma_look(t, &fab.table());
  const tune::json::value* rdma = t.json.find("rdma");
  REQUIRE(rdma != nullptr);
  REQUIRE(rdma->items.size() == 2);
  for (int i = 0; i < 2; ++i) {
    const tune::json::value& d = rdma->items[std::size_t(i)];
    INFO("device " << i);
    CHECK(d.find("name")->str == "fake" + std::to_string(i));
    const tune::json::value* ports = d.find("ports");
    REQUIRE(ports != nullptr);
    REQUIRE(ports->items.size() == 1);
    const tune::json::value& p = ports->items[0];
    CHECK(p.find("port")->num == 1);
    CHECK(p.find("active")->type == tune::json::kind::boolean);
    CHECK(p.find("active")->b == (i == 0));
    CHECK(p.find("link_layer")->str == "infiniband");
    CHECK(p.find("lid")->num == i + 1);
  }
  REQUIRE(t.lines.size() == 1);
  CHECK(t.lines[0] == "rdma: fake0 (port 1 active IB lid 1); fake1 (port 1 down IB lid 2)");
}

TEST_CASE("ib options: COLLX_NET and COLLX_IB_*, device selection", "[ib][options]") {
  ::setenv("COLLX_NET", "ib", 1);
  ::setenv("COLLX_IB_QPS_PER_CONNECTION", "4", 1);
  ::setenv("COLLX_IB_HCA", "mlx5_0:1", 1);
  net::net_options o = net::net_options::from_env();
  CHECK(o.transport == net::net_options::kind::ib);
  CHECK(o.ib.qps == 4);
  CHECK(o.ib.hca == "mlx5_0:1");
  ::setenv("COLLX_IB_QPS_PER_CONNECTION", "17", 1);
  CHECK_THROWS_WITH(net::net_options::from_env(), Catch::Contains("COLLX_IB_QPS_PER_CONNECTION"));
  ::unsetenv("COLLX_IB_QPS_PER_CONNECTION");
  ::setenv("COLLX_IB_HCA", "^", 1);
  CHECK_THROWS_WITH(net::net_options::from_env(), Catch::Contains("COLLX_IB_HCA"));
  ::unsetenv("COLLX_IB_HCA");
  ::setenv("COLLX_NET", "verbs", 1);
  CHECK_THROWS_WITH(net::net_options::from_env(), Catch::Contains("expected socket or ib"));
  ::unsetenv("COLLX_NET");
  CHECK(net::net_options::from_env().transport == net::net_options::kind::socket);

  const std::vector<vb::device_info> devs{{"mlx5_0", 1}, {"mlx5_1", 2}, {"rxe0", 1}};
  CHECK(net::pick_hca("", devs) == std::pair<std::string, int>{"mlx5_0", 1});
  CHECK(net::pick_hca("mlx5_1:2", devs) == std::pair<std::string, int>{"mlx5_1", 2});
  CHECK(net::pick_hca("^mlx5", devs) == std::pair<std::string, int>{"rxe0", 1});
  CHECK(net::pick_hca("=mlx5_1", devs) == std::pair<std::string, int>{"mlx5_1", 1});
  CHECK_THROWS_WITH(net::pick_hca("=mlx5", devs), Catch::Contains("there are: mlx5_0, mlx5_1, rxe0"));
  CHECK_THROWS_WITH(net::pick_hca("mlx5_0:x", devs), Catch::Contains("bad port"));
  CHECK_THROWS_WITH(net::pick_hca("", {}), Catch::Contains("no RDMA device"));
}
