// collx/bootstrap/env.hpp — find rank, size and rendezvous from the launcher.
//
// What: detect_launch_env() reads the variables of the launcher that started
// this process, in this priority order:
//   collx    COLLX_RANK, COLLX_SIZE, COLLX_LOCAL_RANK, COLLX_LOCAL_SIZE,
//            COLLX_UNIQUE_ID (set by collxrun / collx::launch::run_local)
//   torchrun RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE (detected by
//            WORLD_SIZE; RANK alone is too common a name to trust)
//   openmpi  OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE
//   pmi      PMI_RANK, PMI_SIZE (+ MPI_LOCALRANKID, MPI_LOCALNRANKS: Hydra)
//   slurm    SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID
//            (+ SLURM_NTASKS_PER_NODE when it is a plain number)
// local_rank / local_size are -1 when the launcher does not say.
//
// Without a unique id, the root address is COLLX_ROOT_ADDR ("host:port"),
// else MASTER_ADDR with port MASTER_PORT + 1: torchrun's own TCPStore already
// listens on MASTER_PORT itself, so collx takes the next port. Rank 0 starts
// the root service there (connect_from_env).
//
// The secret is COLLX_SECRET (32 hex digits) when set. Otherwise it is
// derived from what every rank sees (launcher, size, root address, job ids
// such as SLURM_JOB_ID or TORCHELASTIC_RUN_ID). That derived secret is WEAK:
// anyone who can read the job's environment or guess those values can join.
// It only keeps two jobs that share a port from joining each other; set
// COLLX_SECRET (or use a unique id) where other users share the network.
//
// Errors: collx::error(invalid_argument) naming the variable for malformed
// values (non-numeric, negative, rank >= size, size <= 0, a bad address or
// secret, a missing partner variable).
// Thread-safety: reads the process environment; do not run concurrently
// with setenv/unsetenv.
#pragma once

#include <collx/bootstrap/root.hpp>
#include <collx/bootstrap/session.hpp>
#include <collx/bootstrap/socket.hpp>
#include <collx/bootstrap/unique_id.hpp>
#include <collx/error.hpp>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace collx::bootstrap {

struct launch_env {
  int rank = 0;
  int size = 1;
  int local_rank = -1;  // -1: unknown
  int local_size = -1;  // -1: unknown
  std::string source;   // "collx", "torchrun", "openmpi", "pmi", "slurm"
  std::optional<unique_id> id;
  std::string root_address;  // when there is no id; empty if none was given
  std::uint16_t root_port = 0;
  secret_bytes secret{};
  bool secret_derived = false;  // true: see the warning above
};

/// Looks up one variable; nullptr when unset.
using env_lookup = std::function<const char*(const char*)>;

namespace detail {

inline int env_int(const env_lookup& get, const char* name, int min_value) {
  const char* v = get(name);
  std::string_view s = v ? v : "";
  int out = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (s.empty() || ec != std::errc{} || p != s.data() + s.size() || out < min_value)
    throw_error(status::invalid_argument, std::string("environment: ") + name + "='" + std::string(s) +
                                              "' is not an integer >= " + std::to_string(min_value));
  return out;
}

inline int env_int_or(const env_lookup& get, const char* name, int min_value, int fallback) {
  return get(name) ? env_int(get, name, min_value) : fallback;
}

inline void require_var(const env_lookup& get, const char* present, const char* needed) {
  if (!get(needed))
    throw_error(status::invalid_argument,
                std::string("environment: ") + present + " is set but " + needed + " is not");
}

/// 128 bits from two differently seeded FNV-1a 64 passes: not cryptographic,
/// only deterministic (see "WEAK" above).
inline secret_bytes derive_secret(const std::string& material) {
  secret_bytes s{};
  std::uint64_t seeds[2] = {14695981039346656037ull, 0x9e3779b97f4a7c15ull};
  for (int k = 0; k < 2; ++k) {
    std::uint64_t h = seeds[k];
    for (unsigned char c : material) h = (h ^ c) * 1099511628211ull;
    for (unsigned char c : std::string_view("collx-derived-secret")) h = (h ^ c) * 1099511628211ull;
    for (int i = 0; i < 8; ++i) s[8 * k + i] = static_cast<std::uint8_t>(h >> (56 - 8 * i));
  }
  return s;
}

}  // namespace detail

/// Detects the launcher; nullopt when none of the known variables is set.
inline std::optional<launch_env> detect_launch_env(const env_lookup& get) {
  launch_env e;
  const char* rank_var = nullptr;
  const char* size_var = nullptr;
  const char *lrank_var = nullptr, *lsize_var = nullptr;
  if (get("COLLX_RANK") || get("COLLX_SIZE")) {
    e.source = "collx";
    rank_var = "COLLX_RANK", size_var = "COLLX_SIZE";
    lrank_var = "COLLX_LOCAL_RANK", lsize_var = "COLLX_LOCAL_SIZE";
  } else if (get("WORLD_SIZE")) {
    e.source = "torchrun";
    rank_var = "RANK", size_var = "WORLD_SIZE";
    lrank_var = "LOCAL_RANK", lsize_var = "LOCAL_WORLD_SIZE";
  } else if (get("OMPI_COMM_WORLD_RANK")) {
    e.source = "openmpi";
    rank_var = "OMPI_COMM_WORLD_RANK", size_var = "OMPI_COMM_WORLD_SIZE";
    lrank_var = "OMPI_COMM_WORLD_LOCAL_RANK", lsize_var = "OMPI_COMM_WORLD_LOCAL_SIZE";
  } else if (get("PMI_RANK")) {
    e.source = "pmi";
    rank_var = "PMI_RANK", size_var = "PMI_SIZE";
    lrank_var = "MPI_LOCALRANKID", lsize_var = "MPI_LOCALNRANKS";
  } else if (get("SLURM_PROCID")) {
    e.source = "slurm";
    rank_var = "SLURM_PROCID";
    size_var = !get("SLURM_NTASKS") && get("SLURM_NPROCS") ? "SLURM_NPROCS" : "SLURM_NTASKS";
    lrank_var = "SLURM_LOCALID", lsize_var = nullptr;
  } else {
    return std::nullopt;
  }
  using detail::env_int;
  detail::require_var(get, get(rank_var) ? rank_var : size_var, get(rank_var) ? size_var : rank_var);
  e.size = env_int(get, size_var, 1);
  e.rank = env_int(get, rank_var, 0);
  if (e.rank >= e.size)
    throw_error(status::invalid_argument, std::string("environment: ") + rank_var + "=" +
                                              std::to_string(e.rank) + " is not below " + size_var + "=" +
                                              std::to_string(e.size));
  e.local_rank = detail::env_int_or(get, lrank_var, 0, -1);
  if (lsize_var) {
    e.local_size = detail::env_int_or(get, lsize_var, 1, -1);
  } else if (const char* t = get("SLURM_NTASKS_PER_NODE")) {
    // Often a per-node list such as "2(x3)"; only a plain number is usable.
    int n = 0;
    std::string_view s = t;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    if (ec == std::errc{} && p == s.data() + s.size() && n >= 1) e.local_size = n;
  }
  if (e.local_rank >= 0 && e.local_size >= 1 && e.local_rank >= e.local_size)
    throw_error(status::invalid_argument, std::string("environment: ") + lrank_var + "=" +
                                              std::to_string(e.local_rank) + " is not below the local size " +
                                              std::to_string(e.local_size));

  if (e.source == "collx" && get("COLLX_UNIQUE_ID")) {
    try {
      e.id = unique_id_from_string(get("COLLX_UNIQUE_ID"));
    } catch (const error& x) {
      throw_error(status::invalid_argument, std::string("environment: COLLX_UNIQUE_ID: ") + x.what());
    }
    root_info info = decode_unique_id(*e.id);
    e.root_address = info.address;
    e.root_port = info.port;
    e.secret = info.secret;
    return e;
  }

  if (const char* a = get("COLLX_ROOT_ADDR")) {
    endpoint ep = parse_endpoint(a, "environment: COLLX_ROOT_ADDR");
    e.root_address = ep.host;
    e.root_port = ep.port;
  } else if (get("MASTER_ADDR") || get("MASTER_PORT")) {
    detail::require_var(get, get("MASTER_ADDR") ? "MASTER_ADDR" : "MASTER_PORT",
                        get("MASTER_ADDR") ? "MASTER_PORT" : "MASTER_ADDR");
    const int port = env_int(get, "MASTER_PORT", 1);
    if (port >= 65535)
      throw_error(status::invalid_argument,
                  "environment: MASTER_PORT=" + std::string(get("MASTER_PORT")) +
                      " leaves no next port for the collx root (it uses MASTER_PORT+1)");
    e.root_address = get("MASTER_ADDR");
    if (e.root_address.empty()) throw_error(status::invalid_argument, "environment: MASTER_ADDR is empty");
    e.root_port = static_cast<std::uint16_t>(port + 1);
  }

  if (const char* s = get("COLLX_SECRET")) {
    e.secret = secret_from_hex(s, "environment: COLLX_SECRET");
  } else {
    std::string material =
        e.source + '\n' + std::to_string(e.size) + '\n' + e.root_address + '\n' + std::to_string(e.root_port);
    for (const char* v : {"SLURM_JOB_ID", "SLURM_STEP_ID", "TORCHELASTIC_RUN_ID", "OMPI_MCA_orte_hnp_uri",
                          "PMI_JOBID", "PMIX_NAMESPACE"}) {
      const char* x = get(v);
      material += '\n';
      material += x ? x : "";
    }
    e.secret = detail::derive_secret(material);
    e.secret_derived = true;
  }
  return e;
}

/// Same, reading the process environment.
inline std::optional<launch_env> detect_launch_env() {
  return detect_launch_env([](const char* n) -> const char* { return std::getenv(n); });
}

/// Joins the group described by `e`. With a unique id, every rank connects
/// to it. Otherwise rank 0 first starts the root service at
/// root_address:root_port (it then lives in rank 0's process until every
/// rank has left), and every rank connects there, retrying until `timeout`.
inline session connect_from_env(const launch_env& e, std::chrono::milliseconds timeout) {
  if (e.id) return session::connect(*e.id, e.rank, e.size, timeout);
  if (e.root_address.empty() || e.root_port == 0)
    throw_error(status::invalid_argument,
                "bootstrap: " + e.source +
                    " launch without a rendezvous address: set COLLX_ROOT_ADDR=host:port (or MASTER_ADDR and "
                    "MASTER_PORT) to an address of rank 0's host");
  if (e.rank == 0) {
    bootstrap_options opt;
    opt.timeout = std::max(opt.timeout, timeout);
    try {
      start_root(e.root_address, e.root_port, e.secret, opt);
    } catch (const error& x) {
      throw_error(x.code(), "bootstrap: rank 0 cannot host the root at " +
                                to_string(endpoint{e.root_address, e.root_port}) +
                                " (COLLX_ROOT_ADDR, else MASTER_ADDR and MASTER_PORT+1): " + x.what());
    }
  }
  return session::connect(endpoint{e.root_address, e.root_port}, e.secret, e.rank, e.size, timeout);
}

}  // namespace collx::bootstrap
