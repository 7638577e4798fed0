// A link between two network namespaces, played in user space: a TAP device in
// each, every frame forwarded to the other after a fixed delay, a share of
// them dropped at random. It does what `tc netem delay D loss L` does on a
// veth pair, for kernels built without netem (sch_netem), so that
// tests/net/netns.sh can show that collectives stay right over a slow, lossy
// link: TCP sees real delay and real loss and must retransmit.
//
//   tap_link NS_A IF_A NS_B IF_B DELAY_US LOSS_PERCENT [SEED]
//
// Creates IF_A inside namespace NS_A and IF_B inside NS_B (names from
// `ip netns add`; the caller then gives them addresses and sets them up),
// prints "ready" on stdout, and forwards until SIGTERM or SIGINT. Then it
// prints what it did, for the caller to check that loss happened:
//
//   tap_link: forwarded F frames, dropped D at random, Q at a full queue; delay U us
//
// Each direction is a FIFO: frames keep their order, as on a wire. The
// devices go away with the process (they are not persistent). Linux only;
// needs root (CAP_NET_ADMIN and setns).
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <random>
#include <string>
#include <vector>

namespace {

volatile sig_atomic_t stop_requested = 0;
void request_stop(int) { stop_requested = 1; }

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "tap_link: %s: %s\n", what.c_str(), std::strerror(errno));
  std::exit(1);
}

/// A TAP device named `name`, created inside network namespace `ns`: the
/// calling thread enters the namespace, opens the device and comes back.
int open_tap_in(const std::string& ns, const std::string& name) {
  const int home = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  if (home < 0) die("open /proc/self/ns/net");
  const std::string path = "/var/run/netns/" + ns;
  const int there = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (there < 0) die("open " + path);
  if (setns(there, CLONE_NEWNET) != 0) die("setns " + ns);
  const int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) die("open /dev/net/tun");
  ifreq req{};
  req.ifr_flags = IFF_TAP | IFF_NO_PI;  // whole Ethernet frames, no packet-info header
  if (name.size() >= IFNAMSIZ) {
    errno = ENAMETOOLONG;
    die("interface name " + name);
  }
  std::memcpy(req.ifr_name, name.c_str(), name.size());
  if (ioctl(fd, TUNSETIFF, &req) != 0) die("TUNSETIFF " + name + " in " + ns);
  if (setns(home, CLONE_NEWNET) != 0) die("setns back");
  close(there);
  close(home);
  return fd;
}

using clock_type = std::chrono::steady_clock;

struct frame {
  clock_type::time_point due;
  std::vector<unsigned char> bytes;
};

struct counts {
  std::uint64_t forwarded = 0, dropped = 0, overflow = 0;
};

/// One direction of the link: frames read from `from` wait in `queue` until
/// they are due, then are written to `to`.
struct direction {
  int from, to;
  std::deque<frame> queue;
};

// Far more than a TCP window of full frames at these delays; beyond it the
// link drops, as a router's queue does.
constexpr std::size_t max_queued = 16384;

void read_all(direction& d, std::chrono::microseconds delay, double loss, std::mt19937_64& rng, counts& c) {
  std::uniform_real_distribution<double> coin(0.0, 1.0);
  unsigned char buf[65536];
  for (;;) {
    const ssize_t n = read(d.from, buf, sizeof buf);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n < 0) die("read");
    if (n == 0) return;
    if (coin(rng) < loss) {
      ++c.dropped;
      continue;
    }
    if (d.queue.size() >= max_queued) {
      ++c.overflow;
      continue;
    }
    d.queue.push_back({clock_type::now() + delay, std::vector<unsigned char>(buf, buf + n)});
  }
}

void write_due(direction& d, counts& c) {
  const auto now = clock_type::now();
  while (!d.queue.empty() && d.queue.front().due <= now) {
    const auto& f = d.queue.front();
    const ssize_t n = write(d.to, f.bytes.data(), f.bytes.size());
    if (n < 0 && errno == EAGAIN) return;  // try again at the next wake
    if (n < 0 && errno != EIO) die("write");
    // EIO: the device is not up yet; the frame is lost, as on a link that is down.
    if (n < 0) ++c.dropped;
    else ++c.forwarded;
    d.queue.pop_front();
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 7) {
    std::fprintf(stderr, "usage: tap_link NS_A IF_A NS_B IF_B DELAY_US LOSS_PERCENT [SEED]\n");
    return 2;
  }
  char* end = nullptr;
  const long delay_us = std::strtol(argv[5], &end, 10);
  if (*end != '\0' || delay_us < 0 || delay_us > 10'000'000) {
    std::fprintf(stderr, "tap_link: DELAY_US must be 0..10000000, got '%s'\n", argv[5]);
    return 2;
  }
  const double loss_percent = std::strtod(argv[6], &end);
  if (*end != '\0' || !(loss_percent >= 0.0 && loss_percent < 100.0)) {
    std::fprintf(stderr, "tap_link: LOSS_PERCENT must be in [0, 100), got '%s'\n", argv[6]);
    return 2;
  }
  const unsigned long long seed = argc > 7 ? std::strtoull(argv[7], nullptr, 10) : 1;

  struct sigaction sa {};
  sa.sa_handler = request_stop;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);

  const int a = open_tap_in(argv[1], argv[2]);
  const int b = open_tap_in(argv[3], argv[4]);
  std::printf("ready\n");
  std::fflush(stdout);

  const std::chrono::microseconds delay(delay_us);
  const double loss = loss_percent / 100.0;
  std::mt19937_64 rng(seed);
  counts c;
  direction ab{a, b, {}}, ba{b, a, {}};
  while (!stop_requested) {
    // Sleep until a frame arrives or the earliest queued one is due.
    timespec timeout{0, 100'000'000};
    for (const direction* d : {&ab, &ba})
      if (!d->queue.empty()) {
        const auto wait = std::max(clock_type::duration::zero(), d->queue.front().due - clock_type::now());
        const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(wait).count();
        if (ns < timeout.tv_sec * 1'000'000'000LL + timeout.tv_nsec) timeout = {0, static_cast<long>(ns)};
      }
    pollfd fds[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
    if (ppoll(fds, 2, &timeout, nullptr) < 0 && errno != EINTR) die("ppoll");
    if (fds[0].revents & POLLIN) read_all(ab, delay, loss, rng, c);
    if (fds[1].revents & POLLIN) read_all(ba, delay, loss, rng, c);
    write_due(ab, c);
    write_due(ba, c);
  }
  std::printf("tap_link: forwarded %llu frames, dropped %llu at random, %llu at a full queue; delay %ld us\n",
              static_cast<unsigned long long>(c.forwarded), static_cast<unsigned long long>(c.dropped),
              static_cast<unsigned long long>(c.overflow), delay_us);
  return 0;
}
