// The direct algorithm on thread ranks: all_to_all (also Bruck's) and
// all_to_allv over every compiled protocol, and direct's all_reduce (one-shot,
// two-shot), all_gather and reduce_scatter in the matrix style of
// test_ring_matrix.cpp; each also with buffers off alignment. Results are
// checked against independently computed references, with guard bytes.
#include "../support/matrix.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <numeric>
#include <random>

using namespace collx;
using namespace collx::test;
using Catch::Matchers::Contains;

namespace {

/// Calls f.template operator()<Proto>() for every compiled protocol.
template <class F>
void for_each_protocol(F&& f) {
  [&]<class... Ps>(type_list<Ps...>) { (f.template operator()<Ps>(), ...); }(protocols{});
}

/// FIFOs of two 128-byte slots: every call moves one slot, so even small
/// counts run through many rounds and any ordering mistake deadlocks.
comm_options tiny_fifos() {
  comm_options o = test_options();
  o.fifo_slots = 2;
  o.slot_bytes_of<proto::simple>() = 128;
  return o;
}

std::vector<std::size_t> small_counts(int P) {
  return {0, 1, static_cast<std::size_t>(P - 1), static_cast<std::size_t>(P + 1), 1009};
}

}  // namespace

// ---- all_to_all -----------------------------------------------------------------

TEST_CASE("all_to_all: every dtype, P = 1..9, small and prime counts, every protocol", "[direct][alltoall]") {
  const int P = GENERATE(1, 2, 3, 4, 5, 6, 7, 8, 9);
  INFO("P = " << P);
  for_each_protocol([&]<class Pr>() {
    std::vector<case_desc> cases;
    for (algo_id a : {algo_id::direct, algo_id::bruck_a2a})
      for (int d = 0; d < dtype_count; ++d)
        for (std::size_t count : small_counts(P)) {
          case_desc c =
              make_case(coll::all_to_all, static_cast<dtype>(d), reduce_op::sum, count, {a, Pr::id});
          c.misalign = static_cast<std::size_t>(d % 3);
          cases.push_back(c);
        }
    // The default variant and explicit composition reach the same schedule.
    case_desc c = cases.back();
    c.variant = {};
    cases.push_back(c);
    c.call = &call_explicit<algo::direct, Pr, coll::all_to_all>;
    c.call_name = "all_to_all<direct>";
    cases.push_back(c);
    report(run_on_threads(P, cases));
  });
}

TEST_CASE("all_to_all: ~256K elements per peer", "[direct][alltoall][large]") {
  const int P = GENERATE(2, 5, 8);
  INFO("P = " << P);
  for_each_protocol([&]<class Pr>() {
    std::vector<case_desc> cases;
    for (dtype dt : {dtype::float32, dtype::int8}) {
      if (dt == dtype::int8 && Pr::id != proto_id::simple) continue;  // Bruck: once is enough
      cases.push_back(make_case(coll::all_to_all, dt, reduce_op::sum, (1u << 18) + 7,
                                {dt == dtype::int8 ? algo_id::bruck_a2a : algo_id::direct, Pr::id}));
    }
    report(run_on_threads(P, cases));
  });
}

TEST_CASE("all_to_all through FIFOs of two 128-byte slots", "[direct][alltoall]") {
  const int P = GENERATE(2, 3, 6, 9);
  std::vector<case_desc> cases;
  for (dtype dt : {dtype::float64, dtype::uint8, dtype::float16})
    for (std::size_t count : {std::size_t(1), std::size_t(61), std::size_t(4099)}) {
      for (algo_id a : {algo_id::direct, algo_id::bruck_a2a})
        cases.push_back(make_case(coll::all_to_all, dt, reduce_op::sum, count, {a, proto_id::simple}));
    }
  report(run_on_threads(P, cases, tiny_fifos()));
}

// ---- direct all_reduce, all_gather, reduce_scatter -------------------------------

namespace {

std::vector<case_desc> direct_matrix(const std::vector<std::size_t>& counts, bool all_pairs, call_fn call,
                                     const char* call_name, bool reductions_only = false) {
  constexpr coll colls[] = {coll::all_reduce, coll::all_gather, coll::reduce_scatter};
  std::vector<case_desc> cases;
  std::size_t k = 0;  // one root rank: every root 0
  add_dtype_op_matrix(cases, colls, counts, {algo_id::direct, proto_id::simple}, 1, k,
                      [&](coll kind, std::size_t, dtype dt, reduce_op op) {
                        return (!reductions_only || kind == coll::all_reduce) &&
                               (all_pairs || common_pair(dt, op));
                      });
  if (call != nullptr)
    for (case_desc& c : cases)
      if (c.kind == coll::all_reduce) {
        c.call = call;
        c.call_name = call_name;
      }
  return cases;
}

template <class Pr>
constexpr call_fn one_shot = &call_explicit<algo::direct_one_shot, Pr, coll::all_reduce>;
template <class Pr>
constexpr call_fn two_shot = &call_explicit<algo::direct_two_shot, Pr, coll::all_reduce>;

}  // namespace

TEST_CASE("direct: all_reduce, all_gather, reduce_scatter, every dtype and op", "[direct][matrix]") {
  const int P = GENERATE(1, 2, 3, 4, 5, 7, 8, 9);
  INFO("P = " << P);
  const std::vector<std::size_t> counts{
      0,   1, static_cast<std::size_t>(P - 1), static_cast<std::size_t>(P), static_cast<std::size_t>(P + 1),
      1009};
  report(run_on_threads(P, direct_matrix(counts, true, nullptr, "")));
}

TEST_CASE("direct: one-shot and two-shot all_reduce forced, every protocol", "[direct][matrix]") {
  const int P = GENERATE(2, 3, 5, 8);
  INFO("P = " << P);
  for_each_protocol([&]<class Pr>() {
    // Several chunks per call on Simple; the line protocols' chunks are smaller already.
    std::vector<std::size_t> counts{1, static_cast<std::size_t>(P + 1), 1009};
    if (Pr::id == proto_id::simple) counts.push_back(70001);
    auto cases = direct_matrix(counts, false, one_shot<Pr>, "all_reduce<direct_one_shot>", true);
    auto two = direct_matrix(counts, false, two_shot<Pr>, "all_reduce<direct_two_shot>", true);
    cases.insert(cases.end(), two.begin(), two.end());
    report(run_on_threads(P, cases));
  });
}

TEST_CASE("direct: buffers off vector alignment, guard bytes intact", "[direct][misaligned]") {
  const int P = GENERATE(3, 4);
  INFO("P = " << P);
  // all_reduce (one-shot at this count), all_gather, reduce_scatter and
  // all_to_all through every protocol; then all_reduce forced two-shot.
  auto cases = misaligned_matrix(algo_id::direct, P);
  for_each_protocol([&]<class Pr>() {
    for (case_desc c : misaligned_matrix(algo_id::direct, P))
      if (c.kind == coll::all_reduce && c.variant.proto == Pr::id) {
        c.call = two_shot<Pr>;
        c.call_name = "all_reduce<direct_two_shot>";
        cases.push_back(c);
      }
  });
  report(run_on_threads(P, cases));
}

TEST_CASE("direct: ~1M elements and many chunks", "[direct][matrix][large]") {
  const int P = GENERATE(3, 8);
  INFO("P = " << P);
  std::vector<case_desc> cases;
  for (dtype dt : {dtype::float32, dtype::bfloat16, dtype::int64})
    for (bool in_place : {false, true}) {
      case_desc c = make_case(coll::all_reduce, dt, reduce_op::sum, (1u << 20) + 3,
                              {algo_id::direct, proto_id::simple}, 0, in_place);
      cases.push_back(c);
      c.call = one_shot<proto::simple>;
      c.call_name = "all_reduce<direct_one_shot>";
      c.count = (1u << 17) + 5;
      cases.push_back(c);
    }
  report(run_on_threads(P, cases));
  // Tiny FIFOs: thousands of rounds through both shots and both halves.
  std::vector<case_desc> tiny;
  for (coll kind : {coll::all_reduce, coll::all_gather, coll::reduce_scatter})
    for (reduce_op op : {reduce_op::sum, reduce_op::avg}) {
      case_desc c = make_case(kind, dtype::float32, op, 3001, {algo_id::direct, proto_id::simple});
      tiny.push_back(c);
      if (kind == coll::all_reduce) {
        c.call = one_shot<proto::simple>;
        c.call_name = "all_reduce<direct_one_shot>";
        tiny.push_back(c);
      }
    }
  report(run_on_threads(P, tiny, tiny_fifos()));
}

TEST_CASE("direct all_reduce gives bitwise identical results on every rank", "[direct]") {
  // Inputs whose float sum depends on the order of additions: ranks that
  // combined them in different orders would disagree in the last bits.
  const int P = 7;
  const std::size_t n = 5000;
  for (int mode = 0; mode < 2; ++mode) {
    auto comms = communicator::create_thread_group(P, test_options());
    std::vector<std::vector<float>> out(P, std::vector<float>(n));
    std::vector<std::thread> ts;
    std::atomic<int> errors{0};
    for (int r = 0; r < P; ++r)
      ts.emplace_back([&, r] {
        std::vector<float> in(n);
        for (std::size_t i = 0; i < n; ++i)
          in[i] = static_cast<float>(mix(i * 31 + static_cast<std::size_t>(r)) % 100000) * 1e-3f *
                  (r % 2 ? 1e4f : 1e-4f);
        try {
          if (mode == 0)
            collx::all_reduce<algo::direct_one_shot, proto::simple>(comms[r], in.data(), out[r].data(), n,
                                                                    reduce_op::sum);
          else
            collx::all_reduce<algo::direct_two_shot, proto::simple>(comms[r], in.data(), out[r].data(), n,
                                                                    reduce_op::sum);
        } catch (const std::exception&) {
          ++errors;
        }
      });
    for (auto& t : ts) t.join();
    REQUIRE(errors == 0);
    for (int r = 1; r < P; ++r) CHECK(std::memcmp(out[0].data(), out[r].data(), n * sizeof(float)) == 0);
    // And the value is the sum in rank order, computed here independently.
    std::vector<float> expect(n, 0.0f);
    for (std::size_t i = 0; i < n; ++i) {
      float acc = 0;
      for (int q = 0; q < P; ++q) {
        const float x = static_cast<float>(mix(i * 31 + static_cast<std::size_t>(q)) % 100000) * 1e-3f *
                        (q % 2 ? 1e4f : 1e-4f);
        acc = q == 0 ? x : x + acc;
      }
      expect[i] = acc;
    }
    CHECK(std::memcmp(out[0].data(), expect.data(), n * sizeof(float)) == 0);
  }
}

// ---- all_to_allv ----------------------------------------------------------------

namespace {

/// One all_to_allv layout for the whole group: counts[i][j] elements go from
/// rank i to rank j; each rank's blocks sit in shuffled order with gaps.
struct v_layout {
  int P;
  std::vector<std::vector<std::size_t>> counts;                    // [src][dst]
  std::vector<std::vector<std::size_t>> send_displs, recv_displs;  // [rank][peer]
  std::vector<std::size_t> send_len, recv_len;                     // [rank]

  v_layout(int nranks, std::uint64_t seed, std::size_t max_count) : P(nranks) {
    std::mt19937_64 g(seed);
    const std::size_t Pz = static_cast<std::size_t>(P);
    counts.assign(Pz, std::vector<std::size_t>(Pz));
    for (auto& row : counts)
      for (auto& c : row) c = g() % 3 == 0 ? 0 : g() % (max_count + 1);
    auto place = [&](auto count_of, std::vector<std::vector<std::size_t>>& displs,
                     std::vector<std::size_t>& len) {
      displs.assign(Pz, std::vector<std::size_t>(Pz));
      len.assign(Pz, 0);
      for (std::size_t r = 0; r < Pz; ++r) {
        std::vector<std::size_t> order(Pz);
        std::iota(order.begin(), order.end(), 0);
        std::shuffle(order.begin(), order.end(), g);
        std::size_t at = g() % 5;
        for (std::size_t j : order) {
          displs[r][j] = at;
          at += count_of(r, j) + g() % 4;  // a gap after each block
        }
        len[r] = at + g() % 3;
      }
    };
    place([&](std::size_t r, std::size_t j) { return counts[r][j]; }, send_displs, send_len);
    place([&](std::size_t r, std::size_t j) { return counts[j][r]; }, recv_displs, recv_len);
  }
};

/// Element i of the block src sends to dst.
template <class T>
T v_input(int src, int dst, std::size_t i) {
  return movement_input<T>(src * 131 + dst, i);
}

enum class v_api { size_t_ptr, int_ptr, span, explicit_call };

template <class T>
std::string run_v_rank(communicator& comm, const v_layout& L, v_api api, std::size_t misalign) {
  const int P = comm.size(), r = comm.rank();
  const std::size_t rz = static_cast<std::size_t>(r);
  guarded_buffer sendbuf(L.send_len[rz] * sizeof(T), misalign * sizeof(T)),
      recvbuf(L.recv_len[rz] * sizeof(T), misalign * sizeof(T));
  T* send = sendbuf.as<T>();
  T* recv = recvbuf.as<T>();
  std::memset(static_cast<void*>(send), 0x3C, L.send_len[rz] * sizeof(T));
  std::memset(static_cast<void*>(recv), 0x5A, L.recv_len[rz] * sizeof(T));
  std::vector<std::size_t> sc(static_cast<std::size_t>(P)), rc(static_cast<std::size_t>(P));
  for (int j = 0; j < P; ++j) {
    const std::size_t jz = static_cast<std::size_t>(j);
    sc[jz] = L.counts[rz][jz];
    rc[jz] = L.counts[jz][rz];
    for (std::size_t i = 0; i < sc[jz]; ++i) send[L.send_displs[rz][jz] + i] = v_input<T>(r, j, i);
  }
  const std::vector<unsigned char> send_copy(
      reinterpret_cast<unsigned char*>(send),
      reinterpret_cast<unsigned char*>(send) + L.send_len[rz] * sizeof(T));
  const auto& sd = L.send_displs[rz];
  const auto& rd = L.recv_displs[rz];
  std::string err;
  try {
    switch (api) {
      case v_api::size_t_ptr: comm.all_to_allv(send, sc.data(), sd.data(), recv, rc.data(), rd.data()); break;
      case v_api::int_ptr: {
        auto to_int = [](const std::vector<std::size_t>& v) { return std::vector<int>(v.begin(), v.end()); };
        const auto isc = to_int(sc), isd = to_int(sd), irc = to_int(rc), ird = to_int(rd);
        comm.all_to_allv(send, isc.data(), isd.data(), recv, irc.data(), ird.data());
        break;
      }
      case v_api::span:
        comm.all_to_allv(std::span<const T>(send, L.send_len[rz]), std::span<const std::size_t>(sc),
                         std::span<const std::size_t>(sd), std::span<T>(recv, L.recv_len[rz]),
                         std::span<const std::size_t>(rc), std::span<const std::size_t>(rd));
        break;
      case v_api::explicit_call:
        collx::all_to_allv<algo::direct, proto::simple>(comm, send, sc.data(), sd.data(), recv, rc.data(),
                                                        rd.data());
        break;
    }
  } catch (const std::exception& e) {
    return std::string("rank ") + std::to_string(r) + " threw: " + e.what();
  }
  // Every received element, and every gap byte between blocks, is checked.
  std::vector<bool> covered(L.recv_len[rz], false);
  int wrong = 0;
  for (int q = 0; q < P && wrong < 4; ++q) {
    const std::size_t qz = static_cast<std::size_t>(q);
    for (std::size_t i = 0; i < rc[qz]; ++i) {
      const T want = v_input<T>(q, r, i);
      covered[rd[qz] + i] = true;
      if (std::memcmp(&recv[rd[qz] + i], &want, sizeof(T)) != 0 && wrong++ < 4)
        err += "rank " + std::to_string(r) + ": element " + std::to_string(i) + " from rank " +
               std::to_string(q) + " is wrong\n";
    }
  }
  const auto* rb = reinterpret_cast<const unsigned char*>(recv);
  for (std::size_t e = 0; e < L.recv_len[rz]; ++e)
    if (!covered[e])
      for (std::size_t b = 0; b < sizeof(T); ++b)
        if (rb[e * sizeof(T) + b] != 0x5A) {
          err += "rank " + std::to_string(r) + ": gap element " + std::to_string(e) + " was written\n";
          e = L.recv_len[rz];
          break;
        }
  if (!recvbuf.guards_intact() || !sendbuf.guards_intact())
    err += "rank " + std::to_string(r) + ": guard bytes overwritten\n";
  if (std::memcmp(send_copy.data(), send, send_copy.size()) != 0)
    err += "rank " + std::to_string(r) + ": send buffer changed\n";
  return err;
}

/// `misalign`: elements by which both buffers start off a 64-byte boundary.
std::vector<std::string> run_v(int P, const std::vector<std::uint64_t>& seeds, std::size_t max_count,
                               dtype dt, v_api api, const comm_options& opt = test_options(),
                               std::size_t misalign = 0) {
  auto comms = communicator::create_thread_group(P, opt);
  std::vector<std::string> errs(static_cast<std::size_t>(P));
  std::vector<std::thread> ts;
  for (int r = 0; r < P; ++r)
    ts.emplace_back([&, r] {
      for (std::uint64_t seed : seeds) {
        const v_layout L(P, seed, max_count);
        visit_dtype(dt, [&]<class T>(std::type_identity<T>) {
          const std::string e = run_v_rank<T>(comms[static_cast<std::size_t>(r)], L, api, misalign);
          if (!e.empty()) errs[static_cast<std::size_t>(r)] += "seed " + std::to_string(seed) + ": " + e;
        });
      }
    });
  for (auto& t : ts) t.join();
  std::vector<std::string> out;
  for (auto& e : errs)
    if (!e.empty()) out.push_back(std::string(name(dt)) + " P=" + std::to_string(P) + ": " + e);
  return out;
}

}  // namespace

TEST_CASE("all_to_allv: random counts (zeros included) and displacements with gaps", "[direct][alltoallv]") {
  const int P = GENERATE(1, 2, 3, 5, 8, 9);
  INFO("P = " << P);
  const std::vector<std::uint64_t> seeds{1, 2, 3, 4, 5, 6};
  for (dtype dt : {dtype::float32, dtype::int8, dtype::float64, dtype::bfloat16})
    report(run_v(P, seeds, 300, dt, v_api::size_t_ptr));
  report(run_v(P, {7, 8}, 20000, dtype::float32, v_api::size_t_ptr));  // several chunks per block
  report(run_v(P, {9}, 100, dtype::int32, v_api::int_ptr));
  report(run_v(P, {10}, 100, dtype::float16, v_api::span));
  report(run_v(P, {11}, 100, dtype::uint8, v_api::explicit_call));
}

TEST_CASE("all_to_allv: buffers off vector alignment", "[direct][alltoallv][misaligned]") {
  const int P = GENERATE(3, 4);
  INFO("P = " << P);
  for (std::size_t mis : {1, 3, 7})
    for (dtype dt : {dtype::float32, dtype::float16, dtype::int8, dtype::float64})
      report(run_v(P, {30 + mis}, 300, dt, v_api::size_t_ptr, test_options(), mis));
}

TEST_CASE("all_to_allv through FIFOs of two 128-byte slots", "[direct][alltoallv]") {
  const int P = GENERATE(2, 4, 7);
  report(run_v(P, {21, 22, 23}, 700, dtype::float32, v_api::size_t_ptr, tiny_fifos()));
}

TEST_CASE("all_to_allv: long blocks read from the sender's buffer (single copy)", "[direct][alltoallv]") {
  // Thresholds that put a share of the random blocks on each path: in the
  // header, through the FIFOs, read in place.
  const int P = GENERATE(2, 3, 5, 8);
  INFO("P = " << P);
  // 64: from 512 bytes on a quiet machine, 64 under contention (stream_read_in_place_bytes).
  for (const std::uint64_t min : {std::uint64_t(0), std::uint64_t(64)}) {
    comm_options o = test_options();
    o.single_copy = true;
    o.single_copy_min_bytes = min;
    INFO("single_copy_min_bytes = " << min);
    report(run_v(P, {41, 42, 43}, 300, dtype::float32, v_api::size_t_ptr, o));
    report(run_v(P, {44}, 300, dtype::int8, v_api::size_t_ptr, o));
    report(run_v(P, {45}, 20000, dtype::float64, v_api::size_t_ptr, o));
    report(run_v(P, {46}, 300, dtype::float16, v_api::size_t_ptr, o, 3));  // off vector alignment
    comm_options tiny = tiny_fifos();
    tiny.single_copy = true;
    tiny.single_copy_min_bytes = min;
    report(run_v(P, {47, 48}, 700, dtype::float32, v_api::size_t_ptr, tiny));
  }
}

TEST_CASE("all_to_allv: a count that disagrees across ranks is reported, not corrupting",
          "[direct][alltoallv]") {
  const int P = 3;
  comm_options o = test_options();
  o.timeout = std::chrono::seconds(20);
  SECTION("a block read in place") {
    // Rank 0's block for rank 1 is read from rank 0's buffer; rank 1 posted
    // one element more. Rank 0 then waits for rank 1's word that it has read,
    // which never comes: the mismatch must end that wait, not the deadline.
    comm_options sc_opt = o;
    sc_opt.single_copy_min_bytes = 0;
    auto comms = communicator::create_thread_group(P, sc_opt);
    std::vector<std::string> what(P);
    std::vector<status> code(P, status::ok);
    std::vector<bool> untouched(P, true);
    const std::size_t n = 5000;
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> ts;
    for (int r = 0; r < P; ++r)
      ts.emplace_back([&, r] {
        std::vector<float> s(3 * (n + 8), 1.0f), d(3 * (n + 8), 0.0f);
        std::vector<std::size_t> sc{n, n, n}, sd{0, n + 8, 2 * (n + 8)}, rc = sc, rd = sd;
        if (r == 1) rc[0] = n + 1;
        try {
          comms[r].all_to_allv(s.data(), sc.data(), sd.data(), d.data(), rc.data(), rd.data());
          comms[r].barrier();
        } catch (const collx::error& e) {
          what[r] = e.what();
          code[r] = e.code();
        }
        if (r == 1)
          untouched[1] = std::all_of(d.begin(), d.begin() + n + 1, [](float v) { return v == 0.0f; });
      });
    for (auto& t : ts) t.join();
    CHECK(code[1] == status::mismatch);
    CHECK_THAT(what[1], Contains("recv_counts[0] = 5001") && Contains("rank 0 sends 5000"));
    CHECK(untouched[1]);  // nothing of the disagreeing block was read
    for (int r : {0, 2}) {
      INFO("rank " << r << ": " << what[r]);
      CHECK(code[r] != status::ok);
      CHECK(code[r] != status::timeout);
    }
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(15));
  }
  SECTION("between two ranks") {
    auto comms = communicator::create_thread_group(P, o);
    std::vector<std::string> what(P);
    std::vector<status> code(P, status::ok);
    std::vector<std::thread> ts;
    for (int r = 0; r < P; ++r)
      ts.emplace_back([&, r] {
        std::vector<float> s(3 * 8, 1.0f), d(3 * 8 + 4, 0.0f);
        std::vector<std::size_t> sc{4, 4, 4}, sd{0, 8, 16}, rc{4, 4, 4}, rd{0, 8, 16};
        if (r == 1) rc[0] = 5;  // rank 0 sends 4
        try {
          comms[r].all_to_allv(s.data(), sc.data(), sd.data(), d.data(), rc.data(), rd.data());
        } catch (const collx::error& e) {
          what[r] = e.what();
          code[r] = e.code();
          return;
        }
        // Finished: every block this rank received agreed in count (short
        // messages ride in their headers, so nothing waited on rank 1). The
        // mismatch rank 1 found ends the next call.
        try {
          comms[r].barrier();
        } catch (const collx::error& e) {
          what[r] = std::string("(next call) ") + e.what();
          code[r] = e.code();
        }
      });
    for (auto& t : ts) t.join();
    CHECK(code[1] == status::mismatch);
    CHECK_THAT(what[1], Contains("recv_counts[0] = 5") && Contains("rank 0 sends 4"));
    for (int r : {0, 2}) {
      INFO("rank " << r << ": " << what[r]);
      CHECK(code[r] != status::ok);  // mismatch or aborted because rank 1 failed, never a hang
    }
  }
  SECTION("the block a rank sends itself") {
    auto comms = communicator::create_thread_group(1, o);
    float s[2] = {1, 2}, d[2] = {0, 0};
    const std::size_t sc = 2, rc = 1, z = 0;
    try {
      comms[0].all_to_allv(s, &sc, &z, d, &rc, &z);
      FAIL("accepted");
    } catch (const collx::error& e) {
      CHECK(e.code() == status::mismatch);
      CHECK_THAT(e.what(), Contains("send_counts[0] = 2") && Contains("recv_counts[0] = 1"));
    }
  }
}

TEST_CASE("all_to_all and all_to_allv: bad arguments are rejected before any byte moves",
          "[direct][errors]") {
  auto comms = communicator::create_thread_group(2, test_options());
  communicator& c = comms[0];
  std::vector<float> a(64, 1.0f), b(64, 0.0f);
  const auto canary = b;
  std::vector<std::size_t> cnt{4, 4}, dsp{0, 4};
  SECTION("all_to_all") {
    CHECK_THROWS_WITH(c.all_to_all(static_cast<const float*>(nullptr), b.data(), 4),
                      Contains("send buffer is null"));
    CHECK_THROWS_WITH(c.all_to_all(a.data(), static_cast<float*>(nullptr), 4),
                      Contains("recv buffer is null"));
    CHECK_THROWS_WITH(c.all_to_all(a.data(), b.data(), SIZE_MAX / 4), Contains("overflows"));
    CHECK_THROWS_WITH(c.all_to_all(a.data(), a.data(), 4), Contains("out of place only"));
    CHECK_THROWS_WITH(c.all_to_all(a.data(), a.data() + 3, 4), Contains("overlap"));
    CHECK_THROWS_WITH(c.all_to_all(a.data(), b.data(), 4, static_cast<dtype>(77)), Contains("dtype"));
  }
  SECTION("all_to_allv: null arrays and buffers") {
    CHECK_THROWS_WITH(c.all_to_allv(a.data(), static_cast<const std::size_t*>(nullptr), dsp.data(), b.data(),
                                    cnt.data(), dsp.data()),
                      Contains("send_counts is null"));
    CHECK_THROWS_WITH(c.all_to_allv(a.data(), cnt.data(), dsp.data(), b.data(), cnt.data(),
                                    static_cast<const std::size_t*>(nullptr)),
                      Contains("recv_displs is null"));
    CHECK_THROWS_WITH(c.all_to_allv(static_cast<const float*>(nullptr), cnt.data(), dsp.data(), b.data(),
                                    cnt.data(), dsp.data()),
                      Contains("send buffer is null with send_counts[0] = 4"));
    // Null buffers are fine where every count is zero.
    const std::vector<std::size_t> zero{0, 0};
    CHECK_THROWS_WITH(c.all_to_allv(a.data(), zero.data(), zero.data(), static_cast<float*>(nullptr),
                                    cnt.data(), dsp.data()),
                      Contains("recv buffer is null"));
  }
  SECTION("all_to_allv: negative and overflowing counts and displacements") {
    const std::vector<int> neg{4, -1}, ok{0, 4};
    CHECK_THROWS_WITH(c.all_to_allv(a.data(), neg.data(), ok.data(), b.data(), ok.data(), ok.data()),
                      Contains("send_counts[1] is negative (-1)"));
    const std::vector<std::int64_t> negd{0, -8}, okc{4, 4};
    CHECK_THROWS_WITH(c.all_to_allv(a.data(), okc.data(), okc.data(), b.data(), okc.data(), negd.data()),
                      Contains("recv_displs[1] is negative"));
    const std::vector<std::size_t> huge{SIZE_MAX - 2, 4};
    CHECK_THROWS_WITH(c.all_to_allv(a.data(), huge.data(), dsp.data(), b.data(), cnt.data(), dsp.data()),
                      Contains("send_counts[0]") && Contains("overflows"));
    const std::vector<std::size_t> big_d{0, (std::size_t(1) << 61) - 2}, big_c{4, 4};
    CHECK_THROWS_WITH(c.all_to_allv(a.data(), cnt.data(), dsp.data(), b.data(), big_c.data(), big_d.data()),
                      Contains("recv_displs[1]") && Contains("overflows"));
  }
  SECTION("all_to_allv: blocks outside the spans, wrong span sizes") {
    const std::vector<std::size_t> far{0, 62};
    CHECK_THROWS_WITH(c.all_to_allv(std::span<const float>(a), std::span<const std::size_t>(cnt),
                                    std::span<const std::size_t>(dsp), std::span<float>(b),
                                    std::span<const std::size_t>(cnt), std::span<const std::size_t>(far)),
                      Contains("[62, 66) lies outside the recv buffer of 64 elements"));
    const std::vector<std::size_t> three{1, 1, 1};
    CHECK_THROWS_WITH(c.all_to_allv(std::span<const float>(a), std::span<const std::size_t>(three),
                                    std::span<const std::size_t>(dsp), std::span<float>(b),
                                    std::span<const std::size_t>(cnt), std::span<const std::size_t>(dsp)),
                      Contains("send_counts has 3 entries, expected one per rank (2)"));
  }
  SECTION("all_to_allv: overlapping blocks") {
    const std::vector<std::size_t> clash{0, 2};
    CHECK_THROWS_WITH(c.all_to_allv(a.data(), cnt.data(), dsp.data(), b.data(), cnt.data(), clash.data()),
                      Contains("recv blocks of ranks 0 and 1 overlap"));
    const std::vector<std::size_t> inside{2, 20};  // recv block 0 overlaps send block 0 of the same buffer
    CHECK_THROWS_WITH(c.all_to_allv(a.data(), cnt.data(), dsp.data(), a.data(), cnt.data(), inside.data()),
                      Contains("overlaps the recv block") && Contains("out of place only"));
  }
  SECTION("a rejected call leaves the communicator usable") {
    CHECK_THROWS(c.all_to_all(a.data(), a.data(), 4));
    CHECK(b == canary);
    CHECK(c.error() == status::ok);
  }
}
