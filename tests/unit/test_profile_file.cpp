// Profiles as files (tune/profile_file.hpp) and the run-time profile
// (tune/active.hpp): round trip, bad files rejected with a message naming
// the problem, unknown keys warned about, another topology refused, and the
// communicator's automatic choice following the loaded profile.
#include <collx/communicator.hpp>
#include <collx/tune/active.hpp>
#include <collx/tune/json.hpp>
#include <collx/tune/profile_file.hpp>

#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

using namespace collx;
using Catch::Matchers::Contains;

// A named namespace: the unit tests build as one translation unit.
namespace profile_file_test {

tune::profile_doc sample_doc() {
  tune::profile_doc d;
  d.model = tune::h100_ib_ndr;  // every field differs from the defaults
  d.model.cache_bytes = 50.0 * 1024 * 1024;
  d.model.mem_gbps = 3.25;
  d.model.near_cache_bytes = 2.0 * 1024 * 1024;
  d.model.near_gbps = 11.5;
  d.model.call_us = 0.125;
  d.model.oversub_call_us = 3.5;
  d.model.single_copy_gbps = 1.75;
  d.model.proto[proto::channel_of<proto::ll>].oversub_extra_us = 0.5;
  d.machine = tune::this_machine();
  d.measured = "2026-12-01T17:00:00Z";
  d.source = "test \"quoted\"\n";
  return d;
}

std::string temp_path(const char* tag) {
  return "/tmp/collx_test_profile_" + std::to_string(::getpid()) + "_" + tag + ".json";
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
}

// The sample's JSON with `from` replaced by `to` (once; the text must occur).
std::string edited(const std::string& from, const std::string& to) {
  std::string s = tune::to_json(sample_doc());
  const auto at = s.find(from);
  REQUIRE(at != std::string::npos);
  return s.replace(at, from.size(), to);
}

void check_rejected(const std::string& text, const std::string& message) {
  INFO(text);
  CHECK_THROWS_WITH(tune::from_json(text, "P.json"), Contains("profile P.json: ") && Contains(message));
}

TEST_CASE("profile file: round trip keeps every number exactly", "[tune][profile]") {
  const tune::profile_doc d = sample_doc();
  const std::string text = tune::to_json(d);
  const tune::profile_doc r = tune::from_json(text, "mem");
  CHECK(r.warnings.empty());
  // Field by field against the preset the sample was made from.
  const tune::profile& m = tune::h100_ib_ndr;
  CHECK(r.model.intra.kind == tune::link_kind::nvlink);
  CHECK(r.model.intra.alpha_us == m.intra.alpha_us);
  CHECK(r.model.intra.gbps == m.intra.gbps);
  CHECK(r.model.inter.kind == tune::link_kind::ib);
  CHECK(r.model.inter.alpha_us == m.inter.alpha_us);
  CHECK(r.model.inter.gbps == m.inter.gbps);
  CHECK(r.model.ranks_per_node == 8);
  for (int c = 0; c < proto::channel_count; ++c) {
    CHECK(r.model.proto[c].extra_alpha_us == m.proto[c].extra_alpha_us);
    CHECK(r.model.proto[c].efficiency == m.proto[c].efficiency);
  }
  CHECK(r.model.barrier_us == m.barrier_us);
  CHECK(r.model.peer_gbps == m.peer_gbps);
  CHECK(m.multicast_gbps > 0);
  CHECK(r.model.multicast_gbps == m.multicast_gbps);  // 0.85 × 370.8: needs 17 digits
  CHECK(r.model.copy_gbps == m.copy_gbps);
  CHECK(r.model.reduce_gbps == m.reduce_gbps);
  CHECK(r.model.oversub_step_us == m.oversub_step_us);
  CHECK(r.model.cache_bytes == 50.0 * 1024 * 1024);
  CHECK(r.model.mem_gbps == 3.25);
  CHECK(r.model.near_cache_bytes == 2.0 * 1024 * 1024);
  CHECK(r.model.near_gbps == 11.5);
  CHECK(r.model.call_us == 0.125);
  CHECK(r.model.oversub_call_us == 3.5);
  CHECK(r.model.single_copy_gbps == 1.75);
  for (int c = 0; c < proto::channel_count; ++c)
    CHECK(r.model.proto[c].oversub_extra_us == (c == proto::channel_of<proto::ll> ? 0.5 : 0.0));
  CHECK(r.machine.cpu == d.machine.cpu);
  CHECK(r.machine.cpus == d.machine.cpus);
  CHECK(r.machine.numa_nodes == d.machine.numa_nodes);
  CHECK(r.measured == d.measured);
  CHECK(r.source == d.source);
  // Written again, the same text.
  CHECK(tune::to_json(r) == text);
  // Through a file.
  const std::string path = temp_path("roundtrip");
  tune::save_profile(d, path);
  CHECK(tune::to_json(tune::load_profile(path)) == text);
  std::remove(path.c_str());
}

TEST_CASE("profile file: the text's layout", "[tune][profile]") {
  // An independent reading of the written text: the keys and values a person
  // (or another tool) sees.
  const tune::json::value v = tune::json::parse(tune::to_json(sample_doc()));
  CHECK(v.find("format")->str == "collx-profile");
  CHECK(v.find("version")->num == 4);
  CHECK(v.find("model")->find("multicast_gbps")->num == Approx(0.85 * 18 * 20.6));
  CHECK(v.find("model")->find("cache_bytes")->num == 50.0 * 1024 * 1024);
  CHECK(v.find("model")->find("mem_gbps")->num == 3.25);
  CHECK(v.find("model")->find("near_cache_bytes")->num == 2.0 * 1024 * 1024);
  CHECK(v.find("model")->find("near_gbps")->num == 11.5);
  const auto* model = v.find("model");
  REQUIRE(model != nullptr);
  CHECK(model->find("intra")->find("kind")->str == "nvlink");
  CHECK(model->find("intra")->find("gbps")->num == Approx(18 * 20.6));
  CHECK(model->find("protocols")->find("ll")->find("efficiency")->num == Approx(141.0 / 370.8));
  CHECK(model->find("protocols")->members.size() == std::size_t(proto::channel_count));
}

TEST_CASE("profile file: version 1 (no cache term) is read with the cache term off and a warning",
          "[tune][profile]") {
  // A version 1 file as that writer made it: no cache term, single-copy rate
  // or per-protocol oversubscribed step.
  tune::json::value v = tune::json::parse(tune::to_json(sample_doc()));
  for (auto& m : v.members)
    if (m.key == "version") m.num = 1;
  for (auto& m : v.members)
    if (m.key == "model")
      std::erase_if(m.members, [](const tune::json::value& x) {
        return x.key == "cache_bytes" || x.key == "mem_gbps" || x.key == "single_copy_gbps" ||
               x.key == "near_cache_bytes" || x.key == "near_gbps" || x.key == "call_us" ||
               x.key == "oversub_call_us" || x.key == "multicast_gbps";
      });
  for (auto& m : v.members)
    if (m.key == "model")
      for (auto& k : m.members)
        if (k.key == "protocols")
          for (auto& pr : k.members)
            std::erase_if(pr.members, [](const tune::json::value& x) { return x.key == "oversub_extra_us"; });
  const tune::profile_doc r = tune::from_json(v.dump(), "old.json");
  CHECK(r.model.cache_bytes == 0);
  CHECK(r.model.mem_gbps == 0);
  CHECK(r.model.single_copy_gbps == 0);
  CHECK(r.model.proto[proto::channel_of<proto::ll>].oversub_extra_us == 0);
  CHECK(r.model.intra.gbps == tune::h100_ib_ndr.intra.gbps);
  REQUIRE(r.warnings.size() == 1);
  CHECK_THAT(r.warnings[0], Contains("old.json") && Contains("version 1 has no cache term"));
  // The model then prices a call far beyond any cache at in-cache rates.
  CHECK(tune::miss_share(r.model, 1e12) == 0);
}

TEST_CASE("profile file: version 2 (no near-cache term) is read with that term off and a warning",
          "[tune][profile]") {
  tune::json::value v = tune::json::parse(tune::to_json(sample_doc()));
  for (auto& m : v.members)
    if (m.key == "version") m.num = 2;
  for (auto& m : v.members)
    if (m.key == "model")
      std::erase_if(m.members, [](const tune::json::value& x) {
        return x.key == "near_cache_bytes" || x.key == "near_gbps" || x.key == "call_us" ||
               x.key == "oversub_call_us" || x.key == "multicast_gbps";
      });
  const tune::profile_doc r = tune::from_json(v.dump(), "v2.json");
  CHECK(r.model.near_cache_bytes == 0);
  CHECK(r.model.near_gbps == 0);
  CHECK(r.model.call_us == 0);
  CHECK(r.model.oversub_call_us == 0);
  CHECK(r.model.multicast_gbps == 0);
  CHECK(r.model.mem_gbps == 3.25);  // the last-level term stays
  REQUIRE(r.warnings.size() == 1);
  CHECK_THAT(r.warnings[0], Contains("v2.json") && Contains("version 2 has no near-cache term"));
  CHECK(tune::near_miss_share(r.model, 1e12) == 0);
}

// Every version-3 writer measured CPU ranks, which have no multicast address:
// read as none, without a warning (nothing the model used is missing).
TEST_CASE("profile file: version 3 (no multicast rate) is read as having none", "[tune][profile]") {
  tune::json::value v = tune::json::parse(tune::to_json(sample_doc()));
  for (auto& m : v.members)
    if (m.key == "version") m.num = 3;
  for (auto& m : v.members)
    if (m.key == "model")
      std::erase_if(m.members, [](const tune::json::value& x) { return x.key == "multicast_gbps"; });
  const tune::profile_doc r = tune::from_json(v.dump(), "v3.json");
  CHECK(r.model.multicast_gbps == 0);
  CHECK(r.model.near_gbps == 11.5);
  CHECK(r.model.call_us == 0.125);
  CHECK(r.warnings.empty());
  // The same file calling itself version 4 lacks a key.
  for (auto& m : v.members)
    if (m.key == "version") m.num = 4;
  check_rejected(v.dump(), "missing key 'model.multicast_gbps'");
}

TEST_CASE("profile file: bad profiles are rejected naming the problem", "[tune][profile]") {
  // Corrupt and truncated text: line and column of the problem.
  const std::string good = tune::to_json(sample_doc());
  check_rejected(good.substr(0, good.size() / 2), "not valid JSON (corrupt or truncated?)");
  check_rejected(good.substr(0, good.size() / 2), "unexpected end of the text");
  check_rejected("{\"format\": \"collx-profile\",\n  \"version\": 3,,}", "line 2, column 16");
  check_rejected("", "not valid JSON");
  check_rejected("[1, 2]", "the profile must be a JSON object");
  check_rejected("{\"a\": 1, \"a\": 2}", "duplicate key 'a'");
  // Another format, another version.
  check_rejected(edited("\"collx-profile\"", "\"nccl-topo\""),
                 "'format' is 'nccl-topo', not 'collx-profile'");
  check_rejected(edited("\"version\": 4", "\"version\": 5"),
                 "version 5 is not one this collx reads (1 to 4)");
  check_rejected(edited("\"version\": 4", "\"version\": 5"), "written by a newer collx");
  check_rejected(edited("\"version\": 4", "\"version\": 0"), "version 0 is not one this collx reads");
  check_rejected(edited("\"version\": 4", "\"version\": 1.5"), "version 1.5");
  // Version 3 needs the near-cache term, version 2 the cache term; older
  // versions are read without them, with a warning.
  check_rejected(edited("\"near_gbps\"", "\"l2_gbps\""), "missing key 'model.near_gbps'");
  check_rejected(edited("\"near_cache_bytes\"", "\"l2_bytes\""), "missing key 'model.near_cache_bytes'");
  check_rejected(edited("\"oversub_call_us\"", "\"oversub_call\""), "missing key 'model.oversub_call_us'");
  check_rejected(edited("\"multicast_gbps\"", "\"nvls_gbps\""), "missing key 'model.multicast_gbps'");
  check_rejected(edited("\"mem_gbps\"", "\"memory_gbps\""), "missing key 'model.mem_gbps'");
  check_rejected(edited("\"cache_bytes\"", "\"cache\""), "missing key 'model.cache_bytes'");
  check_rejected(edited("\"single_copy_gbps\"", "\"cma_gbps\""), "missing key 'model.single_copy_gbps'");
  check_rejected(edited("\"oversub_extra_us\"", "\"oversub_us\""),
                 "missing key 'model.protocols.simple.oversub_extra_us'");
  // Partial: a key missing, at any depth, named with its path.
  check_rejected(edited("\"barrier_us\"", "\"barrier\""), "missing key 'model.barrier_us'");
  check_rejected(edited("\"ll128\"", "\"ll256\""), "missing key 'model.protocols.ll128'");
  check_rejected(edited("\"numa_nodes\"", "\"numa\""), "missing key 'machine.numa_nodes'");
  // Wrong types and values.
  check_rejected(edited("\"ranks_per_node\": 8", "\"ranks_per_node\": \"8\""),
                 "'model.ranks_per_node' must be a number, not a string");
  check_rejected(
      edited("\"kind\": \"nvlink\"", "\"kind\": \"carrier-pigeon\""),
      "'model.intra.kind' is 'carrier-pigeon', not a link kind (shm, nvlink, pcie, ib, roce, tcp)");
  check_rejected(edited("\"barrier_us\": 12.5", "\"barrier_us\": -1"),
                 "'model.barrier_us' must be a non-negative number");
  check_rejected(edited("\"peer_gbps\": ", "\"peer_gbps\": 0, \"x_gbps\": "),
                 "'model.peer_gbps' must be a positive number");
  check_rejected(edited("\"efficiency\": 1", "\"efficiency\": 1.5"), "at most 1");
  check_rejected(edited("\"ranks_per_node\": 8", "\"ranks_per_node\": 2.5"),
                 "'model.ranks_per_node' must be a whole number");
  check_rejected(edited("\"model\": {", "\"model\": 3, \"m\": {"), "'model' must be an object, not a number");
  // A missing file.
  CHECK_THROWS_WITH(tune::load_profile("/nonexistent/collx.json"),
                    Contains("profile /nonexistent/collx.json: cannot read it"));
}

TEST_CASE("profile file: unknown keys are warnings, not errors", "[tune][profile]") {
  const tune::profile_doc d =
      tune::from_json(edited("\"barrier_us\"", "\"future_term\": 3, \"barrier_us\""), "P.json");
  REQUIRE(d.warnings.size() == 1);
  CHECK_THAT(d.warnings[0], Contains("profile P.json: unknown key 'model.future_term' ignored"));
  CHECK(d.model.barrier_us == tune::h100_ib_ndr.barrier_us);
  // The probe's evidence is a known, unread member.
  CHECK(tune::from_json(edited("\"model\": {", "\"probe\": {\"x\": [1]}, \"model\": {"), "P.json")
            .warnings.empty());
}

TEST_CASE("active profile: the setting, the machine check, the presets", "[tune][profile]") {
  const tune::machine_info here = tune::this_machine();
  // A profile of this machine is taken as it is.
  const std::string path = temp_path("active");
  tune::profile_doc d = sample_doc();
  tune::save_profile(d, path);
  const tune::active_profile a = tune::resolve_profile(path, tune::shm_host, "shm_host", here);
  CHECK(a.model.peer_gbps == tune::h100_ib_ndr.peer_gbps);
  CHECK_THAT(a.origin, Contains("file " + path) && Contains("2026-12-01T17:00:00Z"));
  // Another topology is refused, with what both are and how to go on.
  tune::machine_info other = here;
  other.cpus = here.cpus + 62;
  CHECK_THROWS_WITH(tune::resolve_profile(path, tune::shm_host, "shm_host", other),
                    Contains("profile " + path + " was measured on another machine") &&
                        Contains(std::to_string(here.cpus + 62) + " CPUs") &&
                        Contains("collx-probe --save") && Contains("COLLX_TUNE_FILE=builtin"));
  other = here;
  other.cpu = "Imaginary CPU 9000";
  CHECK_THROWS_WITH(tune::resolve_profile(path, tune::shm_host, "shm_host", other),
                    Contains("Imaginary CPU 9000"));
  // The host name alone does not matter.
  other = here;
  other.hostname = "elsewhere";
  CHECK_NOTHROW(tune::resolve_profile(path, tune::shm_host, "shm_host", other));
  std::remove(path.c_str());
  // builtin and presets.
  CHECK(tune::resolve_profile("builtin", tune::shm_host, "shm_host", here).model.intra.gbps ==
        tune::shm_host.intra.gbps);
  CHECK(tune::resolve_profile("preset:a100_nvswitch", tune::shm_host, "shm_host", here).model.intra.gbps ==
        tune::a100_nvswitch.intra.gbps);
  CHECK_THROWS_WITH(tune::resolve_profile("preset:tpu", tune::shm_host, "shm_host", here),
                    Contains("no preset named 'tpu'") && Contains("h100_nvswitch"));
  CHECK_THROWS_WITH(tune::resolve_profile("/nonexistent/p.json", tune::shm_host, "shm_host", here),
                    Contains("cannot read it"));
}

TEST_CASE("active profile: the communicator's automatic choice follows the loaded profile",
          "[tune][profile]") {
  // Two profiles that differ only in copy bandwidth flip a 16 MiB all_reduce
  // on 2 thread ranks, which load each other's buffers (priced at copy
  // bandwidth), between nvls (the built-in shm profile) and a FIFO algorithm
  // (copies ten times slower).
  tune::profile_doc slow = sample_doc();
  slow.model = tune::shm_host;
  slow.model.copy_gbps = tune::shm_host.copy_gbps / 10;
  const std::string path = temp_path("choice");
  tune::save_profile(slow, path);
  auto run = [](const std::string& setting) {
    comm_options o;
    o.tune_file = setting;
    auto comms = communicator::create_thread_group(2, o);
    const std::size_t n = std::size_t{4} << 20;
    std::vector<variant_choice> seen(2);
    std::vector<float> last(2);
    std::vector<std::thread> ranks;
    for (int r = 0; r < 2; ++r)
      ranks.emplace_back([&, r] {  // no Catch2 assertion here: it is not thread-safe
        std::vector<float> x(n, float(r + 1)), y(n);
        comms[r].all_reduce(x.data(), y.data(), n, reduce_op::sum);
        last[r] = y[n - 1];
        seen[r] = comms[r].last_variant();
      });
    for (auto& t : ranks) t.join();
    CHECK(last[0] == 3.0f);
    CHECK(last[1] == 3.0f);
    CHECK(seen[0] == seen[1]);
    return seen[0];
  };
  // Independent reference: the constexpr choice over the same numbers.
  tune::problem q{coll::all_reduce, 2, double(16 << 20), true, false};
  q.mapped_peers = true;  // thread ranks
  CHECK(tune::fastest<transport::shm>(slow.model, q).algo != algo_id::nvls);
  CHECK(tune::fastest<transport::shm>(tune::shm_host, q).algo == algo_id::nvls);
  CHECK(run(path).algo != algo_id::nvls);
  CHECK(run("builtin").algo == algo_id::nvls);
  // A bad profile fails the call before any byte moves and names the file;
  // the communicator stays usable with an explicit variant.
  const std::string bad = temp_path("bad");
  write_file(bad, "{\"format\": \"collx-profile\", \"version\": 1");
  comm_options o;
  o.tune_file = bad;
  auto comms = communicator::create_thread_group(1, o);
  std::vector<float> x(1024, 1.0f), y(1024);
  CHECK_THROWS_WITH(comms[0].all_reduce(x.data(), y.data(), x.size(), reduce_op::sum),
                    Contains("profile " + bad + ": not valid JSON"));
  CHECK_NOTHROW(
      comms[0].all_reduce(x.data(), y.data(), x.size(), reduce_op::sum, {algo_id::ring, proto_id::simple}));
  CHECK(y[0] == 1.0f);
  std::remove(path.c_str());
  std::remove(bad.c_str());
}

TEST_CASE("all_gather in place: the choice prices it, and ranks that differ in it are told why",
          "[tune][profile][mismatch]") {
  // Copies (thread ranks load peers' blocks at copy bandwidth) just fast
  // enough that single copy (nvls) is the fastest all_gather only where it
  // has no own block to copy, in place.
  tune::profile_doc d = sample_doc();
  d.model = tune::shm_host;
  d.model.copy_gbps = 10;
  const std::string path = temp_path("in_place");
  tune::save_profile(d, path);
  const std::size_t n = std::size_t{1} << 20;  // floats per rank
  tune::problem q{coll::all_gather, 2, double(2 * n * sizeof(float)), true, false};
  q.mapped_peers = true;  // thread ranks
  q.in_place = true;
  REQUIRE(tune::fastest<transport::shm>(d.model, q).algo == algo_id::nvls);
  q.in_place = false;
  REQUIRE(tune::fastest<transport::shm>(d.model, q).algo != algo_id::nvls);
  // in_place[r]: rank r passes its block of recv as send.
  auto run = [&](std::vector<bool> in_place) {
    comm_options o;
    o.tune_file = path;
    o.timeout = std::chrono::milliseconds(20000);
    auto comms = communicator::create_thread_group(2, o);
    std::vector<variant_choice> seen(2);
    std::vector<int> wrong(2, 0);
    std::vector<std::string> err(2);
    std::vector<status> code(2, status::ok);
    std::vector<std::thread> ranks;
    for (int r = 0; r < 2; ++r)
      ranks.emplace_back([&, r] {                      // no Catch2 assertion here: it is not thread-safe
        std::vector<float> x(n), y(2 * n + 1, -1.0f);  // y[2n]: a guard
        for (std::size_t i = 0; i < n; ++i) x[i] = float(r * 7 + int(i % 5));
        float* mine = y.data() + std::size_t(r) * n;
        if (in_place[std::size_t(r)]) std::copy(x.begin(), x.end(), mine);
        try {
          comms[r].all_gather(in_place[std::size_t(r)] ? mine : x.data(), y.data(), n);
          seen[std::size_t(r)] = comms[r].last_variant();
          for (int q2 = 0; q2 < 2; ++q2)
            for (std::size_t i = 0; i < n; ++i)
              wrong[std::size_t(r)] += y[std::size_t(q2) * n + i] != float(q2 * 7 + int(i % 5));
          wrong[std::size_t(r)] += y[2 * n] != -1.0f;
        } catch (const collx::error& e) {
          code[std::size_t(r)] = e.code();
          err[std::size_t(r)] = e.what();
        }
      });
    for (auto& t : ranks) t.join();
    return std::tuple{seen, wrong, err, code};
  };
  {
    auto [seen, wrong, err, code] = run({true, true});
    for (int r = 0; r < 2; ++r) {
      INFO("rank " << r << ": " << err[std::size_t(r)]);
      CHECK(code[std::size_t(r)] == status::ok);
      CHECK(wrong[std::size_t(r)] == 0);
      CHECK(seen[std::size_t(r)].algo == algo_id::nvls);
    }
  }
  {
    auto [seen, wrong, err, code] = run({false, false});
    for (int r = 0; r < 2; ++r) {
      INFO("rank " << r << ": " << err[std::size_t(r)]);
      CHECK(code[std::size_t(r)] == status::ok);
      CHECK(wrong[std::size_t(r)] == 0);
      CHECK(seen[std::size_t(r)].algo != algo_id::nvls);
    }
  }
  {
    // One rank in place: the choices differ; both ranks fail with a mismatch
    // (no hang), and the rank that found it says why.
    auto [seen, wrong, err, code] = run({true, false});
    INFO("rank 0: " << err[0] << "\nrank 1: " << err[1]);
    CHECK(code[0] == status::mismatch);
    CHECK(code[1] == status::mismatch);
    CHECK((err[0] + err[1]).find("in place on every rank or on none") != std::string::npos);
  }
  std::remove(path.c_str());
}

TEST_CASE("active profile: COLLX_TUNE_FILE, then the default location, then the preset", "[tune][profile]") {
  const tune::machine_info here = tune::this_machine();
  const char* old_env = std::getenv("COLLX_TUNE_FILE");
  const std::string saved_env = old_env != nullptr ? old_env : "";
  const char* old_xdg = std::getenv("XDG_CONFIG_HOME");
  const std::string saved_xdg = old_xdg != nullptr ? old_xdg : "";
  // An empty config folder: no file at the default location, the preset.
  const std::string xdg = "/tmp/collx_test_xdg_" + std::to_string(::getpid());
  ::mkdir(xdg.c_str(), 0755);
  ::unsetenv("COLLX_TUNE_FILE");
  ::setenv("XDG_CONFIG_HOME", xdg.c_str(), 1);
  CHECK(tune::default_profile_path() == xdg + "/collx/profile.json");
  tune::active_profile a = tune::resolve_profile("", tune::shm_host, "shm_host", here);
  CHECK(a.model.intra.gbps == tune::shm_host.intra.gbps);
  CHECK_THAT(a.origin, Contains("built-in preset shm_host") && Contains("no profile at " + xdg));
  // A profile there is taken.
  ::mkdir((xdg + "/collx").c_str(), 0755);
  tune::profile_doc d = sample_doc();
  tune::save_profile(d, xdg + "/collx/profile.json");
  a = tune::resolve_profile("", tune::shm_host, "shm_host", here);
  CHECK(a.model.intra.gbps == tune::h100_ib_ndr.intra.gbps);
  CHECK_THAT(a.origin, Contains("file " + xdg + "/collx/profile.json"));
  // COLLX_TUNE_FILE wins over it, and the options' setting over both.
  ::setenv("COLLX_TUNE_FILE", "preset:pcie_gen4_8gpu", 1);
  CHECK(tune::resolve_profile("", tune::shm_host, "shm_host", here).model.intra.gbps ==
        tune::pcie_gen4_8gpu.intra.gbps);
  CHECK(tune::resolve_profile("builtin", tune::shm_host, "shm_host", here).model.intra.gbps ==
        tune::shm_host.intra.gbps);
  // comm_options::from_env carries it, and refuses an empty one.
  CHECK(comm_options::from_env().tune_file == "preset:pcie_gen4_8gpu");
  ::setenv("COLLX_TUNE_FILE", "", 1);
  CHECK_THROWS_WITH(comm_options::from_env(), Contains("COLLX_TUNE_FILE"));
  // A foreign profile at the default location is refused too, saying where it is.
  ::unsetenv("COLLX_TUNE_FILE");
  tune::machine_info other = here;
  other.numa_nodes = here.numa_nodes + 3;
  CHECK_THROWS_WITH(tune::resolve_profile("", tune::shm_host, "shm_host", other),
                    Contains("the file is at the default location"));
  std::remove((xdg + "/collx/profile.json").c_str());
  ::rmdir((xdg + "/collx").c_str());
  ::rmdir(xdg.c_str());
  if (old_env != nullptr) ::setenv("COLLX_TUNE_FILE", saved_env.c_str(), 1);
  else ::unsetenv("COLLX_TUNE_FILE");
  if (old_xdg != nullptr) ::setenv("XDG_CONFIG_HOME", saved_xdg.c_str(), 1);
  else ::unsetenv("XDG_CONFIG_HOME");
}

}  // namespace profile_file_test
