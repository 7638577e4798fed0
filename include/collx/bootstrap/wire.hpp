// collx/bootstrap/wire.hpp — the bootstrap's TCP message format.
//
// Shared by the root service (root.hpp) and the client (session.hpp); kept
// apart so both sides, and tests that play a misbehaving peer, agree on one
// definition. All integers are big-endian and encoded byte by byte, so the
// format has no padding and does not depend on the host.
//
//   hello (client -> root, first 40 bytes of every connection):
//     [0,4) magic "CLXH" [4,6) version [6,8) 0 [8,24) secret
//     [24,28) rank (int32) [28,32) size (int32) [32,40) 0
//   frame (both directions, 24-byte header, then `length` payload bytes):
//     [0,4) magic "CLXF" [4,8) kind [8,12) status [12,16) rank (int32)
//     [16,24) length (uint64)
//
// Conversation: client sends hello; root answers `welcome` once all ranks
// joined (payload: 8-byte per-rank blob limit) or `reject` (text). Then each
// round the client sends `contribute` (its blob) and receives `result` (all
// blobs in rank order) or `failure` (status, failed rank, text). `leave`
// announces an orderly close, so the root can tell it from a crash.
#pragma once

#include <collx/bootstrap/unique_id.hpp>
#include <collx/error.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace collx::bootstrap::wire {

inline constexpr std::uint32_t hello_magic = 0x434C5848;  // "CLXH"
inline constexpr std::uint32_t frame_magic = 0x434C5846;  // "CLXF"
inline constexpr std::uint16_t version = 1;
inline constexpr std::size_t hello_size = 40;
inline constexpr std::size_t header_size = 24;
/// Default bound on one rank's blob; the root may be configured lower/higher
/// and announces its bound in `welcome`.
inline constexpr std::uint64_t default_max_blob = std::uint64_t{1} << 20;
/// Bound on the text of reject/failure frames.
inline constexpr std::uint64_t max_text = 4096;

enum class kind : std::uint32_t {
  welcome = 1,
  contribute = 2,
  result = 3,
  failure = 4,
  reject = 5,
  leave = 6
};

struct hello {
  secret_bytes secret{};
  std::int32_t rank = 0;
  std::int32_t size = 0;
};

struct header {
  kind k = kind::contribute;
  status st = status::ok;
  std::int32_t rank = -1;
  std::uint64_t length = 0;
};

namespace detail {
inline void put(std::byte* p, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<std::byte>(v >> (8 * (bytes - 1 - i)));
}
inline std::uint64_t get(const std::byte* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = v << 8 | std::to_integer<std::uint64_t>(p[i]);
  return v;
}
}  // namespace detail

inline std::array<std::byte, hello_size> encode(const hello& h) {
  std::array<std::byte, hello_size> b{};
  detail::put(b.data(), hello_magic, 4);
  detail::put(b.data() + 4, version, 2);
  for (std::size_t i = 0; i < h.secret.size(); ++i) b[8 + i] = static_cast<std::byte>(h.secret[i]);
  detail::put(b.data() + 24, static_cast<std::uint32_t>(h.rank), 4);
  detail::put(b.data() + 28, static_cast<std::uint32_t>(h.size), 4);
  return b;
}

/// Empty when the magic, version or reserved bytes are wrong. The secret,
/// rank and size are the caller's to check.
inline std::optional<hello> decode_hello(const std::byte* b) {
  if (detail::get(b, 4) != hello_magic || detail::get(b + 4, 2) != version || detail::get(b + 6, 2) != 0 ||
      detail::get(b + 32, 8) != 0)
    return std::nullopt;
  hello h;
  for (std::size_t i = 0; i < h.secret.size(); ++i) h.secret[i] = std::to_integer<std::uint8_t>(b[8 + i]);
  h.rank = static_cast<std::int32_t>(detail::get(b + 24, 4));
  h.size = static_cast<std::int32_t>(detail::get(b + 28, 4));
  return h;
}

inline std::array<std::byte, header_size> encode(const header& h) {
  std::array<std::byte, header_size> b{};
  detail::put(b.data(), frame_magic, 4);
  detail::put(b.data() + 4, static_cast<std::uint32_t>(h.k), 4);
  detail::put(b.data() + 8, static_cast<std::uint32_t>(h.st), 4);
  detail::put(b.data() + 12, static_cast<std::uint32_t>(h.rank), 4);
  detail::put(b.data() + 16, h.length, 8);
  return b;
}

/// Empty when the magic, kind or status is unknown; lengths are the caller's
/// to bound (they depend on the kind and the negotiated limit).
inline std::optional<header> decode_header(const std::byte* b) {
  if (detail::get(b, 4) != frame_magic) return std::nullopt;
  auto k = detail::get(b + 4, 4);
  auto st = detail::get(b + 8, 4);
  if (k < 1 || k > 6 || st > static_cast<std::uint32_t>(status::peer_dead)) return std::nullopt;
  header h;
  h.k = static_cast<kind>(k);
  h.st = static_cast<status>(st);
  h.rank = static_cast<std::int32_t>(detail::get(b + 12, 4));
  h.length = detail::get(b + 16, 8);
  return h;
}

}  // namespace collx::bootstrap::wire
