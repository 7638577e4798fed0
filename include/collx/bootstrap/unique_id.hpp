// collx/bootstrap/unique_id.hpp — the token that lets ranks find each other.
//
// What: collx::unique_id, 128 trivially copyable bytes (like ncclUniqueId)
// naming the rendezvous root (IPv4/IPv6 address and port) and the job's
// 128-bit random secret; a printable form for environment variables; and the
// secret helpers the bootstrap shares.
//
// Byte layout (multi-byte fields big-endian, unused bytes zero):
//   [0,4)  magic "CLXI"        [4] version (1)      [5] family (4 or 6)
//   [6,8)  port                [8,24) address (IPv4 uses the first 4 bytes)
//   [24,40) secret             [40,44) reserved (0)
//   [44,48) FNV-1a checksum of [0,44)                 [48,128) zero
// The printable form is "collx1-" followed by the 48 significant bytes in
// lowercase hex. Parsing checks length, alphabet, magic, version, family,
// checksum and the zero bytes, so a truncated or mistyped token fails with a
// clear message instead of a connection to the wrong place.
//
// The secret is a bearer credential: whoever holds the id can join the job.
//
// Errors: collx::error(invalid_argument) for malformed ids/secrets,
// system_error when no randomness is available.
// Thread-safety: all functions are reentrant.
#pragma once

#include <collx/error.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>

namespace collx {

/// Opaque rendezvous token; pass it to every rank by any means.
struct unique_id {
  unsigned char bytes[128];
};
static_assert(std::is_trivially_copyable_v<unique_id> && sizeof(unique_id) == 128);

namespace bootstrap {

using secret_bytes = std::array<std::uint8_t, 16>;

/// What a unique id says: where the root listens and the job's secret.
struct root_info {
  std::string address;  // numeric, IPv6 without brackets
  std::uint16_t port = 0;
  secret_bytes secret{};
};

namespace detail {

inline constexpr unsigned char id_magic[4] = {'C', 'L', 'X', 'I'};
inline constexpr unsigned char id_version = 1;
inline constexpr std::size_t id_significant = 48;
inline constexpr std::string_view id_prefix = "collx1-";

inline std::uint32_t fnv1a32(const unsigned char* p, std::size_t n) {
  std::uint32_t h = 2166136261u;
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 16777619u;
  return h;
}

inline int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // uppercase is rejected: the printed form is canonical
}

inline void to_hex(const unsigned char* p, std::size_t n, std::string& out) {
  static constexpr char digits[] = "0123456789abcdef";
  for (std::size_t i = 0; i < n; ++i) {
    out += digits[p[i] >> 4];
    out += digits[p[i] & 15];
  }
}

}  // namespace detail

/// 16 bytes from the kernel's CSPRNG (getrandom, else /dev/urandom).
inline secret_bytes random_secret() {
  secret_bytes s{};
  std::size_t got = 0;
  while (got < s.size()) {
    ssize_t n = ::getrandom(s.data() + got, s.size() - got, 0);
    if (n > 0) {
      got += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;
  }
  if (got < s.size()) {
    // Kernels without getrandom(2) (ENOSYS) or sandboxes that forbid it.
    int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    while (fd >= 0 && got < s.size()) {
      ssize_t n = ::read(fd, s.data() + got, s.size() - got);
      if (n > 0) got += static_cast<std::size_t>(n);
      else if (!(n < 0 && errno == EINTR)) break;
    }
    if (fd >= 0) ::close(fd);
    if (got < s.size()) throw_error(status::system_error, "no randomness available for the bootstrap secret");
  }
  return s;
}

/// Constant-time comparison, so a probing client learns nothing from timing.
inline bool secrets_equal(const secret_bytes& a, const secret_bytes& b) noexcept {
  unsigned diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff |= a[i] ^ b[i];
  return diff == 0;
}

inline std::string secret_to_hex(const secret_bytes& s) {
  std::string out;
  detail::to_hex(s.data(), s.size(), out);
  return out;
}

/// Parses exactly 32 hex digits (either case). `what` names the source.
inline secret_bytes secret_from_hex(std::string_view text, std::string_view what = "secret") {
  secret_bytes s{};
  if (text.size() != 2 * s.size())
    throw_error(status::invalid_argument, std::string(what) + ": expected 32 hex digits, got " +
                                              std::to_string(text.size()) + " characters");
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    int v = detail::hex_value(c >= 'A' && c <= 'F' ? static_cast<char>(c - 'A' + 'a') : c);
    if (v < 0)
      throw_error(status::invalid_argument, std::string(what) + ": invalid character at position " +
                                                std::to_string(i) + " (expected hex)");
    s[i / 2] = static_cast<std::uint8_t>(s[i / 2] << 4 | v);
  }
  return s;
}

/// Builds an id; `address` must be a numeric IPv4 or IPv6 literal.
inline unique_id encode_unique_id(const root_info& info) {
  unique_id id{};
  unsigned char* b = id.bytes;
  std::memcpy(b, detail::id_magic, 4);
  b[4] = detail::id_version;
  if (::inet_pton(AF_INET, info.address.c_str(), b + 8) == 1) {
    b[5] = 4;
  } else if (::inet_pton(AF_INET6, info.address.c_str(), b + 8) == 1) {
    b[5] = 6;
  } else {
    throw_error(status::invalid_argument,
                "unique id: root address '" + info.address + "' is not a numeric IPv4/IPv6 address");
  }
  b[6] = static_cast<unsigned char>(info.port >> 8);
  b[7] = static_cast<unsigned char>(info.port & 0xff);
  std::memcpy(b + 24, info.secret.data(), info.secret.size());
  std::uint32_t sum = detail::fnv1a32(b, 44);
  for (int i = 0; i < 4; ++i) b[44 + i] = static_cast<unsigned char>(sum >> (24 - 8 * i));
  return id;
}

/// Validates an id and extracts its contents.
inline root_info decode_unique_id(const unique_id& id) {
  const unsigned char* b = id.bytes;
  auto fail = [](const char* why) -> root_info {
    throw_error(status::invalid_argument, std::string("unique id: ") + why);
  };
  if (std::memcmp(b, detail::id_magic, 4) != 0) return fail("bad magic (not a collx unique id)");
  if (b[4] != detail::id_version) return fail("unsupported version");
  if (b[5] != 4 && b[5] != 6) return fail("bad address family");
  std::uint32_t sum = 0;
  for (int i = 0; i < 4; ++i) sum = sum << 8 | b[44 + i];
  if (sum != detail::fnv1a32(b, 44)) return fail("checksum mismatch (corrupted id)");
  for (std::size_t i = detail::id_significant; i < sizeof id.bytes; ++i)
    if (b[i] != 0) return fail("non-zero padding (corrupted id)");
  root_info info;
  char buf[INET6_ADDRSTRLEN] = {};
  ::inet_ntop(b[5] == 4 ? AF_INET : AF_INET6, b + 8, buf, sizeof buf);
  info.address = buf;
  info.port = static_cast<std::uint16_t>(b[6] << 8 | b[7]);
  std::memcpy(info.secret.data(), b + 24, info.secret.size());
  return info;
}

}  // namespace bootstrap

/// Printable token: "collx1-" + 96 lowercase hex digits.
inline std::string to_string(const unique_id& id) {
  std::string out(bootstrap::detail::id_prefix);
  bootstrap::detail::to_hex(id.bytes, bootstrap::detail::id_significant, out);
  return out;
}

/// Inverse of to_string; rejects anything else with invalid_argument.
inline unique_id unique_id_from_string(std::string_view text) {
  namespace d = bootstrap::detail;
  const std::size_t expect = d::id_prefix.size() + 2 * d::id_significant;
  if (text.substr(0, d::id_prefix.size()) != d::id_prefix)
    throw_error(status::invalid_argument,
                "unique id: token must start with '" + std::string(d::id_prefix) + "'");
  if (text.size() != expect)
    throw_error(status::invalid_argument, "unique id: expected " + std::to_string(expect) +
                                              " characters, got " + std::to_string(text.size()) +
                                              " (truncated or extended token?)");
  unique_id id{};
  for (std::size_t i = 0; i < 2 * d::id_significant; ++i) {
    int v = d::hex_value(text[d::id_prefix.size() + i]);
    if (v < 0)
      throw_error(status::invalid_argument, "unique id: invalid character at position " +
                                                std::to_string(d::id_prefix.size() + i) +
                                                " (expected lowercase hex)");
    id.bytes[i / 2] = static_cast<unsigned char>(id.bytes[i / 2] << 4 | v);
  }
  bootstrap::decode_unique_id(id);  // magic, version, checksum
  return id;
}

}  // namespace collx
