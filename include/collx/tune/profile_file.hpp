// collx/tune/profile_file.hpp — a model profile (tune/model.hpp) as a
// versioned JSON file: what collx-probe --save writes and communicators load
// (tune/active.hpp).
//
//   {
//     "format": "collx-profile", "version": 4,
//     "machine": {"hostname": "...", "cpu": "AMD EPYC", "cpus": 2, "numa_nodes": 1},
//     "measured": "2026-12-01T17:00:00Z",      (optional, free text)
//     "source": "collx-probe ...",             (optional, free text)
//     "model": {
//       "intra": {"kind": "shm", "alpha_us": 0.65, "gbps": 7.0},
//       "inter": {"kind": "tcp", "alpha_us": 0, "gbps": 0},
//       "ranks_per_node": 0,
//       "protocols": {"simple": {"extra_alpha_us": 0.15, "efficiency": 1,
//                                "oversub_extra_us": 2.0},        (version 2)
//                     "ll": {...}, "ll128": {...}},      (every compiled protocol)
//       "barrier_us": 0.5, "peer_gbps": 2.5, "copy_gbps": 25,
//       "single_copy_gbps": 3.5,                                  (version 2)
//       "reduce_gbps": 19.6, "oversub_step_us": 12,
//       "cache_bytes": 33554432, "mem_gbps": 3.1      (version 2; 0: no cache term)
//       "near_cache_bytes": 2097152, "near_gbps": 9.0 (version 3; 0: no near-cache term)
//       "call_us": 0.1, "oversub_call_us": 3.0         (version 3)
//       "multicast_gbps": 0                (version 4; 0: no multicast address)
//     },
//     "probe": {...}                            (optional: the probe's evidence, not read)
//   }
//
// Reading is strict where a mistake would mislead the tuner and lenient where
// it would not: a syntax error (with line and column), another format or a
// newer version, a missing key, a value of the wrong type, a negative or
// non-finite number, an unknown link kind or protocol each throw collx::error
// (invalid_argument) naming the file and the key; an unknown key is collected
// as a warning (a newer writer's addition) and otherwise ignored. Whether the
// profile belongs to this machine is tune/active.hpp's check. Older versions
// are still read, with what they lack off and a warning saying so: version 1
// (before the cache term, the per-protocol oversubscribed step and the
// single-copy rate), version 2 (before the near-cache term and the per-call
// costs; its rates were fitted without the pipeline's fill term, so they
// describe a machine a little slower than it is), version 3 (before the
// multicast rate: read as none, which every version-3 writer measured).
#pragma once

#include <collx/config.hpp>
#include <collx/error.hpp>
#include <collx/proto/list.hpp>
#include <collx/tune/json.hpp>
#include <collx/tune/machine_id.hpp>
#include <collx/tune/model.hpp>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace collx::tune {

inline constexpr const char* profile_format = "collx-profile";
inline constexpr int profile_version = 4;
inline constexpr int profile_oldest_version = 1;  // the oldest still read

/// A profile with what it says about itself.
struct profile_doc {
  profile model{};
  machine_info machine;
  std::string measured;               // when (free text, ISO 8601 by convention)
  std::string source;                 // how (free text)
  json::value probe;                  // the probe's evidence (optional; written, not read)
  std::vector<std::string> warnings;  // unknown keys met while reading
};

namespace profile_detail {

COLLX_COLD inline json::value link_json(const link& l) {
  json::value v = json::value::object();
  v.set("kind", name(l.kind));
  v.set("alpha_us", l.alpha_us);
  v.set("gbps", l.gbps);
  return v;
}

// Reads one JSON object's members by name, reporting problems with the
// key's full path; unknown keys become warnings once every expected key was
// asked for (finish()).
class reader {
 public:
  COLLX_COLD reader(const json::value& v, std::string path, const std::string& origin,
                    std::vector<std::string>& warnings)
      : v_(v), path_(std::move(path)), origin_(origin), warnings_(warnings) {
    if (v.type != json::kind::object)
      fail(path_.empty() ? "the profile must be a JSON object"
                         : "'" + path_ + "' must be an object, not " + json::name(v.type));
  }
  [[noreturn]] COLLX_COLD void fail(const std::string& what) const {
    throw_error(status::invalid_argument, "profile " + origin_ + ": " + what);
  }
  COLLX_COLD std::string key(const std::string& k) const { return path_.empty() ? k : path_ + "." + k; }
  COLLX_COLD const json::value* optional(const std::string& k, json::kind t) {
    seen_.push_back(k);
    const json::value* x = v_.find(k);
    if (x != nullptr && x->type != t)
      fail("'" + key(k) + "' must be " + json::name(t) + ", not " + json::name(x->type));
    return x;
  }
  COLLX_COLD const json::value& required(const std::string& k, json::kind t) {
    const json::value* x = optional(k, t);
    if (x == nullptr) fail("missing key '" + key(k) + "' (a partial or truncated profile?)");
    return *x;
  }
  COLLX_COLD double number(const std::string& k, bool may_be_zero = true) {
    const double d = required(k, json::kind::number).num;
    if (!std::isfinite(d) || d < 0 || (!may_be_zero && d == 0))
      fail("'" + key(k) + "' must be a " + (may_be_zero ? "non-negative" : "positive") + " number, got " +
           std::to_string(d));
    return d;
  }
  COLLX_COLD int integer(const std::string& k, bool may_be_zero = true) {
    const double d = number(k, may_be_zero);
    if (d != std::floor(d) || d > 1e6)
      fail("'" + key(k) + "' must be a whole number, got " + std::to_string(d));
    return int(d);
  }
  COLLX_COLD std::string text(const std::string& k, bool required_key = true) {
    const json::value* x = required_key ? &required(k, json::kind::string) : optional(k, json::kind::string);
    return x != nullptr ? x->str : std::string();
  }
  COLLX_COLD reader child(const std::string& k) {
    return reader(required(k, json::kind::object), key(k), origin_, warnings_);
  }
  COLLX_COLD void finish() const {
    for (const json::value& m : v_.members) {
      bool known = false;
      for (const std::string& s : seen_) known = known || s == m.key;
      if (!known) warnings_.push_back("profile " + origin_ + ": unknown key '" + key(m.key) + "' ignored");
    }
  }

 private:
  const json::value& v_;
  std::string path_;
  const std::string& origin_;
  std::vector<std::string>& warnings_;
  std::vector<std::string> seen_;
};

COLLX_COLD inline link read_link(reader r) {
  link l;
  const std::string k = r.text("kind");
  bool found = false;
  for (int i = 0; i < int(std::size(link_kind_names)); ++i)
    if (k == link_kind_names[i]) l.kind = static_cast<link_kind>(i), found = true;
  if (!found) {
    std::string msg = "'";  // appended piecewise: g++ 12 warns (-Wrestrict) on "'" + std::string
    msg += r.key("kind") + "' is '" + k + "', not a link kind (";
    for (const char* n : link_kind_names)
      msg += std::string(n) + (n == link_kind_names[std::size(link_kind_names) - 1] ? ")" : ", ");
    r.fail(msg);
  }
  l.alpha_us = r.number("alpha_us");
  l.gbps = r.number("gbps");
  r.finish();
  return l;
}

}  // namespace profile_detail

/// The profile as JSON text (format above).
COLLX_COLD inline std::string to_json(const profile_doc& d) {
  json::value v = json::value::object();
  v.set("format", profile_format);
  v.set("version", profile_version);
  json::value& m = v.set("machine", json::value::object());
  m.set("hostname", d.machine.hostname);
  m.set("cpu", d.machine.cpu);
  m.set("cpus", d.machine.cpus);
  m.set("numa_nodes", d.machine.numa_nodes);
  if (!d.measured.empty()) v.set("measured", d.measured);
  if (!d.source.empty()) v.set("source", d.source);
  json::value& model = v.set("model", json::value::object());
  model.set("intra", profile_detail::link_json(d.model.intra));
  model.set("inter", profile_detail::link_json(d.model.inter));
  model.set("ranks_per_node", d.model.ranks_per_node);
  json::value& protos = model.set("protocols", json::value::object());
  for (int c = 0; c < proto::channel_count; ++c) {
    json::value& p = protos.set(proto::channel_names[static_cast<std::size_t>(c)], json::value::object());
    p.set("extra_alpha_us", d.model.proto[c].extra_alpha_us);
    p.set("efficiency", d.model.proto[c].efficiency);
    p.set("oversub_extra_us", d.model.proto[c].oversub_extra_us);
  }
  model.set("barrier_us", d.model.barrier_us);
  model.set("peer_gbps", d.model.peer_gbps);
  model.set("single_copy_gbps", d.model.single_copy_gbps);
  model.set("copy_gbps", d.model.copy_gbps);
  model.set("reduce_gbps", d.model.reduce_gbps);
  model.set("oversub_step_us", d.model.oversub_step_us);
  model.set("cache_bytes", d.model.cache_bytes);
  model.set("mem_gbps", d.model.mem_gbps);
  model.set("near_cache_bytes", d.model.near_cache_bytes);
  model.set("near_gbps", d.model.near_gbps);
  model.set("call_us", d.model.call_us);
  model.set("oversub_call_us", d.model.oversub_call_us);
  model.set("multicast_gbps", d.model.multicast_gbps);
  if (d.probe.type != json::kind::null) v.set("probe", d.probe);
  return v.dump();
}

/// Reads a profile from JSON text; `origin` names it in messages (a path).
/// Throws collx::error (invalid_argument) naming the problem.
COLLX_COLD inline profile_doc from_json(const std::string& text, const std::string& origin) {
  json::value v;
  try {
    v = json::parse(text);
  } catch (const json::parse_error& e) {
    throw_error(status::invalid_argument,
                "profile " + origin + ": not valid JSON (corrupt or truncated?): " + e.what());
  }
  profile_doc d;
  // The probe's evidence is kept as it is: moved out (not copied), leaving an
  // empty object for the reader to accept.
  if (v.type == json::kind::object)
    for (json::value& m : v.members)
      if (m.key == "probe" && m.type == json::kind::object) {
        d.probe = std::move(m);
        d.probe.key.clear();
        m = json::value::object();
        m.key = "probe";
      }
  profile_detail::reader r(v, "", origin, d.warnings);
  if (const std::string f = r.text("format"); f != profile_format)
    r.fail("'format' is '" + f + "', not '" + profile_format + "'");
  const double ver = r.number("version");
  if (ver != std::floor(ver) || ver < profile_oldest_version || ver > profile_version) {
    char shown[32];
    std::snprintf(shown, sizeof shown, "%g", ver);
    r.fail(std::string("version ") + shown + " is not one this collx reads (" +
           std::to_string(profile_oldest_version) + " to " + std::to_string(profile_version) + ")" +
           (ver > profile_version ? "; it was written by a newer collx" : ""));
  }
  {
    profile_detail::reader m = r.child("machine");
    d.machine.hostname = m.text("hostname", false);
    d.machine.cpu = m.text("cpu");
    d.machine.cpus = m.integer("cpus", false);
    d.machine.numa_nodes = m.integer("numa_nodes");
    m.finish();
  }
  d.measured = r.text("measured", false);
  d.source = r.text("source", false);
  r.optional("probe", json::kind::object);  // read above
  profile_detail::reader m = r.child("model");
  d.model.intra = profile_detail::read_link(m.child("intra"));
  d.model.inter = profile_detail::read_link(m.child("inter"));
  d.model.ranks_per_node = m.integer("ranks_per_node");
  {
    profile_detail::reader ps = m.child("protocols");
    for (int c = 0; c < proto::channel_count; ++c) {
      profile_detail::reader p = ps.child(proto::channel_names[static_cast<std::size_t>(c)]);
      d.model.proto[c].extra_alpha_us = p.number("extra_alpha_us");
      d.model.proto[c].efficiency = p.number("efficiency");
      if (d.model.proto[c].efficiency > 1)
        p.fail("'" + p.key("efficiency") + "' is a share of the link's bandwidth, at most 1, got " +
               std::to_string(d.model.proto[c].efficiency));
      if (ver >= 2) d.model.proto[c].oversub_extra_us = p.number("oversub_extra_us");
      p.finish();
    }
    ps.finish();
  }
  d.model.barrier_us = m.number("barrier_us");
  d.model.peer_gbps = m.number("peer_gbps", false);
  d.model.copy_gbps = m.number("copy_gbps", false);
  d.model.reduce_gbps = m.number("reduce_gbps", false);
  d.model.oversub_step_us = m.number("oversub_step_us");
  if (ver >= 2) {
    d.model.single_copy_gbps = m.number("single_copy_gbps");
    d.model.cache_bytes = m.number("cache_bytes");
    d.model.mem_gbps = m.number("mem_gbps");
  } else {
    d.warnings.push_back("profile " + origin +
                         ": version 1 has no cache term, single-copy rate or per-protocol oversubscribed "
                         "step; the model prices every size at in-cache rates (collx-probe --save writes "
                         "version 4)");
  }
  if (ver >= 3) {
    d.model.near_cache_bytes = m.number("near_cache_bytes");
    d.model.near_gbps = m.number("near_gbps");
    d.model.call_us = m.number("call_us");
    d.model.oversub_call_us = m.number("oversub_call_us");
  } else if (ver == 2) {
    d.warnings.push_back("profile " + origin +
                         ": version 2 has no near-cache term or per-call cost; the model prices every size "
                         "below the last-level cache at one rate (collx-probe --save writes version 4)");
  }
  if (ver >= 4) d.model.multicast_gbps = m.number("multicast_gbps");
  if (!(d.model.intra.gbps > 0)) m.fail("'model.intra.gbps' must be positive");
  m.finish();
  r.finish();
  return d;
}

/// Reads the profile file at `path` (from_json's errors, or one naming the
/// file when it cannot be read).
COLLX_COLD inline profile_doc load_profile(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr)
    throw_error(status::invalid_argument, "profile " + path + ": cannot read it: " + std::strerror(errno));
  std::string text;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (failed)
    throw_error(status::invalid_argument, "profile " + path + ": cannot read it: " + std::strerror(err));
  return from_json(text, path);
}

/// Writes `d` to `path` (via a temporary file, so a reader never sees half of it).
COLLX_COLD inline void save_profile(const profile_doc& d, const std::string& path) {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr)
    throw_error(status::system_error, "profile " + path + ": cannot write it: " + std::strerror(errno));
  const std::string text = to_json(d);
  const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !written) {
    std::remove(tmp.c_str());
    throw_error(status::system_error, "profile " + path + ": write failed");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw_error(status::system_error,
                "profile " + path + ": cannot rename " + tmp + ": " + std::strerror(errno));
}

}  // namespace collx::tune
