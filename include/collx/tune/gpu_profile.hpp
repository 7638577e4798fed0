// collx/tune/gpu_profile.hpp — the profile a GPU group's automatic choice
// prices with: one the user names, or the built-in preset for the kind of
// machine the group found.
//
// In order:
//   1. gpu::options::profile, where set (a profile value in the program);
//   2. gpu::options::tune_file, else COLLX_GPU_TUNE_FILE: `preset:NAME`
//      (tune/presets.hpp), or a profile file (tune/profile_file.hpp) whose
//      links are GPU links (intra nvlink or pcie; a CPU profile, which
//      describes shared memory, is refused) measured on this machine (the
//      check of tune/active.hpp);
//   3. the preset for the machine (gpu_preset_for): the group's FIFO regions
//      in host memory or GPUs joined by PCIe only: the PCIe preset of the
//      GPUs' generation (Gen5 from Hopper, sm_90); every pair joined by
//      NVLink: h100_nvswitch from Hopper (its multicast rate is used only
//      where buffers are bound to a multicast object: tune/mesh_problem.hpp),
//      a100_nvswitch before; ranks sharing one GPU: no preset describes them,
//      h100_nvswitch's numbers are used and the origin says so.
// COLLX_TUNE_FILE is not read: it names the host communicators' profile.
// The origin (active_profile::origin) says which, and why: COLLX_DEBUG=1
// prints it when a group is made (gpu::communicator::profile_origin()).
//
// Errors: collx::error (invalid_argument) naming the setting and the problem:
// an unknown preset, a file that cannot be read or parsed, a CPU profile, a
// profile of another machine. No CUDA here: the unit tests check it on CPUs.
#pragma once

#include <collx/error.hpp>
#include <collx/tune/active.hpp>
#include <collx/tune/machine_id.hpp>
#include <collx/tune/model.hpp>
#include <collx/tune/presets.hpp>
#include <collx/tune/profile_file.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace collx::tune {

/// What a GPU group's creation found about its machine.
struct gpu_machine {
  int gpus = 1;               // distinct GPUs the group's ranks run on
  bool host_regions = false;  // FIFO regions in mapped host memory (no peer access)
  bool all_nvlink = false;    // every pair of the GPUs joined by NVLink (cuda/links.hpp)
  bool multicast = false;     // the group has a multicast object (cuda/multicast.hpp)
  int sm_major = 9;           // compute capability (major) of rank 0's GPU
};

/// The built-in preset for machine m (see the header comment), as the
/// profile and where it comes from.
inline active_profile gpu_preset_for(const gpu_machine& m) {
  auto named = [](const char* n, const std::string& why) {
    return active_profile{*find_preset(n), std::string("built-in preset ") + n + " (" + why + ")"};
  };
  const bool hopper = m.sm_major >= 9;
  const char* pcie = hopper ? "pcie_gen5_8gpu" : "pcie_gen4_8gpu";
  const std::string gen =
      hopper ? "sm_" + std::to_string(m.sm_major) + "x: PCIe Gen5" : "before sm_90: PCIe Gen4";
  if (m.host_regions) return named(pcie, "the FIFO regions are in host memory, reached over PCIe; " + gen);
  if (m.gpus <= 1)
    return named("h100_nvswitch",
                 "the ranks share one GPU, which no preset describes: its numbers are a stand-in");
  if (!m.all_nvlink) return named(pcie, "some pair of the GPUs is joined by PCIe only; " + gen);
  if (m.multicast) return named("h100_nvswitch", "NVLink between every pair, with multicast");
  if (hopper)
    return named("h100_nvswitch", "NVLink between every pair, sm_" + std::to_string(m.sm_major) +
                                      "x; no multicast here, so its multicast rate is not used");
  return named("a100_nvswitch", "NVLink between every pair, before sm_90");
}

/// The profile a GPU group on machine m prices with, from `setting`
/// (gpu::options::tune_file; empty: COLLX_GPU_TUNE_FILE, then the preset for
/// m). `here` is this machine, for a file's check. Throws collx::error.
COLLX_COLD inline active_profile resolve_gpu_profile(std::string setting, const gpu_machine& m,
                                                     const machine_info& here) {
  std::string from = "gpu::options::tune_file";
  if (setting.empty()) {
    if (const char* v = std::getenv("COLLX_GPU_TUNE_FILE"); v != nullptr && *v != '\0') {
      setting = v;
      from = "COLLX_GPU_TUNE_FILE";
    }
  }
  if (setting.empty()) return gpu_preset_for(m);
  if (setting.rfind("preset:", 0) == 0) {
    const std::string n = setting.substr(7);
    return {preset_or_throw(n, from + "='" + setting + "'"), "preset " + n + " (" + from + ")"};
  }
  profile_doc d = load_profile(setting);
  if (d.model.intra.kind != link_kind::nvlink && d.model.intra.kind != link_kind::pcie)
    throw_error(status::invalid_argument,
                from + ": profile " + setting + " describes " + name(d.model.intra.kind) +
                    " links, not GPUs (a GPU profile's intra link is nvlink or pcie); a CPU profile "
                    "belongs in COLLX_TUNE_FILE");
  if (!d.machine.same_topology(here))
    throw_error(status::invalid_argument, from + ": profile " + setting +
                                              " was measured on another machine (" + d.machine.topology() +
                                              "); this one is " + here.topology());
  for (const std::string& w : d.warnings) std::fprintf(stderr, "collx: warning: %s\n", w.c_str());
  return {d.model, "file " + setting + " (" + from + ", measured " +
                       (d.measured.empty() ? std::string("at an unrecorded time") : d.measured) + " on " +
                       d.machine.topology() + ")"};
}

}  // namespace collx::tune
