// tools/probe_problem.hpp — the tuner's problem as collx-probe poses it, for
// the probe and for collx-probe-replay (which judges saved reports the same
// way).
#pragma once

#include <collx/options.hpp>
#include <collx/tune/model.hpp>

namespace collx::probe {

/// The tuner's problem for c on P process ranks at b bytes on a machine of
/// `cpus` CPUs, as comm/dispatch.hpp builds it for a communicator with
/// default options.
inline tune::problem problem_of(coll c, int P, double b, int cpus) {
  const bool oversub = cpus > 0 && P > cpus;
  const comm_options defaults;
  tune::problem q{c, P, b, P > 1 && b >= double(defaults.single_copy_min_for(false)), oversub};
  if (oversub) q.cpu_share = double(cpus) / P;
  return q;
}

}  // namespace collx::probe
