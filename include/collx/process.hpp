// collx/process.hpp — communicators whose ranks are processes of this host.
//
//   collx::init_rank(P, id, rank, opts)   every rank passes the unique id that
//                                         one process got from collx::get_unique_id()
//   collx::from_env(opts)                 the rank a launcher started this process as
//                                         (collxrun, torchrun, Open MPI, PMI, Slurm;
//                                         see collx/bootstrap/env.hpp)
//
// Opt-in: this header brings the TCP bootstrap (bootstrap/: the root service
// runs on a std::thread), which a program of thread ranks does not need.
// Each rank connects to the bootstrap root, then the ranks join one shm
// segment (transport/shm_join.hpp); the bootstrap session stays open for the
// communicator's lifetime.
//
// Errors: status::invalid_argument for a rank or size out of range, for bad
// options, or when from_env finds no launcher environment (the message lists
// the variables it looked for); the bootstrap's errors (timeout, refused
// secret, ranks on several hosts) and join_shm's (mismatched FIFO geometry or
// options, named per rank) pass through as collx::error.
#pragma once

#include <collx/bootstrap/env.hpp>
#include <collx/bootstrap/root.hpp>
#include <collx/bootstrap/session.hpp>
#include <collx/communicator.hpp>
#include <collx/error.hpp>
#include <collx/options.hpp>
#include <collx/transport/shm_join.hpp>

#include <memory>
#include <string>
#include <utility>

namespace collx {

namespace comm {
/// The door from process creation into basic_communicator's private members.
struct access {
  static communicator join(bootstrap::session s, const comm_options& opt) {
    const int rank = s.rank(), nranks = s.size();
    transport::shm_join_params p;
    p.layout = communicator::layout_for(nranks, opt);
    p.channel_names = proto::channel_names.data();
    p.step_origin = opt.step_origin;
    p.single_copy_min = opt.single_copy_min_for(false);
    p.single_copy = opt.single_copy;
    auto seg = transport::join_shm(s, p);
    auto keep = std::make_shared<bootstrap::session>(std::move(s));
    return communicator::adopt(std::move(seg), rank, nranks, opt, std::move(keep));
  }
};
}  // namespace comm

/// Rank `rank` of `nranks` processes that all pass the same id.
inline communicator init_rank(int nranks, const unique_id& id, int rank,
                              const comm_options& opt = comm_options::from_env()) {
  require(nranks >= 1 && rank >= 0 && rank < nranks, "init_rank",
          "rank " + std::to_string(rank) + " / nranks " + std::to_string(nranks) + " are out of range");
  opt.validate();
  return comm::access::join(bootstrap::session::connect(id, rank, nranks, opt.timeout), opt);
}

/// The rank this process was started as by a launcher (collxrun, torchrun,
/// mpirun, srun, a PMI launcher); throws if none is detected.
inline communicator from_env(const comm_options& opt = comm_options::from_env()) {
  opt.validate();
  const auto env = bootstrap::detect_launch_env();
  if (!env)
    throw_error(status::invalid_argument,
                "from_env: no launcher environment found (COLLX_RANK/COLLX_SIZE, RANK/WORLD_SIZE, "
                "OMPI_COMM_WORLD_*, PMI_RANK/PMI_SIZE or SLURM_PROCID/SLURM_NTASKS)");
  return comm::access::join(bootstrap::connect_from_env(*env, opt.timeout), opt);
}

}  // namespace collx
