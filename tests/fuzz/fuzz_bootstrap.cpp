// libFuzzer target for everything the bootstrap parses from outside.
//
// Each input exercises, in-process:
//  * the pure parsers: wire::decode_hello / decode_header, unique ids,
//    "host:port" endpoints, hex secrets, and launcher environments (the input
//    read as KEY=VALUE lines);
//  * the root service against a hostile client: a fresh root per input, one
//    TCP client that sends (optionally) a valid hello and then the input's
//    bytes, optionally a second, well-behaved rank first;
//  * a session against a hostile root: a fake root that answers a joining
//    rank with the input's bytes.
// The first byte selects the scenario. Everything must end in a collx::error
// or success, never a crash, a hang (each exchange is deadline-bound), or an
// allocation beyond the bounds (run with -malloc_limit_mb).
#include <collx/bootstrap/env.hpp>
#include <collx/bootstrap/root.hpp>
#include <collx/bootstrap/session.hpp>
#include <collx/bootstrap/socket.hpp>
#include <collx/bootstrap/wire.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <thread>

using namespace collx;
using namespace collx::bootstrap;
using namespace std::chrono_literals;

namespace {

const secret_bytes job_secret = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

void parsers(const std::uint8_t* data, std::size_t size) {
  const auto* b = reinterpret_cast<const std::byte*>(data);
  if (size >= wire::hello_size) (void)wire::decode_hello(b);
  if (size >= wire::header_size) (void)wire::decode_header(b);
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    (void)unique_id_from_string(text);
  } catch (const error&) {
  }
  try {
    (void)parse_endpoint(text);
  } catch (const error&) {
  }
  try {
    (void)secret_from_hex(text);
  } catch (const error&) {
  }
  if (size >= sizeof(unique_id)) {
    unique_id id;
    std::memcpy(id.bytes, data, sizeof id.bytes);
    try {
      (void)decode_unique_id(id);
    } catch (const error&) {
    }
  }
  std::map<std::string, std::string, std::less<>> env;
  for (std::size_t start = 0; start < text.size();) {
    std::size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) nl = text.size();
    const std::string_view line = text.substr(start, nl - start);
    if (const std::size_t eq = line.find('='); eq != std::string_view::npos)
      env[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
    start = nl + 1;
  }
  try {
    (void)detect_launch_env([&](const char* k) -> const char* {
      auto it = env.find(std::string_view(k));
      return it == env.end() ? nullptr : it->second.c_str();
    });
  } catch (const error&) {
  }
}

/// Reads whatever the peer sends until it closes or `deadline`.
void drain(int fd, clock::time_point deadline) {
  std::byte buf[4096];
  while (detail::wait_fd(fd, POLLIN, deadline)) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) return;
  }
}

void hostile_client(std::uint8_t flags, const std::uint8_t* data, std::size_t size) {
  bootstrap_options o;
  o.timeout = 2s;
  o.max_blob = 4096;
  root_handle root = start_root("127.0.0.1", 0, job_secret, o);
  const int group = 1 + ((flags >> 1) & 3);
  const auto deadline = clock::now() + 2s;
  try {
    socket_fd good;
    if ((flags & 8) && group > 1) {  // a well-behaved rank 1 joins first
      good = connect_until(root.address(), deadline, "root");
      const auto h = wire::encode(wire::hello{job_secret, 1, group});
      send_all(good.get(), h.data(), h.size(), deadline);
    }
    socket_fd fd = connect_until(root.address(), deadline, "root");
    if (flags & 1) {
      secret_bytes s = job_secret;
      if (flags & 16) s[15] ^= 1;
      const auto h = wire::encode(wire::hello{s, 0, group});
      send_all(fd.get(), h.data(), h.size(), deadline);
    }
    send_all(fd.get(), data, size, deadline);
    ::shutdown(fd.get(), SHUT_WR);
    drain(fd.get(), deadline);
  } catch (const error&) {
  }
  root.stop();
  root.wait_for(5s);
}

void hostile_root(const std::uint8_t* data, std::size_t size) {
  socket_fd listener = listen_on(endpoint{"127.0.0.1", 0});
  const endpoint at = local_address(listener.get()).to_endpoint();
  std::thread fake([&] {
    const auto deadline = clock::now() + 2s;
    if (!detail::wait_fd(listener.get(), POLLIN, deadline)) return;
    socket_fd c = accept_connection(listener.get());
    if (!c) return;
    try {
      std::byte hello[wire::hello_size];
      recv_all(c.get(), hello, sizeof hello, deadline);
      send_all(c.get(), data, size, deadline);
    } catch (const error&) {
    }
    ::shutdown(c.get(), SHUT_WR);
    drain(c.get(), deadline);
  });
  try {
    session s = session::connect(at, job_secret, 0, 2, 1s);
    std::uint64_t mine = 42;
    (void)s.allgather(&mine, sizeof mine);
    s.barrier();
  } catch (const error&) {
  }
  fake.join();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t flags = data[0];
  ++data, --size;
  parsers(data, size);
  if (flags & 32) hostile_root(data, size);
  else hostile_client(flags, data, size);
  return 0;
}
