// collx/net/frame.hpp — what travels on a socket transport stream, and the
// checks every received byte passes before the proxy acts on it.
//
// A stream first carries one hello each way (authentication: the job's
// 128-bit secret, as the bootstrap does, plus who connects to whom), then
// frames of a fixed 24-byte header, little-endian:
//
//   u32 kind | u32 channel | u64 step | u32 bytes | u32 check
//
//   data    `bytes` payload bytes of FIFO step `step` of `channel` follow
//   credit  the receiver has consumed steps below `step` (its FIFO head)
//   bye     the sender closes its communicator: an end of stream is expected
//   abort   the sender's communicator failed; `step` holds the packed cause
//   call    the sender's call number `step` (16 bytes: signature, count), so
//           that the next rank compares its calls with it (comm/watch.hpp)
//
// `check` is a function of the other fields, so bytes that are not a frame
// (a stray client, a desynchronised stream) fail at once instead of being
// taken for a plausible header. Step s of a channel travels on stream
// s % nstreams, so each stream sees each channel's steps in order with a
// stride of nstreams; credits travel on stream 0. A data frame whose step is not the next one expected on
// its stream is refused, as is a payload larger than a slot, a step whose
// slot the receiver has not freed yet (the sender ignored its credits), a
// credit for steps never sent or a credit going backwards. A refused frame
// fails the communicator naming the peer; nothing is written for it.
#pragma once

#include <collx/bootstrap/unique_id.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace collx::net {

enum class frame_kind : std::uint32_t {
  data = 0x434c5801,  // "CLX" + 1
  credit = 0x434c5802,
  bye = 0x434c5803,
  abort = 0x434c5804,
  call = 0x434c5805,  // a call record: 16 payload bytes (signature, count) of call number `step`
};

/// Payload bytes of a call frame.
inline constexpr std::uint32_t call_bytes = 16;

inline constexpr std::size_t frame_bytes = 24;

struct frame {
  frame_kind kind = frame_kind::data;
  std::uint32_t channel = 0;
  std::uint64_t step = 0;
  std::uint32_t bytes = 0;
};

namespace frame_detail {
inline void put32(std::byte* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = std::byte(v >> (8 * i));
}
inline void put64(std::byte* p, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = std::byte(v >> (8 * i));
}
inline std::uint32_t get32(const std::byte* p) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= std::uint32_t(p[i]) << (8 * i);
  return v;
}
inline std::uint64_t get64(const std::byte* p) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= std::uint64_t(p[i]) << (8 * i);
  return v;
}
inline std::uint32_t check_of(const frame& f) {
  const std::uint64_t x = (std::uint64_t(f.kind) << 32 ^ f.channel) * 0x9e3779b97f4a7c15ull ^
                          f.step * 0xc2b2ae3d27d4eb4full ^ std::uint64_t(f.bytes) * 0x165667b19e3779f9ull;
  return static_cast<std::uint32_t>(x ^ x >> 32);
}
}  // namespace frame_detail

inline void encode(const frame& f, std::byte* out) {
  frame_detail::put32(out, static_cast<std::uint32_t>(f.kind));
  frame_detail::put32(out + 4, f.channel);
  frame_detail::put64(out + 8, f.step);
  frame_detail::put32(out + 16, f.bytes);
  frame_detail::put32(out + 20, frame_detail::check_of(f));
}

/// Decodes 24 bytes; returns an empty string, or what is wrong with them.
inline std::string decode(const std::byte* in, frame& f) {
  const std::uint32_t k = frame_detail::get32(in);
  if (k < static_cast<std::uint32_t>(frame_kind::data) || k > static_cast<std::uint32_t>(frame_kind::call))
    return "bytes that are not a collx frame (kind word " + std::to_string(k) + ")";
  f.kind = static_cast<frame_kind>(k);
  f.channel = frame_detail::get32(in + 4);
  f.step = frame_detail::get64(in + 8);
  f.bytes = frame_detail::get32(in + 16);
  if (frame_detail::get32(in + 20) != frame_detail::check_of(f))
    return "a frame header whose check word does not match its fields";
  if (f.kind == frame_kind::call && f.bytes != call_bytes)
    return "a call record of " + std::to_string(f.bytes) + " bytes (it has " + std::to_string(call_bytes) +
           ")";
  if (f.kind != frame_kind::data && f.kind != frame_kind::call && f.bytes != 0)
    return "a control frame announcing " + std::to_string(f.bytes) + " payload bytes";
  return {};
}

/// What the receiving proxy knows about one channel of one peer when a frame
/// arrives: the limits a frame is checked against.
struct channel_rx {
  std::uint32_t slots = 0, slot_bytes = 0;
  std::uint64_t expected_step = 0;  // next data step this stream must carry
  std::uint64_t head = 0;           // steps the local receiver has consumed
  std::uint64_t sent = 0;           // steps this side has sent the peer (credits may not exceed it)
  std::uint64_t credited = 0;       // the peer's last credit
};

/// Checks a decoded frame against channel `rx[f.channel]` (nchannels
/// entries); returns an empty string, or what is wrong.
inline std::string validate(const frame& f, const channel_rx* rx, std::uint32_t nchannels) {
  if (f.kind == frame_kind::bye) return {};
  if (f.kind == frame_kind::call) return f.step == 0 ? "a call record numbered 0" : std::string();
  if (f.kind == frame_kind::abort) {
    // The packed cause (comm/watch.hpp's abort_cause): its low byte a failure status.
    const std::uint64_t why = f.step & 0xff;
    if (why == 0 || why > 9) return "an abort with an unknown cause (" + std::to_string(why) + ")";
    return {};
  }
  if (f.channel >= nchannels)
    return "a frame for channel " + std::to_string(f.channel) + " (it has " + std::to_string(nchannels) + ")";
  const channel_rx& c = rx[f.channel];
  const std::string ch = " on channel " + std::to_string(f.channel);
  if (f.kind == frame_kind::credit) {
    if (f.step < c.credited)
      return "a credit going backwards" + ch + " (" + std::to_string(f.step) + " after " +
             std::to_string(c.credited) + ")";
    if (f.step > c.sent)
      return "a credit for step " + std::to_string(f.step) + ch + " but only " + std::to_string(c.sent) +
             " steps were sent";
    return {};
  }
  if (f.step != c.expected_step)
    return "step " + std::to_string(f.step) + ch + " where step " + std::to_string(c.expected_step) +
           " was expected (sequence broken)";
  if (f.bytes > c.slot_bytes)
    return "a " + std::to_string(f.bytes) + "-byte payload" + ch + " (a slot holds " +
           std::to_string(c.slot_bytes) + ")";
  if (f.step >= c.head + c.slots)
    return "step " + std::to_string(f.step) + ch + " before its slot was freed (the receiver consumed " +
           std::to_string(c.head) + " of " + std::to_string(c.slots) + "-slot FIFO: flow control violated)";
  return {};
}

// ---- hello: one each way when a stream opens --------------------------------------

inline constexpr std::size_t hello_bytes = 48;
inline constexpr char hello_magic[8] = {'C', 'L', 'X', 'N', 'E', 'T', '0', '1'};

struct hello {
  bootstrap::secret_bytes secret{};
  std::uint32_t src = 0, dst = 0;  // the ranks at this end and the other
  std::uint32_t stream = 0, nstreams = 0, nranks = 0;
};

inline void encode(const hello& h, std::byte* out) {
  std::memcpy(out, hello_magic, 8);
  std::memcpy(out + 8, h.secret.data(), 16);
  frame_detail::put32(out + 24, h.src);
  frame_detail::put32(out + 28, h.dst);
  frame_detail::put32(out + 32, h.stream);
  frame_detail::put32(out + 36, h.nstreams);
  frame_detail::put32(out + 40, h.nranks);
  frame_detail::put32(out + 44, 0);
}

/// Checks a received hello: magic, the job's secret (constant time), and
/// that it comes from a rank in [src_lo, src_hi) for rank `me` of `nranks`
/// with `nstreams` streams. Returns an empty string, or why it is refused.
inline std::string check_hello(const std::byte* in, const bootstrap::secret_bytes& secret, std::uint32_t me,
                               std::uint32_t nranks, std::uint32_t nstreams, hello& out) {
  if (std::memcmp(in, hello_magic, 8) != 0) return "not a collx socket transport hello";
  std::memcpy(out.secret.data(), in + 8, 16);
  if (!bootstrap::secrets_equal(out.secret, secret)) return "a hello with the wrong job secret";
  out.src = frame_detail::get32(in + 24);
  out.dst = frame_detail::get32(in + 28);
  out.stream = frame_detail::get32(in + 32);
  out.nstreams = frame_detail::get32(in + 36);
  out.nranks = frame_detail::get32(in + 40);
  if (out.nranks != nranks)
    return "a hello for a communicator of " + std::to_string(out.nranks) + " ranks (this one has " +
           std::to_string(nranks) + ")";
  if (out.dst != me) return "a hello addressed to rank " + std::to_string(out.dst);
  if (out.src >= nranks || out.src == me) return "a hello from rank " + std::to_string(out.src);
  if (out.nstreams != nstreams)
    return "a hello with " + std::to_string(out.nstreams) + " streams per peer (this rank uses " +
           std::to_string(nstreams) + "; COLLX_SOCKET_NSTREAMS must be equal on every rank)";
  if (out.stream >= nstreams) return "a hello for stream " + std::to_string(out.stream);
  return {};
}

}  // namespace collx::net
