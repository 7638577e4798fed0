// Test support: run one collective case on one rank and check it.
//
// Every rank fills its own inputs, runs the call, then checks its outputs
// element by element against the double reference, checks the guard bytes
// around every buffer, and (out of place) that its input is unchanged. Errors
// are returned as strings so thread-rank tests can report them from the main
// thread (Catch2 assertions are not thread-safe).
#pragma once

#include "reference.hpp"

#include <collx/communicator.hpp>

#include <barrier>
#include <span>
#include <sstream>
#include <string>
#include <vector>

namespace collx::test {

/// A collective called through explicit composition instead of the runtime
/// variant choice, e.g. &call_explicit<algo::direct_one_shot, proto::simple, coll::all_reduce>.
using call_fn = void (*)(communicator&, const void* send, void* recv, std::size_t count, dtype, reduce_op,
                         int root);

template <class Algo, class Proto, coll C>
void call_explicit(communicator& comm, const void* send, void* recv, std::size_t count, dtype dt,
                   reduce_op op, int root) {
  comm.execute<Algo, Proto, C>(send, recv, count, dt, op, root);
}

struct case_desc {
  coll kind = coll::all_reduce;
  dtype dt = dtype::float32;
  reduce_op op = reduce_op::sum;
  std::size_t count = 0;  // NCCL convention for `kind`
  bool in_place = false;
  int root = 0;
  std::size_t misalign = 0;  // elements off a 64-byte boundary, applied to every buffer
  variant_choice variant{};
  call_fn call = nullptr;  // explicit composition; overrides `variant`
  const char* call_name = "";

  std::string str(int nranks) const {
    std::ostringstream s;
    s << name(kind) << " P=" << nranks << " dtype=" << name(dt);
    if (is_reduction(kind)) s << " op=" << name(op);
    s << " count=" << count << (in_place ? " in-place" : " out-of-place");
    if (kind == coll::broadcast || kind == coll::reduce) s << " root=" << root;
    if (misalign) s << " misalign=" << misalign;
    if (variant.algo != algo_id::automatic) s << " algo=" << name(variant.algo);
    if (variant.proto != proto_id::automatic) s << " proto=" << name(variant.proto);
    if (call != nullptr) s << " via " << call_name;
    return s.str();
  }
};

/// Reference values shared by the thread ranks of one group: each rank
/// computes a 1/P share, so the check costs O(n) per rank instead of O(n·P).
struct shared_reference {
  explicit shared_reference(int nranks) : sync(nranks) {}
  std::barrier<> sync;
  std::vector<double> value, tolerance;
  std::vector<std::uint64_t> bits;
};

/// Whether algorithm `a` has a protocol axis (algorithms that move data
/// through peer memory run and report one protocol, whichever is asked).
inline bool has_protocol_axis(algo_id a) {
  return ![]<class... As>(algo_id id, type_list<As...>) {
    return ((As::id == id && algorithm_needs<As>::peer_memory) || ...);
  }(a, algorithms{});
}

namespace detail {

template <class T>
std::string run_typed(communicator& comm, const case_desc& c, shared_reference* shared) {
  const int P = comm.size(), r = comm.rank();
  const std::size_t n = c.count, Pn = n * static_cast<std::size_t>(P);
  const bool a2a = c.kind == coll::all_to_all;
  const std::size_t send_n = c.kind == coll::reduce_scatter || a2a ? Pn : n;
  const std::size_t recv_n = c.kind == coll::all_gather || a2a ? Pn : n;
  if (a2a && c.in_place) return c.str(P) + " — all_to_all has no in-place form";
  const bool reduction = is_reduction(c.kind);
  std::ostringstream err;
  int reported = 0;
  auto fail = [&](const std::string& what) {
    if (reported++ < 4) err << "  rank " << r << ": " << what << "\n";
  };
  // Rank r's input element i (i indexes the full send vector).
  auto in = [&](int rank, std::size_t i) {
    return reduction ? input<T>(c.op, rank, i, P) : movement_input<T>(rank, i);
  };

  // In place, one buffer holds both sides in NCCL's layout; out of place, two.
  const std::size_t io_n = c.in_place ? (send_n > recv_n ? send_n : recv_n) : recv_n;
  guarded_buffer recvbuf(io_n * sizeof(T), c.misalign * sizeof(T));
  guarded_buffer sendbuf(c.in_place ? 0 : send_n * sizeof(T), c.misalign * sizeof(T));
  T* io = recvbuf.as<T>();
  std::memset(io, 0x5A, io_n * sizeof(T));  // no correct result has this pattern everywhere
  T* send = c.in_place ? io : sendbuf.as<T>();
  T* recv_ptr = io;
  if (c.in_place && c.kind == coll::all_gather) send = io + static_cast<std::size_t>(r) * n;
  if (c.in_place && c.kind == coll::reduce_scatter) recv_ptr = io + static_cast<std::size_t>(r) * n;
  for (std::size_t i = 0; i < send_n; ++i) send[i] = in(r, i);
  std::vector<unsigned char> send_copy;
  if (!c.in_place)
    send_copy.assign(reinterpret_cast<unsigned char*>(send),
                     reinterpret_cast<unsigned char*>(send) + send_n * sizeof(T));

  // A throwing call must not skip the barriers below: the other ranks would wait
  // there forever. Record it and go on; the checks are skipped.
  std::string call_error;
  try {
    if (c.call != nullptr) {
      c.call(comm, send, recv_ptr, n, c.dt, c.op, c.root);
    } else {
      switch (c.kind) {
        case coll::all_reduce: comm.all_reduce(send, recv_ptr, n, c.op, c.variant); break;
        case coll::all_gather: comm.all_gather(send, recv_ptr, n, c.variant); break;
        case coll::reduce_scatter: comm.reduce_scatter(send, recv_ptr, n, c.op, c.variant); break;
        case coll::broadcast: comm.broadcast(send, recv_ptr, n, c.root, c.variant); break;
        case coll::reduce: comm.reduce(send, recv_ptr, n, c.op, c.root, c.variant); break;
        case coll::all_to_all: comm.all_to_all(send, recv_ptr, n, c.variant); break;
        case coll::all_to_allv:  // these have their own tests (tests/matrix/test_alltoall.cpp, test_p2p.cpp)
        case coll::send_recv:
        case coll::barrier: call_error = std::string(name(c.kind)) + " is not a run_case kind"; break;
      }
    }
  } catch (const std::exception& e) {
    call_error = e.what();
  }
  // A pinned variant must be the one that ran (an algorithm without a
  // protocol axis runs, and reports, its one protocol).
  if (call_error.empty() && c.call == nullptr && c.variant.algo != algo_id::automatic) {
    const variant_choice ran = comm.last_variant();
    if (ran.algo != c.variant.algo ||
        (has_protocol_axis(c.variant.algo) && c.variant.proto != proto_id::automatic &&
         ran.proto != c.variant.proto))
      fail(std::string("ran ") + name(ran.algo) + "/" + name(ran.proto) + ", not the variant asked for");
  }

  // Reference for reductions over the whole result range [0, m).
  const std::size_t m = c.kind == coll::reduce_scatter ? Pn : n;
  if (shared != nullptr && reduction) {
    if (r == 0) {
      shared->value.resize(m);
      shared->tolerance.resize(m);
      shared->bits.resize(m);
    }
    shared->sync.arrive_and_wait();
    const std::size_t lo = m * static_cast<std::size_t>(r) / P, hi = m * static_cast<std::size_t>(r + 1) / P;
    for (std::size_t i = lo; i < hi; ++i) {
      const auto ref = reduce_reference<T>(c.op, i, P);
      shared->value[i] = ref.value;
      shared->tolerance[i] = ref.tolerance;
      shared->bits[i] = ref.bits;
    }
    shared->sync.arrive_and_wait();
  }
  auto reference_at = [&](std::size_t i) {
    if (shared == nullptr) return reduce_reference<T>(c.op, i, P);
    return reference_element<T>{shared->value[i], shared->tolerance[i], shared->bits[i]};
  };
  auto check_reduced = [&](const T* out, std::size_t count, std::size_t base) {
    for (std::size_t i = 0; i < count; ++i) {
      const auto ref = reference_at(base + i);
      if (!matches(ref, c.op, out[i])) {
        std::ostringstream s;
        s << "element " << i << ": got " << to_double(out[i]) << ", expected " << ref.value << " ± "
          << ref.tolerance;
        if (is_bitwise(c.op)) s << " (bits " << ref.bits << ")";
        fail(s.str());
      }
    }
  };
  auto check_exact = [&](const T* out, std::size_t count, int src_rank, std::size_t base) {
    for (std::size_t i = 0; i < count; ++i) {
      const T want = in(src_rank, base + i);
      if (std::memcmp(&out[i], &want, sizeof(T)) != 0) {
        std::ostringstream s;
        s << "element " << base + i << " from rank " << src_rank << ": got " << to_double(out[i])
          << ", expected " << to_double(want);
        fail(s.str());
      }
    }
  };

  if (!call_error.empty()) {
    if (shared != nullptr && reduction) shared->sync.arrive_and_wait();
    return c.str(P) + " — threw: " + call_error;
  }
  switch (c.kind) {
    case coll::all_reduce: check_reduced(recv_ptr, n, 0); break;
    case coll::reduce_scatter: check_reduced(recv_ptr, n, static_cast<std::size_t>(r) * n); break;
    case coll::reduce:
      if (r == c.root) check_reduced(recv_ptr, n, 0);
      break;
    case coll::broadcast: check_exact(recv_ptr, n, c.root, 0); break;
    case coll::all_gather:
      for (int q = 0; q < P; ++q) check_exact(recv_ptr + static_cast<std::size_t>(q) * n, n, q, 0);
      break;
    case coll::all_to_all:  // block q came from rank q's send block r
      for (int q = 0; q < P; ++q)
        check_exact(recv_ptr + static_cast<std::size_t>(q) * n, n, q, static_cast<std::size_t>(r) * n);
      break;
    case coll::all_to_allv:
    case coll::send_recv:
    case coll::barrier: break;
  }
  if (!recvbuf.guards_intact()) fail("guard bytes around the output buffer were overwritten");
  if (!c.in_place) {
    if (!sendbuf.guards_intact()) fail("guard bytes around the input buffer were overwritten");
    if (!send_copy.empty() &&
        std::memcmp(send_copy.data(), send, send_copy.size()) != 0)  // data() may be null
      fail("the input buffer of an out-of-place call changed");
    // Non-root ranks of reduce must not write recv at all.
    if (c.kind == coll::reduce && r != c.root) {
      const auto* b = reinterpret_cast<const unsigned char*>(recv_ptr);
      for (std::size_t i = 0; i < recv_n * sizeof(T); ++i)
        if (b[i] != 0x5A) {
          fail("reduce wrote the recv buffer of a non-root rank");
          break;
        }
    }
  }
  if (shared != nullptr && reduction) shared->sync.arrive_and_wait();  // vectors reused by the next case
  if (reported == 0) return {};
  std::ostringstream s;
  s << c.str(P) << " — " << reported << " problem(s):\n" << err.str();
  return s.str();
}

}  // namespace detail

/// Runs case c on this rank; returns "" on success or a description of what was wrong.
/// With `shared`, every rank of the group must run the same case sequence.
inline std::string run_case(communicator& comm, const case_desc& c, shared_reference* shared = nullptr) {
  std::string out;
  try {
    visit_dtype(c.dt, [&]<class T>(std::type_identity<T>) { out = detail::run_typed<T>(comm, c, shared); });
  } catch (const std::exception& e) {
    out = c.str(comm.size()) + " — threw: " + e.what();
  }
  return out;
}

/// The dtype/op pairs of the matrix.
inline std::vector<std::pair<dtype, reduce_op>> all_dtype_ops() {
  std::vector<std::pair<dtype, reduce_op>> v;
  for (int d = 0; d < dtype_count; ++d)
    for (int o = 0; o < reduce_op_count; ++o)
      if (is_supported(static_cast<reduce_op>(o), static_cast<dtype>(d)))
        v.emplace_back(static_cast<dtype>(d), static_cast<reduce_op>(o));
  return v;
}

inline case_desc make_case(coll kind, dtype dt, reduce_op op, std::size_t count, variant_choice v = {},
                           int root = 0, bool in_place = false) {
  case_desc c;
  c.kind = kind;
  c.dt = dt;
  c.op = op;
  c.count = count;
  c.in_place = in_place;
  c.root = root;
  c.variant = v;
  return c;
}

/// Appends `c` at each of `counts`, out of place then in place; `root()`
/// gives each appended case its root.
template <class Root>
void add_counts(std::vector<case_desc>& cases, case_desc c, std::span<const std::size_t> counts,
                Root&& root) {
  for (std::size_t count : counts)
    for (bool in_place : {false, true}) {
      c.count = count;
      c.in_place = in_place;
      c.root = root();
      cases.push_back(c);
    }
}

/// The pairs a reduced matrix keeps: every op of fp32 and int32, sum of the rest.
inline bool common_pair(dtype dt, reduce_op op) {
  return op == reduce_op::sum || dt == dtype::float32 || dt == dtype::int32;
}

/// A `keep` of add_dtype_op_matrix: every pair.
inline constexpr auto every_pair = [](coll, std::size_t, dtype, reduce_op) { return true; };

/// The matrix of `colls` × all_dtype_ops() through variant `v`: data movement
/// once per dtype (op sum), reductions for the pairs `keep(kind, i, dt, op)`
/// accepts (i: the pair's index in all_dtype_ops()), each at every count out
/// of place and in place. Roots rotate over `root_ranks` ranks, one step per
/// case, continuing from `k` (a caller building several matrices keeps it).
template <class Keep>
void add_dtype_op_matrix(std::vector<case_desc>& cases, std::span<const coll> colls,
                         std::span<const std::size_t> counts, variant_choice v, int root_ranks,
                         std::size_t& k, Keep&& keep) {
  const auto pairs = all_dtype_ops();
  const auto ranks = static_cast<std::size_t>(root_ranks);
  for (coll kind : colls)
    for (std::size_t i = 0; i < pairs.size(); ++i) {
      const auto [dt, op] = pairs[i];
      if (!is_reduction(kind) && op != reduce_op::sum) continue;  // data movement: once per dtype
      if (!keep(kind, i, dt, op)) continue;
      add_counts(cases, make_case(kind, dt, op, 0, v), counts, [&] { return static_cast<int>(k++ % ranks); });
    }
}

}  // namespace collx::test
