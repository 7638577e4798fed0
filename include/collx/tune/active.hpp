// collx/tune/active.hpp — the profile the automatic choice uses at run time.
//
// The compile-time choice takes a preset (tune::best<…, tune::shm_host, …>);
// the run-time choice (comm/dispatch.hpp) calls the same constexpr
// tune::fastest with the profile found here, in this order:
//
//   1. the communicator's comm_options::tune_file, else COLLX_TUNE_FILE:
//        a path          a profile collx-probe --save wrote (must exist)
//        builtin         the transport's built-in preset
//        preset:NAME     a preset of tune/presets.hpp (collx-explain lists them)
//   2. the default location, if that file exists:
//        $XDG_CONFIG_HOME/collx/profile.json, else $HOME/.config/collx/profile.json
//        (where `collx-probe --save` writes when given no file)
//   3. the transport's built-in preset.
//
// A file that cannot be read or parsed, is partial, has another format or a
// newer version (tune/profile_file.hpp), or was measured on another topology
// (tune/machine_id.hpp: CPU model, CPU count, NUMA nodes) fails the call with
// collx::error (invalid_argument) naming the file and the problem and saying
// how to proceed; it is never used silently. Unknown keys are printed once as
// warnings on stderr. COLLX_DEBUG=1 prints which profile was taken, once.
//
// A profile is loaded once per process and setting, then shared (immutable).
#pragma once

#include <collx/config.hpp>
#include <collx/detail/debug.hpp>
#include <collx/error.hpp>
#include <collx/tune/machine_id.hpp>
#include <collx/tune/model.hpp>
#include <collx/tune/presets.hpp>
#include <collx/tune/profile_file.hpp>

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

namespace collx::tune {

/// The built-in preset for a transport: the compile-time default of the
/// choice and the run-time one when no profile is found. Only the shm
/// transport has been measured (tune::shm_host); the others use it too until
/// a specialization here gives them their own (a loaded profile likewise
/// describes the shm transport the probe measured).
template <class Transport>
inline constexpr const profile& preset_for = shm_host;

/// A profile in use and where it came from.
struct active_profile {
  profile model{};
  std::string origin;  // "file PATH (measured on …)", "built-in preset NAME", …
};

/// The default location of this machine's profile ("" when neither
/// XDG_CONFIG_HOME nor HOME is set).
COLLX_COLD inline std::string default_profile_path() {
  const char* xdg = std::getenv("XDG_CONFIG_HOME");
  if (xdg != nullptr && *xdg != '\0') return std::string(xdg) + "/collx/profile.json";
  const char* home = std::getenv("HOME");
  if (home != nullptr && *home != '\0') return std::string(home) + "/.config/collx/profile.json";
  return {};
}

/// The preset named `n` (tune/presets.hpp); where there is none, throws
/// collx::error (invalid_argument) saying `what` asked for it and listing
/// the presets.
COLLX_COLD inline const profile& preset_or_throw(const std::string& n, const std::string& what) {
  const profile* p = find_preset(n.c_str());
  if (p == nullptr) {
    std::string names;
    for (const named_preset& x : presets) names += std::string(names.empty() ? "" : ", ") + x.name;
    throw_error(status::invalid_argument, what + ": no preset named '" + n + "' (presets: " + names + ")");
  }
  return *p;
}

/// Resolves `setting` (comm_options::tune_file; empty: COLLX_TUNE_FILE, then
/// the default location) to a profile without caching; `builtin` and
/// `builtin_name` are the transport's preset. Throws collx::error as above.
COLLX_COLD inline active_profile resolve_profile(std::string setting, const profile& builtin,
                                                 const char* builtin_name, const machine_info& here) {
  bool from_default = false;
  if (setting.empty()) {
    if (const char* v = std::getenv("COLLX_TUNE_FILE"); v != nullptr && *v != '\0') setting = v;
  }
  if (setting.empty()) {
    const std::string path = default_profile_path();
    struct stat st {};
    if (path.empty() || ::stat(path.c_str(), &st) != 0)
      return {builtin, std::string("built-in preset ") + builtin_name + " (no profile at " +
                           (path.empty() ? std::string("the default location: HOME unset") : path) + ")"};
    setting = path;
    from_default = true;
  }
  if (setting == "builtin")
    return {builtin, std::string("built-in preset ") + builtin_name + " (COLLX_TUNE_FILE=builtin)"};
  if (setting.rfind("preset:", 0) == 0) {
    const std::string n = setting.substr(7);
    return {preset_or_throw(n, "tuner profile '" + setting + "'"), "preset " + n};
  }
  profile_doc d = load_profile(setting);
  if (!d.machine.same_topology(here))
    throw_error(status::invalid_argument,
                "profile " + setting + " was measured on another machine (" + d.machine.topology() +
                    (d.machine.hostname.empty() ? "" : ", host " + d.machine.hostname) + "); this one is " +
                    here.topology() + ". Measure this machine with `collx-probe --save " + setting +
                    "`, or set COLLX_TUNE_FILE=builtin" +
                    (from_default ? " (the file is at the default location)" : ""));
  for (const std::string& w : d.warnings) std::fprintf(stderr, "collx: warning: %s\n", w.c_str());
  return {d.model, "file " + setting + " (measured " +
                       (d.measured.empty() ? std::string("at an unrecorded time") : d.measured) + " on " +
                       d.machine.topology() + ")"};
}

namespace active_detail {
/// One loaded profile; the list only grows and its nodes live as long as
/// the process, so references handed out stay valid.
struct loaded_profile {
  std::string key;
  active_profile profile;
  const loaded_profile* next = nullptr;
};
inline std::mutex& loaded_mutex() {
  static std::mutex mu;
  return mu;
}
inline const loaded_profile*& loaded_head() {
  static const loaded_profile* head = nullptr;
  return head;
}
COLLX_COLD inline const loaded_profile* load(std::string key, const std::string& setting,
                                             const profile& builtin, const char* builtin_name) {
  auto* p = new loaded_profile{
      std::move(key), resolve_profile(setting, builtin, builtin_name, this_machine()), loaded_head()};
  if (collx::detail::debug_enabled())
    std::fprintf(stderr, "collx: tuner profile: %s\n", p->profile.origin.c_str());
  loaded_head() = p;
  return p;
}
}  // namespace active_detail

/// The profile for `setting`, loaded once per process and setting and kept
/// for its lifetime; prints it once when COLLX_DEBUG is set (not "0").
inline const active_profile& profile_for(const std::string& setting, const profile& builtin,
                                         const char* builtin_name = "shm_host") {
  std::string key = setting;
  if (key.empty())
    if (const char* v = std::getenv("COLLX_TUNE_FILE"); v != nullptr) key = v;
  key += '\n';
  key += builtin_name;
  const std::lock_guard<std::mutex> lock(active_detail::loaded_mutex());
  for (const active_detail::loaded_profile* p = active_detail::loaded_head(); p != nullptr; p = p->next)
    if (p->key == key) return p->profile;
  return active_detail::load(std::move(key), setting, builtin, builtin_name)->profile;
}

}  // namespace collx::tune
