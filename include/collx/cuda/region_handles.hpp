// collx/cuda/region_handles.hpp — how process ranks share their GPU regions,
// and how they agree on it.
//
// A process rank's FIFO region is GPU memory that every peer process maps.
// The driver offers three ways to hand it over, and which of them works
// depends on the machine, the driver and the container:
//
//   posix_fd  cuMemCreate with POSIX file-descriptor handles; the descriptor
//             travels over a UNIX socket (bootstrap/fd_exchange.hpp). Needs
//             virtual memory management and a shared filesystem namespace.
//   fabric    cuMemCreate with fabric handles (CUDA 12.3+); the 64-byte
//             handle travels through the bootstrap. Needs an IMEX channel the
//             user may open (the driver refuses with NOT_PERMITTED otherwise);
//             it is what multi-node NVLink systems use.
//   cuda_ipc  cudaMalloc and cudaIpcGetMemHandle, the legacy interface; the
//             64-byte handle travels through the bootstrap. Works wherever
//             CUDA IPC does, without virtual memory management.
//
// The ranks must all use the same way, and a failure on one rank must not
// leave the others waiting. So the choice runs in two steps, both taken
// alike on every rank:
//
//   1. handle_candidates(): from what each rank's GPU offers and what each
//      rank asked for (options::region_handles), the ways to try, in order
//      (automatic: posix_fd, fabric, cuda_ipc, each only where every rank's
//      GPU offers it). Ranks that ask for different ways, or for one some
//      rank's GPU lacks, fail here alike, naming the rank.
//   2. negotiate(): tries each candidate. An attempt calls agree(why) after
//      each of its stages (export; import): every rank says whether the
//      stage worked on it, and where some rank failed, every rank abandons
//      the attempt (its objects are released as the exception unwinds) and
//      moves on to the next candidate. When none is left every rank throws
//      the same not_supported error, naming each way's first failing rank
//      and its reason.
//
// Host code only, no CUDA header: the agreement is tested on CPUs.
#pragma once

#include <collx/error.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace collx::gpu {

/// How a process rank's GPU region is handed to its peers (see above).
enum class region_handle : std::uint8_t {
  automatic,  ///< the first of posix_fd, fabric, cuda_ipc that works on every rank
  posix_fd,
  fabric,
  cuda_ipc,
};

inline const char* name(region_handle h) {
  switch (h) {
    case region_handle::automatic: return "automatic";
    case region_handle::posix_fd: return "posix_fd";
    case region_handle::fabric: return "fabric";
    case region_handle::cuda_ipc: return "cuda_ipc";
  }
  return "?";
}

/// The region_handle named `s` ("automatic", "posix_fd", "fabric", "cuda_ipc");
/// invalid_argument naming `what` otherwise.
inline region_handle parse_region_handle(const std::string& s, const char* what) {
  for (region_handle h :
       {region_handle::automatic, region_handle::posix_fd, region_handle::fabric, region_handle::cuda_ipc})
    if (s == name(h)) return h;
  throw_error(status::invalid_argument,
              std::string(what) + " must be automatic, posix_fd, fabric or cuda_ipc, got '" + s + "'");
}

/// Bit of `h` in a set of offered ways.
constexpr std::uint8_t handle_bit(region_handle h) { return std::uint8_t(1u << static_cast<unsigned>(h)); }

/// What one rank brings to the choice.
struct handle_request {
  std::uint8_t offered = 0;  ///< handle_bit()s of the ways its GPU offers
  region_handle asked = region_handle::automatic;
};

/// The ways to try, in order; the same on every rank given the same
/// requests. Errors: not_supported (a way asked for is not offered
/// everywhere, none is offered everywhere), invalid_argument (ranks asked
/// for different ways).
inline std::vector<region_handle> handle_candidates(const std::vector<handle_request>& ranks,
                                                    const char* op) {
  region_handle asked = region_handle::automatic;
  int asker = -1;
  for (int q = 0; q < static_cast<int>(ranks.size()); ++q) {
    const region_handle a = ranks[static_cast<std::size_t>(q)].asked;
    if (a == region_handle::automatic) continue;
    if (asker >= 0 && a != asked)
      throw_error(status::invalid_argument, std::string(op) + ": rank " + std::to_string(asker) +
                                                " asked for " + name(asked) + " region handles and rank " +
                                                std::to_string(q) + " for " + name(a) +
                                                " (every rank must ask alike, or leave it automatic)");
    if (asker < 0) asked = a, asker = q;
  }
  std::vector<region_handle> order;
  if (asker >= 0) order = {asked};
  else order = {region_handle::posix_fd, region_handle::fabric, region_handle::cuda_ipc};
  std::vector<region_handle> out;
  std::string lacking;
  for (region_handle h : order) {
    int without = -1;
    for (int q = 0; q < static_cast<int>(ranks.size()) && without < 0; ++q)
      if (!(ranks[static_cast<std::size_t>(q)].offered & handle_bit(h))) without = q;
    if (without < 0) out.push_back(h);
    else
      lacking += std::string(lacking.empty() ? "" : "; ") + name(h) + ": rank " + std::to_string(without) +
                 "'s GPU does not offer it";
  }
  if (out.empty())
    throw_error(status::not_supported,
                std::string(op) + ": no way to share GPU regions between the ranks (" + lacking + ")" +
                    (asker >= 0 ? " (rank " + std::to_string(asker) + " asked for " + name(asked) + ")"
                                : std::string()));
  return out;
}

/// One rank's word on a stage of an attempt.
struct stage_vote {
  std::uint8_t ok = 0;
  char why[191] = {};
};

/// Every rank's vote, by rank: an allgather over the group's bootstrap.
using vote_exchange = std::function<std::vector<stage_vote>(const stage_vote&)>;

namespace handles_detail {

/// What every rank throws to leave an attempt that failed on some rank.
struct attempt_refused {
  std::string why;  // "rank q: reason"
};

}  // namespace handles_detail

/// Called by an attempt after each stage: `why` empty where the stage worked
/// here, else what failed. Returns where it worked on every rank; otherwise
/// leaves the attempt on every rank alike.
class stage_agreement {
 public:
  explicit stage_agreement(vote_exchange exchange) : exchange_(std::move(exchange)) {}
  void operator()(const std::string& why) const {
    stage_vote mine{};
    mine.ok = why.empty() ? 1 : 0;
    std::snprintf(mine.why, sizeof mine.why, "%s", why.c_str());
    const std::vector<stage_vote> all = exchange_(mine);
    for (std::size_t q = 0; q < all.size(); ++q)
      if (!all[q].ok)
        throw handles_detail::attempt_refused{
            "rank " + std::to_string(q) + ": " +
            std::string(all[q].why, strnlen(all[q].why, sizeof all[q].why))};
  }

 private:
  vote_exchange exchange_;
};

/// Tries `candidates` in order with attempt(way, agree) until one returns on
/// every rank; returns that way. `on_refused(way, why)` is told of each
/// abandoned way (for COLLX_DEBUG). Exceptions an attempt throws other than
/// through `agree` (a bootstrap timeout) propagate: they are not the way's
/// fault, and the other ranks fail by the same deadline.
inline region_handle negotiate(
    const std::vector<region_handle>& candidates,
    const std::function<void(region_handle, const stage_agreement&)>& attempt, const vote_exchange& exchange,
    const char* op, const std::function<void(region_handle, const std::string&)>& on_refused = {}) {
  const stage_agreement agree(exchange);
  std::string refusals;
  for (region_handle h : candidates) {
    try {
      attempt(h, agree);
      return h;
    } catch (const handles_detail::attempt_refused& r) {
      refusals += std::string(refusals.empty() ? "" : "; ") + name(h) + ": " + r.why;
      if (on_refused) on_refused(h, r.why);
    }
  }
  throw_error(status::not_supported,
              std::string(op) + ": no way to share GPU regions worked on every rank (" + refusals + ")");
}

}  // namespace collx::gpu
