// collx/net/connect.hpp — the socket transport's connections: every pair of
// ranks joined by `nstreams` TCP streams, each authenticated both ways.
//
// Each rank listens on the interface net/ifname.hpp picks (port chosen by
// the kernel) and publishes the address through the bootstrap session
// (allgather). Rank i connects to every rank j > i, sending a hello on each
// stream (net/frame.hpp: the job's secret, i, j, the stream number); rank j
// checks it and answers with its own hello, which i checks. Three phases, so
// that no rank waits on one that waits on it: connect and send every hello
// (the kernel's listen queue accepts without the peer's help), accept and
// answer every hello from lower ranks, then read every answer from higher
// ranks. A connection that fails its check (a stray client, a wrong secret)
// is closed and does not count; the reason is kept for the timeout message.
//
// Errors: status::mismatch when ranks disagree on the stream count or the
// FIFO geometry;
// status::timeout naming the ranks still missing (and the last refused
// hello) after `deadline`; status::system_error from the sockets.
#pragma once

#include <collx/bootstrap/session.hpp>
#include <collx/bootstrap/socket.hpp>
#include <collx/bootstrap/unique_id.hpp>
#include <collx/error.hpp>
#include <collx/net/frame.hpp>
#include <collx/net/ifname.hpp>
#include <collx/net/proxy.hpp>
#include <collx/transport/shm.hpp>

#include <poll.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

namespace collx::net {

/// What each rank publishes through the bootstrap.
struct listen_info {
  char host[64];  // numeric address, NUL-terminated
  std::uint16_t port;
  std::uint16_t reserved;
  std::uint32_t nstreams;
  /// FIFO geometry per channel: frames are checked against the receiver's,
  /// so every rank must have the sender's.
  std::uint32_t nchannels;
  std::uint32_t slots[transport::max_channels];
  std::uint32_t slot_bytes[transport::max_channels];
};

/// Connects rank s.rank() to every other rank with `nstreams` streams each;
/// returns one link per peer (ranks other than s.rank()).
inline std::vector<peer_link> connect_mesh(bootstrap::session& s, const bootstrap::secret_bytes& secret,
                                           const if_address& ifa, int nstreams,
                                           const transport::shm_layout& layout,
                                           bootstrap::clock::time_point deadline) {
  using namespace std::chrono;
  const int me = s.rank(), P = s.size();
  bootstrap::socket_fd listener = bootstrap::listen_on({ifa.host, 0});
  listen_info mine{};
  std::snprintf(mine.host, sizeof mine.host, "%s", ifa.host.c_str());
  mine.port = bootstrap::local_address(listener.get()).port();
  mine.nstreams = static_cast<std::uint32_t>(nstreams);
  mine.nchannels = layout.nchannels;
  for (std::uint32_t c = 0; c < layout.nchannels; ++c) {
    mine.slots[c] = layout.fifo[c].slots;
    mine.slot_bytes[c] = layout.fifo[c].slot_bytes;
  }
  const std::vector<std::byte> all = s.allgather(&mine, sizeof mine);
  std::vector<listen_info> info(static_cast<std::size_t>(P));
  std::memcpy(info.data(), all.data(), all.size());
  for (int q = 0; q < P; ++q) {
    info[static_cast<std::size_t>(q)].host[sizeof mine.host - 1] = '\0';
    if (info[static_cast<std::size_t>(q)].nstreams != mine.nstreams)
      throw_error(status::mismatch, "socket transport: rank " + std::to_string(q) + " uses " +
                                        std::to_string(info[static_cast<std::size_t>(q)].nstreams) +
                                        " streams per peer, rank " + std::to_string(me) + " " +
                                        std::to_string(nstreams) + " (COLLX_SOCKET_NSTREAMS must be equal)");
    const listen_info& o = info[static_cast<std::size_t>(q)];
    bool same = o.nchannels == mine.nchannels;
    for (std::uint32_t c = 0; same && c < mine.nchannels; ++c)
      same = o.slots[c] == mine.slots[c] && o.slot_bytes[c] == mine.slot_bytes[c];
    if (!same)
      throw_error(status::mismatch,
                  "socket transport: rank " + std::to_string(q) + " and rank " + std::to_string(me) +
                      " use different FIFO geometries (COLLX_NSLOTS, COLLX_BUFFSIZE and the "
                      "protocol list must be equal on every rank)");
  }
  auto where = [&](int q) {
    const listen_info& i = info[static_cast<std::size_t>(q)];
    return "rank " + std::to_string(q) + " (" + bootstrap::to_string(bootstrap::endpoint{i.host, i.port}) +
           ")";
  };
  std::vector<peer_link> links(static_cast<std::size_t>(P));
  for (int q = 0; q < P; ++q) {
    links[static_cast<std::size_t>(q)].rank = q;
    links[static_cast<std::size_t>(q)].where = where(q);
    links[static_cast<std::size_t>(q)].streams.resize(static_cast<std::size_t>(nstreams));
  }
  const auto n = static_cast<std::uint32_t>(nstreams);
  auto hello_to = [&](int q, int k) {
    std::byte b[hello_bytes];
    encode(hello{secret, static_cast<std::uint32_t>(me), static_cast<std::uint32_t>(q),
                 static_cast<std::uint32_t>(k), n, static_cast<std::uint32_t>(P)},
           b);
    return std::vector<std::byte>(b, b + hello_bytes);
  };

  // 1. Connect to every higher rank and send the hellos.
  for (int q = me + 1; q < P; ++q)
    for (int k = 0; k < nstreams; ++k) {
      const listen_info& i = info[static_cast<std::size_t>(q)];
      bootstrap::socket_fd fd =
          bootstrap::connect_until({i.host, i.port}, deadline, "rank " + std::to_string(q));
      const auto h = hello_to(q, k);
      bootstrap::send_all(fd.get(), h.data(), h.size(), deadline, where(q));
      links[static_cast<std::size_t>(q)].streams[static_cast<std::size_t>(k)] = std::move(fd);
    }

  // 2. Accept every stream of every lower rank; answer each hello.
  int missing = me * nstreams;
  std::string refused;
  while (missing > 0) {
    if (!bootstrap::detail::wait_fd(listener.get(), POLLIN, deadline)) {
      std::string who;
      for (int q = 0; q < me; ++q)
        for (int k = 0; k < nstreams; ++k)
          if (!links[static_cast<std::size_t>(q)].streams[static_cast<std::size_t>(k)])
            who += (who.empty() ? "" : ", ") + where(q) + " stream " + std::to_string(k);
      throw_error(status::timeout, "socket transport: rank " + std::to_string(me) +
                                       " timed out waiting for connections from " + who +
                                       (refused.empty() ? std::string() : "; refused: " + refused));
    }
    bootstrap::socket_fd fd = bootstrap::accept_connection(listener.get());
    if (!fd) continue;
    // A stray client that sends nothing may hold this loop for one second, not forever.
    const auto hello_deadline = std::min(deadline, bootstrap::clock::now() + seconds(1));
    std::byte b[hello_bytes];
    hello h;
    std::string why;
    try {
      bootstrap::recv_all(fd.get(), b, sizeof b, hello_deadline, "a connecting peer");
      why = check_hello(b, secret, static_cast<std::uint32_t>(me), static_cast<std::uint32_t>(P), n, h);
    } catch (const error& e) {
      why = e.what();
    }
    if (why.empty() && h.src >= static_cast<std::uint32_t>(me)) why = "a hello from a higher rank";
    if (why.empty() && links[h.src].streams[h.stream]) why = "a second hello for one stream";
    if (!why.empty()) {
      refused = why;
      continue;  // closes fd
    }
    const auto answer = hello_to(static_cast<int>(h.src), static_cast<int>(h.stream));
    bootstrap::send_all(fd.get(), answer.data(), answer.size(), deadline, where(static_cast<int>(h.src)));
    links[h.src].streams[h.stream] = std::move(fd);
    --missing;
  }

  // 3. Check every answer of a higher rank.
  for (int q = me + 1; q < P; ++q)
    for (int k = 0; k < nstreams; ++k) {
      const int fd = links[static_cast<std::size_t>(q)].streams[static_cast<std::size_t>(k)].get();
      std::byte b[hello_bytes];
      bootstrap::recv_all(fd, b, sizeof b, deadline, where(q));
      hello h;
      std::string why =
          check_hello(b, secret, static_cast<std::uint32_t>(me), static_cast<std::uint32_t>(P), n, h);
      if (why.empty() &&
          (h.src != static_cast<std::uint32_t>(q) || h.stream != static_cast<std::uint32_t>(k)))
        why = "an answer from the wrong rank or stream";
      if (!why.empty())
        throw_error(status::system_error, "socket transport: " + where(q) + " answered with " + why);
    }
  links.erase(links.begin() + me);
  return links;
}

}  // namespace collx::net
