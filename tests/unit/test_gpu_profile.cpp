// The profile a GPU group prices with (tune/gpu_profile.hpp): the preset for
// the kind of machine the group found, a preset or a GPU profile file named
// by gpu::options::tune_file or COLLX_GPU_TUNE_FILE, and the refusals (an
// unknown preset, a CPU profile, another machine's profile, a missing file).
#include <collx/tune/gpu_profile.hpp>
#include <collx/tune/profile_file.hpp>

#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

using namespace collx;
using Catch::Matchers::Contains;

// A named namespace: the unit tests build as one translation unit.
namespace gpu_profile_test {

// Whether a carries the named preset's numbers (a few that differ between presets).
bool is_preset(const tune::active_profile& a, const tune::profile& p) {
  return a.model.intra.kind == p.intra.kind && a.model.intra.gbps == p.intra.gbps &&
         a.model.peer_gbps == p.peer_gbps && a.model.barrier_us == p.barrier_us &&
         a.model.multicast_gbps == p.multicast_gbps;
}

// Restores an environment variable when the test ends.
struct saved_env {
  std::string name, value;
  bool had;
  explicit saved_env(const char* n) : name(n) {
    const char* v = std::getenv(n);
    had = v != nullptr;
    if (had) value = v;
  }
  ~saved_env() {
    if (had) ::setenv(name.c_str(), value.c_str(), 1);
    else ::unsetenv(name.c_str());
  }
};

TEST_CASE("GPU profile: the preset for the kind of machine", "[tune][gpu_profile]") {
  using tune::gpu_machine;
  struct row {
    gpu_machine m;
    const tune::profile* want;
    const char* name;
  };
  const row rows[] = {
      // FIFOs in host memory: PCIe, by the GPUs' generation.
      {{.gpus = 8, .host_regions = true, .all_nvlink = true, .sm_major = 9},
       &tune::pcie_gen5_8gpu,
       "pcie_gen5_8gpu"},
      {{.gpus = 2, .host_regions = true, .sm_major = 8}, &tune::pcie_gen4_8gpu, "pcie_gen4_8gpu"},
      {{.gpus = 1, .host_regions = true, .sm_major = 9}, &tune::pcie_gen5_8gpu, "pcie_gen5_8gpu"},
      // PCIe peer access only.
      {{.gpus = 4, .all_nvlink = false, .sm_major = 10}, &tune::pcie_gen5_8gpu, "pcie_gen5_8gpu"},
      {{.gpus = 4, .all_nvlink = false, .sm_major = 8}, &tune::pcie_gen4_8gpu, "pcie_gen4_8gpu"},
      // NVLink everywhere.
      {{.gpus = 8, .all_nvlink = true, .multicast = true, .sm_major = 9},
       &tune::h100_nvswitch,
       "h100_nvswitch"},
      {{.gpus = 8, .all_nvlink = true, .multicast = false, .sm_major = 9},
       &tune::h100_nvswitch,
       "h100_nvswitch"},
      {{.gpus = 8, .all_nvlink = true, .sm_major = 8}, &tune::a100_nvswitch, "a100_nvswitch"},
      // Ranks sharing one GPU: a stand-in.
      {{.gpus = 1, .sm_major = 9}, &tune::h100_nvswitch, "h100_nvswitch"},
  };
  for (const row& r : rows) {
    const tune::active_profile a = tune::gpu_preset_for(r.m);
    INFO(a.origin);
    CHECK(is_preset(a, *r.want));
    CHECK_THAT(a.origin, Contains(std::string("built-in preset ") + r.name));
  }
  CHECK_THAT(tune::gpu_preset_for({.gpus = 1}).origin, Contains("no preset describes"));
  CHECK_THAT(tune::gpu_preset_for({.gpus = 8, .all_nvlink = true, .sm_major = 9}).origin,
             Contains("multicast rate is not used"));
}

TEST_CASE("GPU profile: the setting, COLLX_GPU_TUNE_FILE, files and refusals", "[tune][gpu_profile]") {
  const saved_env keep("COLLX_GPU_TUNE_FILE");
  const saved_env keep_host("COLLX_TUNE_FILE");
  const tune::machine_info here = tune::this_machine();
  const tune::gpu_machine nvswitch{.gpus = 8, .all_nvlink = true, .multicast = true, .sm_major = 9};
  ::unsetenv("COLLX_GPU_TUNE_FILE");
  // Nothing named: the machine's preset; the host's variable is not read.
  ::setenv("COLLX_TUNE_FILE", "preset:shm_host", 1);
  CHECK(is_preset(tune::resolve_gpu_profile("", nvswitch, here), tune::h100_nvswitch));
  // The variable, then the setting over it.
  ::setenv("COLLX_GPU_TUNE_FILE", "preset:a100_nvswitch", 1);
  tune::active_profile a = tune::resolve_gpu_profile("", nvswitch, here);
  CHECK(is_preset(a, tune::a100_nvswitch));
  CHECK_THAT(a.origin, Contains("preset a100_nvswitch") && Contains("COLLX_GPU_TUNE_FILE"));
  a = tune::resolve_gpu_profile("preset:pcie_gen4_8gpu", nvswitch, here);
  CHECK(is_preset(a, tune::pcie_gen4_8gpu));
  CHECK_THAT(a.origin, Contains("gpu::options::tune_file"));
  ::unsetenv("COLLX_GPU_TUNE_FILE");
  CHECK_THROWS_WITH(tune::resolve_gpu_profile("preset:tpu", nvswitch, here),
                    Contains("no preset named 'tpu'") && Contains("h100_nvswitch"));
  // A GPU profile of this machine is taken as it is.
  const std::string path = "/tmp/collx_test_gpu_profile_" + std::to_string(::getpid()) + ".json";
  tune::profile_doc d;
  d.model = tune::a100_nvswitch;
  d.model.barrier_us = 2.75;  // a number no preset has
  d.machine = here;
  d.measured = "2026-12-07T13:00:00Z";
  tune::save_profile(d, path);
  a = tune::resolve_gpu_profile(path, nvswitch, here);
  CHECK(a.model.barrier_us == 2.75);
  CHECK(a.model.intra.kind == tune::link_kind::nvlink);
  CHECK_THAT(a.origin, Contains("file " + path) && Contains("2026-12-07T13:00:00Z"));
  // Another machine's is refused.
  tune::machine_info other = here;
  other.cpus = here.cpus + 62;
  CHECK_THROWS_WITH(
      tune::resolve_gpu_profile(path, nvswitch, other),
      Contains("measured on another machine") && Contains(std::to_string(here.cpus + 62) + " CPUs"));
  // A CPU profile (shared-memory links) is not a GPU's.
  d.model = tune::shm_host;
  tune::save_profile(d, path);
  CHECK_THROWS_WITH(tune::resolve_gpu_profile(path, nvswitch, here),
                    Contains("describes shm links, not GPUs") && Contains("COLLX_TUNE_FILE"));
  std::remove(path.c_str());
  CHECK_THROWS_WITH(tune::resolve_gpu_profile(path, nvswitch, here), Contains(path));
}

}  // namespace gpu_profile_test
