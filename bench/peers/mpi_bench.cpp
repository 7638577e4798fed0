// bench/peers/mpi_bench.cpp — mpi-bench / mpich-bench: collx-perf's table for
// an MPI library.
//
//   mpirun.openmpi -np 2 mpi-bench all_reduce -b 8 -e 64M -f 2 -d float -o sum
//   mpiexec.mpich -n 2 mpich-bench all_reduce -b 8 -e 64M -f 2 -d float -o sum
//
// bench/CMakeLists.txt builds this file twice, against Open MPI (mpi-bench)
// and against MPICH (mpich-bench); COLLX_MPI_BENCH_NAME names the program.
//
// Same flags, sizes, columns, bus-bandwidth factors, timing policy (warmup
// iterations, then the mean of -n timed iterations, the maximum over ranks)
// and correctness check as collx-perf (tools/perf_common.hpp), so the two
// tables compare line by line. The collectives map to MPI_Allreduce,
// MPI_Allgather, MPI_Reduce_scatter_block, MPI_Bcast, MPI_Reduce,
// MPI_Alltoall, MPI_Alltoallv (equal packed blocks), MPI_Sendrecv (to the next
// rank, from the previous) and MPI_Barrier; in place means MPI_IN_PLACE (the
// last four have no in-place block, as in collx-perf). MPI has no 16-bit/8-bit floats and no avg: those are
// refused. Exit status: 0 ok, 1 wrong results, 2 bad command line.
#include "perf_common.hpp"

// The C API only: the deprecated C++ bindings are neither used nor warning-clean.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

#ifndef COLLX_MPI_BENCH_NAME
#define COLLX_MPI_BENCH_NAME "mpi-bench"
#endif

#include <cstdio>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using namespace collx;
using perf::options;

void usage(std::FILE* f, const char* prog) {
  std::fprintf(
      f,
      "usage: mpirun -np <P> %s <all_reduce|all_gather|reduce_scatter|broadcast|reduce|all_to_all|\n"
      "       all_to_allv|send_recv|barrier> [flags]\n"
      "\n"
      "%s"
      "  -o, --op <op>              sum prod min max band bor bxor (default sum)\n"
      "  -d, --datatype <type>      int8 uint8 int32 uint32 int64 uint64 float double (default float)\n"
      "  -r, --root <rank>          root of broadcast and reduce (default 0)\n"
      "  -p, --nranks <n>           optional; must equal the number of MPI processes\n"
      "  -h, --help                 this text\n"
      "\n"
      "Columns, bus-bandwidth factors and the check are those of collx-perf (see its --help).\n"
      "Out-of-place broadcast copies the root's send buffer into its receive buffer and\n"
      "broadcasts that (NCCL's semantics); in-place reduce_scatter finds its result at the\n"
      "start of the buffer (MPI_Reduce_scatter_block's MPI_IN_PLACE semantics).\n",
      prog, perf::sweep_flags_help);
}

bool mpi_type(dtype d, MPI_Datatype& t) {
  switch (d) {
    case dtype::int8: t = MPI_INT8_T; return true;
    case dtype::uint8: t = MPI_UINT8_T; return true;
    case dtype::int32: t = MPI_INT32_T; return true;
    case dtype::uint32: t = MPI_UINT32_T; return true;
    case dtype::int64: t = MPI_INT64_T; return true;
    case dtype::uint64: t = MPI_UINT64_T; return true;
    case dtype::float32: t = MPI_FLOAT; return true;
    case dtype::float64: t = MPI_DOUBLE; return true;
    default: return false;
  }
}

bool mpi_op(reduce_op op, MPI_Op& m) {
  switch (op) {
    case reduce_op::sum: m = MPI_SUM; return true;
    case reduce_op::prod: m = MPI_PROD; return true;
    case reduce_op::min: m = MPI_MIN; return true;
    case reduce_op::max: m = MPI_MAX; return true;
    case reduce_op::band: m = MPI_BAND; return true;
    case reduce_op::bor: m = MPI_BOR; return true;
    case reduce_op::bxor: m = MPI_BXOR; return true;
    default: return false;
  }
}

/// Calls f(std::type_identity<T>{}) for the MPI-supported dtypes.
template <class F>
void visit_mpi_dtype(dtype d, F&& f) {
  switch (d) {
    case dtype::int8: f(std::type_identity<std::int8_t>{}); break;
    case dtype::uint8: f(std::type_identity<std::uint8_t>{}); break;
    case dtype::int32: f(std::type_identity<std::int32_t>{}); break;
    case dtype::uint32: f(std::type_identity<std::uint32_t>{}); break;
    case dtype::int64: f(std::type_identity<std::int64_t>{}); break;
    case dtype::uint64: f(std::type_identity<std::uint64_t>{}); break;
    case dtype::float32: f(std::type_identity<float>{}); break;
    case dtype::float64: f(std::type_identity<double>{}); break;
    default: break;
  }
}

struct mpi_caller {
  const options& o;
  MPI_Datatype type;
  MPI_Op op;
  int rank;
  int nranks;
  std::size_t elt;
  /// all_to_allv: equal blocks of the last count, packed (counts, displacements).
  mutable int v_count = -1;
  mutable std::vector<int> v_counts{}, v_displs{};

  /// One collective. send == nullptr means in place (recv holds the input, in
  /// the layout of collx-perf's in-place calls).
  void operator()(const void* send, void* recv, std::size_t count) const {
    const int n = static_cast<int>(count);
    switch (o.collective) {
      case coll::all_reduce:
        MPI_Allreduce(send ? send : MPI_IN_PLACE, recv, n, type, op, MPI_COMM_WORLD);
        break;
      case coll::all_gather:
        if (send) MPI_Allgather(send, n, type, recv, n, type, MPI_COMM_WORLD);
        else MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, n, type, MPI_COMM_WORLD);
        break;
      case coll::reduce_scatter:
        MPI_Reduce_scatter_block(send ? send : MPI_IN_PLACE, recv, n, type, op, MPI_COMM_WORLD);
        break;
      case coll::broadcast:
        if (send && rank == o.root && count > 0) std::memcpy(recv, send, count * elt);
        MPI_Bcast(recv, n, type, o.root, MPI_COMM_WORLD);
        break;
      case coll::reduce:
        if (send) MPI_Reduce(send, recv, n, type, op, o.root, MPI_COMM_WORLD);
        else if (rank == o.root) MPI_Reduce(MPI_IN_PLACE, recv, n, type, op, o.root, MPI_COMM_WORLD);
        else MPI_Reduce(recv, nullptr, n, type, op, o.root, MPI_COMM_WORLD);
        break;
      case coll::all_to_all:
        MPI_Alltoall(send, n, type, recv, n, type, MPI_COMM_WORLD);  // never in place (perf::has_in_place)
        break;
      case coll::all_to_allv:  // equal packed blocks, as collx-perf's
        if (n != v_count) {
          v_counts.assign(static_cast<std::size_t>(nranks), n);
          v_displs.resize(static_cast<std::size_t>(nranks));
          for (int j = 0; j < nranks; ++j) v_displs[static_cast<std::size_t>(j)] = j * n;
          v_count = n;
        }
        MPI_Alltoallv(send, v_counts.data(), v_displs.data(), type, recv, v_counts.data(), v_displs.data(),
                      type, MPI_COMM_WORLD);
        break;
      case coll::send_recv:
        MPI_Sendrecv(send, n, type, (rank + 1) % nranks, 0, recv, n, type, (rank + nranks - 1) % nranks, 0,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        break;
      case coll::barrier: MPI_Barrier(MPI_COMM_WORLD); break;
    }
  }
};

/// What perf::run_sweep needs from MPI: MPI_IN_PLACE, MPI's reductions and
/// barrier, MPI_Wtime.
struct mpi_driver {
  mpi_caller call;

  /// In place, MPI reads rank's all_gather piece at recv + rank·n, where
  /// prepare_check puts it (plan.send_off), as collx does; but
  /// MPI_Reduce_scatter_block leaves the result at the start of the buffer,
  /// not at the rank's block.
  const void* in_place_send(perf::call_plan& plan, const std::byte*) const {
    if (call.o.collective == coll::reduce_scatter) plan.recv_off = 0;
    return nullptr;
  }
  static void barrier() { MPI_Barrier(MPI_COMM_WORLD); }
  static double now() { return MPI_Wtime(); }
  static void max_over_ranks(double& v) {
    MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  }
  static void sum_over_ranks(long long* v, int n) {
    MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  }
};

int run(const options& o, int rank, int P) {
  MPI_Datatype type = MPI_DATATYPE_NULL;
  MPI_Op op = MPI_SUM;
  mpi_type(o.type, type);
  mpi_op(o.op, op);
  mpi_driver driver{{o, type, op, rank, P, size_of(o.type)}};
  const bool print = rank == 0;
  std::FILE* out = stdout;

  const perf::sweep_buffers bufs = perf::alloc_buffers(o, P);

  if (print) {
    char lib[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len = 0;
    MPI_Get_library_version(lib, &len);
    if (char* nl = std::strchr(lib, '\n')) *nl = '\0';
    if (char* comma = std::strchr(lib, ',')) *comma = '\0';
    for (char* c = lib; *c != '\0'; ++c)
      if (*c == '\t') *c = ' ';  // MPICH: "MPICH Version:\t4.0.2"
    perf::print_header(out, o, COLLX_MPI_BENCH_NAME, name(o.collective), P, "processes",
                       perf::op_column(o.collective, o.op), perf::root_column(o.collective, o.root),
                       std::string("library ") + lib);
  }

  perf::sweep_totals totals;
  visit_mpi_dtype(o.type, [&]<class T>(std::type_identity<T>) {
    totals = perf::run_sweep<T>(o, rank, P, bufs.send.get(), bufs.recv.get(), driver, print ? out : nullptr);
  });

  if (print) perf::print_summary(out, totals);
  return totals.failed() ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const char* prog = COLLX_MPI_BENCH_NAME;
  MPI_Init(&argc, &argv);
  int rank = 0, P = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &P);

  // Every rank parses the same command line, so every rank reaches the same verdict.
  options o;
  perf::parse_outcome parsed = perf::parse_command_line(argc, argv, o, {/*mode=*/false, /*variant=*/false});
  MPI_Datatype t;
  MPI_Op m;
  auto refuse = [&](std::string why) { parsed = {perf::parse_outcome::error, std::move(why)}; };
  if (parsed.what == perf::parse_outcome::ok) {
    if (!mpi_type(o.type, t)) refuse(std::string("datatype ") + name(o.type) + " has no MPI equivalent");
    else if (is_reduction(o.collective) && !mpi_op(o.op, m))
      refuse(std::string("op ") + name(o.op) + " has no MPI equivalent");
    else if (o.nranks_given && o.nranks != P)
      refuse("-p " + std::to_string(o.nranks) + " does not match the " + std::to_string(P) +
             " MPI processes");
    else if ((o.collective == coll::broadcast || o.collective == coll::reduce) && o.root >= P)
      refuse("root " + std::to_string(o.root) + " is out of range for " + std::to_string(P) + " ranks");
  }
  int rc = perf::parse_exit_status(parsed, prog, usage, rank == 0);
  if (rc < 0) rc = run(o, rank, P);
  MPI_Finalize();
  return rc;
}
