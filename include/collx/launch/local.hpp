// collx/launch/local.hpp — start P ranks as processes on this machine.
//
// What: run_local() starts a rendezvous root inside the calling process
// (collx::bootstrap::start_root), then fork/execs `nranks` copies of a
// program with COLLX_RANK, COLLX_SIZE, COLLX_LOCAL_RANK, COLLX_LOCAL_SIZE and
// COLLX_UNIQUE_ID set, so collx::bootstrap::detect_launch_env() and
// connect_from_env() in the children find each other. It forwards each
// child's stdout/stderr line by line as "[rank] line" (optional), and
// supervises them:
//  * the first child to fail (non-zero exit or signal) is reported on stderr
//    ("rank 1 (pid 4242) exited with code 3", "rank 2 (pid 4243) killed by
//    signal 9 (SIGKILL)"); the others get exit_grace to notice (collx
//    communicators fail within about a second when a peer process dies) and
//    print their own error, then SIGTERM, then SIGKILL after kill_grace;
//  * an overall timeout terminates all ranks the same way and returns 124;
//  * SIGINT/SIGTERM/SIGHUP sent to the launcher are forwarded to the ranks
//    (which run in their own process group, so a terminal's Ctrl-C reaches
//    the launcher only and it decides), and the launcher returns 128+signal.
// Returns 0 when every rank exited with 0, else the first failing rank's
// exit code (128+signal for a signal); 127 when the program is not found.
//
// Several nodes (torchrun's model): with nnodes > 1, one launcher per node
// starts its `nranks` ranks as global ranks node_rank·nranks … +nranks−1 of
// nnodes·nranks (COLLX_LOCAL_RANK/SIZE stay per node); node 0's launcher
// runs the root at `master` (a numeric address of node 0 that every node
// reaches), the others none; every launcher gives its ranks a unique id
// naming the master and the job's secret, which must be the same on every
// node (`secret`, from COLLX_SECRET in collxrun). Ranks then make their
// communicators across nodes, e.g. with collx::net::from_env.
//
// Children get the launcher's environment plus the variables above and
// launch_options::env. Their stdin is /dev/null, except rank 0's when the
// launcher's stdin is not a terminal (so `data | collxrun -n 2 prog` works
// without a background process group reading from a tty). Each child also
// gets SIGKILL if the launcher dies (PR_SET_PDEATHSIG), so ranks are never
// orphaned.
//
// Errors: collx::error(invalid_argument) for nranks < 1 or an empty argv,
// system_error when pipes/processes cannot be created. Lines longer than
// 64 KiB are forwarded in pieces.
//
// Thread-safety: one run_local at a time per process (it installs signal
// handlers for its duration and restores them after); a second concurrent
// call throws invalid_argument.
#pragma once

#include <collx/bootstrap/root.hpp>
#include <collx/bootstrap/unique_id.hpp>
#include <collx/error.hpp>

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

extern char** environ;

namespace collx::launch {

struct launch_options {
  /// Prefix every forwarded line with "[rank] "; when false the children
  /// write straight to the launcher's stdout/stderr.
  bool prefix_output = true;
  /// Overall limit; 0 = none. On expiry all ranks are terminated, 124 returned.
  std::chrono::milliseconds timeout{0};
  /// After the first rank fails: how long the others may take to exit on
  /// their own (and report the failure) before they get SIGTERM.
  std::chrono::milliseconds exit_grace{2000};
  /// Time between SIGTERM and SIGKILL when terminating ranks.
  std::chrono::milliseconds kill_grace{2000};
  /// Extra environment for every rank (overrides inherited values).
  std::vector<std::pair<std::string, std::string>> env;
  /// Where the rendezvous root listens (default 127.0.0.1, ephemeral port).
  bootstrap_options bootstrap;
  /// Names the launcher in its own messages.
  std::string name = "collxrun";
  /// Pin rank r to the r-th CPU this launcher may use (as mpirun's default
  /// --bind-to core): ranks that wait on each other then never share a core
  /// while another core is free. `automatic` binds only when the ranks fit on
  /// the CPUs; `none` leaves placement to the scheduler.
  enum class binding { automatic, core, none } bind = binding::automatic;
  /// Nodes of the job and this launcher's node (see the header comment).
  int nnodes = 1, node_rank = 0;
  /// With nnodes > 1: where node 0's root listens (numeric address, port)
  /// and the job's secret, the same on every node.
  std::string master_address;
  std::uint16_t master_port = 0;
  bootstrap::secret_bytes secret{};
};

namespace detail {

inline std::atomic<int> signal_pipe{-1};
inline std::atomic<bool> running{false};

inline void on_signal(int sig) {
  const int saved = errno;
  const int fd = signal_pipe.load();
  const unsigned char b = static_cast<unsigned char>(sig);
  if (fd >= 0) {
    [[maybe_unused]] ssize_t r = ::write(fd, &b, 1);
  }
  errno = saved;
}

inline const char* signal_name(int sig) {
  switch (sig) {
    case SIGHUP: return "SIGHUP";
    case SIGINT: return "SIGINT";
    case SIGQUIT: return "SIGQUIT";
    case SIGILL: return "SIGILL";
    case SIGTRAP: return "SIGTRAP";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGKILL: return "SIGKILL";
    case SIGUSR1: return "SIGUSR1";
    case SIGSEGV: return "SIGSEGV";
    case SIGUSR2: return "SIGUSR2";
    case SIGPIPE: return "SIGPIPE";
    case SIGALRM: return "SIGALRM";
    case SIGTERM: return "SIGTERM";
    case SIGXCPU: return "SIGXCPU";
    case SIGSYS: return "SIGSYS";
    default: return "unknown signal";
  }
}

inline void write_all(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    ssize_t k = ::write(fd, p, n);
    if (k > 0) {
      p += k;
      n -= static_cast<std::size_t>(k);
    } else if (k < 0 && errno == EINTR) {
      continue;
    } else {
      return;  // e.g. EPIPE when our stdout went away: output is dropped, ranks keep running
    }
  }
}

inline void message(const launch_options& o, const std::string& text) {
  const std::string line = o.name + ": " + text + "\n";
  write_all(STDERR_FILENO, line.data(), line.size());
}

/// Resolves argv[0] like execvp would, but before fork (the child may only
/// call async-signal-safe functions). Empty when not found/executable.
inline std::string find_program(const std::string& prog) {
  auto executable = [](const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
  };
  if (prog.find('/') != std::string::npos) return executable(prog) ? prog : std::string();
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  std::size_t start = 0;
  for (;;) {
    std::size_t end = dirs.find(':', start);
    std::string dir = dirs.substr(start, end == std::string::npos ? std::string::npos : end - start);
    std::string cand = (dir.empty() ? std::string(".") : dir) + "/" + prog;
    if (executable(cand)) return cand;
    if (end == std::string::npos) return {};
    start = end + 1;
  }
}

/// One forwarded stream (stdout or stderr of one rank).
struct stream {
  int fd = -1;   // read end of the child's pipe, -1 once closed
  int out = -1;  // STDOUT_FILENO or STDERR_FILENO
  int rank = -1;
  std::string pending;
};

struct child {
  pid_t pid = -1;
  bool alive = false;
  stream streams[2];
};

/// Writes the complete lines of `s` with the rank prefix, each in one
/// write() so lines of different ranks never mix; at EOF (or past 64 KiB
/// without a newline) the partial line goes out too.
inline void forward(stream& s, bool eof) {
  static constexpr std::size_t max_line = 64 * 1024;
  const std::string prefix = "[" + std::to_string(s.rank) + "] ";
  std::size_t start = 0;
  for (;;) {
    std::size_t nl = s.pending.find('\n', start);
    if (nl == std::string::npos) break;
    std::string line = prefix + s.pending.substr(start, nl - start + 1);
    write_all(s.out, line.data(), line.size());
    start = nl + 1;
  }
  s.pending.erase(0, start);
  if (!s.pending.empty() && (eof || s.pending.size() >= max_line)) {
    std::string line = prefix + s.pending + "\n";
    write_all(s.out, line.data(), line.size());
    s.pending.clear();
  }
}

inline std::string seconds(std::chrono::milliseconds ms) {
  std::string t = std::to_string(ms.count() / 1000);
  if (ms.count() % 1000) {
    std::string frac = std::to_string(1000 + ms.count() % 1000).substr(1);
    while (frac.back() == '0') frac.pop_back();
    t += "." + frac;
  }
  return t + " s";
}

inline std::string describe(int rank, pid_t pid, int wstatus) {
  const std::string who = "rank " + std::to_string(rank) + " (pid " + std::to_string(pid) + ")";
  if (WIFSIGNALED(wstatus)) {
    const int sig = WTERMSIG(wstatus);
    return who + " killed by signal " + std::to_string(sig) + " (" + signal_name(sig) + ")";
  }
  return who + " exited with code " + std::to_string(WEXITSTATUS(wstatus));
}

inline int exit_code(int wstatus) {
  return WIFSIGNALED(wstatus) ? 128 + WTERMSIG(wstatus) : WEXITSTATUS(wstatus);
}

/// Installs the forwarding handlers; restores the previous state on exit.
class signal_scope {
 public:
  static constexpr int forwarded[] = {SIGINT, SIGTERM, SIGHUP};

  signal_scope() {
    int p[2];
    if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) bootstrap::detail::throw_errno("pipe2", errno);
    read_fd_ = p[0];
    write_fd_ = p[1];
    signal_pipe.store(write_fd_);
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    for (std::size_t i = 0; i < 3; ++i) ::sigaction(forwarded[i], &sa, &old_[i]);
    // SIGCHLD only wakes the loop; it also undoes an inherited SIG_IGN, which
    // would make the kernel reap the ranks before we learn how they ended.
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    ::sigaction(SIGCHLD, &sa, &old_chld_);
    // Writing to a closed stdout must not kill the launcher and orphan the
    // ranks; the children get the original disposition back before exec.
    struct sigaction ign {};
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    ::sigaction(SIGPIPE, &ign, &old_pipe_);
  }
  ~signal_scope() {
    for (std::size_t i = 0; i < 3; ++i) ::sigaction(forwarded[i], &old_[i], nullptr);
    ::sigaction(SIGCHLD, &old_chld_, nullptr);
    ::sigaction(SIGPIPE, &old_pipe_, nullptr);
    signal_pipe.store(-1);
    ::close(read_fd_);
    ::close(write_fd_);
  }
  signal_scope(const signal_scope&) = delete;
  signal_scope& operator=(const signal_scope&) = delete;

  int fd() const noexcept { return read_fd_; }
  /// Restores the launcher's dispositions; async-signal-safe (child side).
  void restore_in_child() const noexcept {
    for (std::size_t i = 0; i < 3; ++i) ::sigaction(forwarded[i], &old_[i], nullptr);
    ::sigaction(SIGCHLD, &old_chld_, nullptr);
    ::sigaction(SIGPIPE, &old_pipe_, nullptr);
  }

 private:
  int read_fd_ = -1, write_fd_ = -1;
  struct sigaction old_[3]{}, old_chld_{}, old_pipe_{};
};

/// A NULL-terminated char* array over owned strings, built before fork.
struct cstrings {
  std::vector<std::string> own;
  std::vector<char*> ptrs;
  char** get() {
    ptrs.clear();
    for (auto& s : own) ptrs.push_back(s.data());
    ptrs.push_back(nullptr);
    return ptrs.data();
  }
};

}  // namespace detail

/// Runs `argv` as `nranks` ranks; see the header comment for the contract.
inline int run_local(int nranks, const std::vector<std::string>& argv, const launch_options& opt = {}) {
  namespace d = detail;
  using clock = std::chrono::steady_clock;
  require(nranks >= 1, "run_local", "nranks must be at least 1, got " + std::to_string(nranks));
  require(
      opt.nnodes >= 1 && opt.node_rank >= 0 && opt.node_rank < opt.nnodes, "run_local",
      "node rank " + std::to_string(opt.node_rank) + " is not in [0, " + std::to_string(opt.nnodes) + ")");
  const bool multinode = opt.nnodes > 1;
  require(!multinode || (!opt.master_address.empty() && opt.master_port != 0), "run_local",
          "several nodes need the master's address and port");
  const long long world = static_cast<long long>(nranks) * opt.nnodes;
  const int first = opt.node_rank * nranks;
  require(world <= opt.bootstrap.max_ranks, "run_local",
          std::to_string(world) + " ranks exceed the bootstrap limit of " +
              std::to_string(opt.bootstrap.max_ranks));
  require(!argv.empty() && !argv[0].empty(), "run_local", "no program to run");
  const std::string path = d::find_program(argv[0]);
  if (path.empty()) {
    d::message(opt, argv[0] + ": command not found or not executable");
    return 127;
  }
  if (d::running.exchange(true))
    throw_error(status::invalid_argument, "run_local: another launch is already running in this process");
  struct running_reset {
    ~running_reset() { d::running.store(false); }
  } reset_running;

  // Everything the children need is prepared here: after fork, in a process
  // that already runs the root's thread, only async-signal-safe calls are
  // allowed.
  // One node: a root of our own. Several: node 0's launcher runs it at the
  // master address; every launcher names it in the id it gives its ranks.
  bootstrap::root_handle root;
  if (!multinode)
    root = bootstrap::start_root(opt.bootstrap.address, opt.bootstrap.port, bootstrap::random_secret(),
                                 opt.bootstrap);
  else if (opt.node_rank == 0)
    root = bootstrap::start_root(opt.master_address, opt.master_port, opt.secret, opt.bootstrap);
  struct root_stop {
    bootstrap::root_handle& r;
    ~root_stop() {
      if (!r) return;
      r.stop();
      r.wait_for(std::chrono::seconds(2));
    }
  } stop_root{root};
  const std::string id =
      multinode ? to_string(bootstrap::encode_unique_id({opt.master_address, opt.master_port, opt.secret}))
                : to_string(root.id());

  d::cstrings args;
  args.own = argv;
  std::vector<std::string> overridden = {
      "COLLX_RANK=", "COLLX_SIZE=", "COLLX_LOCAL_RANK=", "COLLX_LOCAL_SIZE=", "COLLX_UNIQUE_ID="};
  for (auto& [k, v] : opt.env) overridden.push_back(k + "=");
  std::vector<std::string> base;
  for (char** e = environ; e && *e; ++e) {
    std::string_view kv = *e;
    bool skip = false;
    for (auto& o : overridden) skip = skip || kv.substr(0, o.size()) == o;
    if (!skip) base.emplace_back(kv);
  }
  for (auto& [k, v] : opt.env) base.push_back(k + "=" + v);
  std::vector<d::cstrings> envs(static_cast<std::size_t>(nranks));
  for (int r = 0; r < nranks; ++r) {
    auto& e = envs[static_cast<std::size_t>(r)].own;
    e = base;
    e.push_back("COLLX_RANK=" + std::to_string(first + r));
    e.push_back("COLLX_SIZE=" + std::to_string(world));
    e.push_back("COLLX_LOCAL_RANK=" + std::to_string(r));
    e.push_back("COLLX_LOCAL_SIZE=" + std::to_string(nranks));
    e.push_back("COLLX_UNIQUE_ID=" + id);
  }
  const std::string exec_failed = opt.name + ": cannot execute " + path + "\n";
  const int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull < 0) bootstrap::detail::throw_errno("open /dev/null", errno);
  struct fd_closer {
    int fd;
    ~fd_closer() { ::close(fd); }
  } close_devnull{devnull};
  const bool pass_stdin = !::isatty(STDIN_FILENO);
  const pid_t launcher = ::getpid();

  d::signal_scope signals;
  std::vector<d::child> kids(static_cast<std::size_t>(nranks));
  pid_t pgid = 0;
  sigset_t all, old_mask;
  sigfillset(&all);

  auto kill_all = [&](int sig) {
    if (pgid > 0) ::kill(-pgid, sig);
    for (auto& k : kids)  // also ranks that moved to another process group
      if (k.alive) ::kill(k.pid, sig);
  };
  // Starting rank r failed: kill and reap the ranks already started, close
  // every descriptor, and report.
  auto abandon = [&](int(&pipes)[2][2], const char* what, int err) {
    for (auto& p : pipes)
      for (int fd : p)
        if (fd >= 0) ::close(fd);
    kill_all(SIGKILL);
    for (auto& k : kids) {
      if (k.alive) ::waitpid(k.pid, nullptr, 0);
      for (auto& st : k.streams)
        if (st.fd >= 0) ::close(st.fd);
    }
    bootstrap::detail::throw_errno(what, err);
  };

  // CPUs to bind to, chosen before fork (the child only makes the syscall).
  std::vector<int> cpus;
  if (opt.bind != launch_options::binding::none) {
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (::sched_getaffinity(0, sizeof allowed, &allowed) == 0)
      for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
    if (opt.bind == launch_options::binding::automatic && static_cast<int>(cpus.size()) < nranks)
      cpus.clear();
  }

  for (int r = 0; r < nranks; ++r) {
    auto& k = kids[static_cast<std::size_t>(r)];
    cpu_set_t bind_set;
    CPU_ZERO(&bind_set);
    if (!cpus.empty()) CPU_SET(cpus[static_cast<std::size_t>(r) % cpus.size()], &bind_set);
    int pipes[2][2] = {{-1, -1}, {-1, -1}};
    if (opt.prefix_output)
      for (auto& p : pipes)
        if (::pipe2(p, O_CLOEXEC) != 0) abandon(pipes, "run_local: pipe2", errno);
    char** child_argv = args.get();
    char** child_env = envs[static_cast<std::size_t>(r)].get();
    // Signals are blocked across fork so that no handler runs in the child
    // before its dispositions are restored.
    ::pthread_sigmask(SIG_SETMASK, &all, &old_mask);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::setpgid(0, pgid);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != launcher) ::_exit(127);  // the launcher died before prctl
      if (!cpus.empty()) ::sched_setaffinity(0, sizeof bind_set, &bind_set);  // best effort
      signals.restore_in_child();
      ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
      if (r != 0 || !pass_stdin) ::dup2(devnull, STDIN_FILENO);
      if (opt.prefix_output) {
        ::dup2(pipes[0][1], STDOUT_FILENO);
        ::dup2(pipes[1][1], STDERR_FILENO);
      }
      ::execve(path.c_str(), child_argv, child_env);
      [[maybe_unused]] ssize_t w = ::write(STDERR_FILENO, exec_failed.data(), exec_failed.size());
      ::_exit(127);
    }
    const int fork_err = errno;
    ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    if (pid < 0) abandon(pipes, "run_local: fork", fork_err);
    for (auto& p : pipes)
      if (p[1] >= 0) ::close(p[1]);
    // Both sides call setpgid so the group exists whichever runs first.
    ::setpgid(pid, pgid);
    if (pgid == 0) pgid = pid;
    k.pid = pid;
    k.alive = true;
    k.streams[0] = {pipes[0][0], STDOUT_FILENO, first + r, {}};  // global ranks in messages
    k.streams[1] = {pipes[1][0], STDERR_FILENO, first + r, {}};
  }

  const auto start = clock::now();
  int result = 0;
  bool terminating = false;
  clock::time_point kill_at{}, drain_until{}, grace_until{};
  bool killed = false, in_grace = false;
  int alive = nranks, failed_rank = -1;

  auto terminate_all = [&](int code, int sig) {
    if (terminating) return;
    terminating = true;
    result = code;
    if (alive > 0) kill_all(sig);
    kill_at = clock::now() + opt.kill_grace;
  };
  // A rank failed: the others may still be about to report it themselves.
  auto grace_then_terminate = [&](int code) {
    terminating = true;
    result = code;
    in_grace = alive > 0;
    grace_until = clock::now() + opt.exit_grace;
  };
  auto end_grace = [&](int sig) {
    in_grace = false;
    if (alive > 0) kill_all(sig);
    kill_at = clock::now() + opt.kill_grace;
  };

  for (;;) {
    // ---- wait for output, signals, or the next deadline ----
    std::vector<pollfd> fds;
    std::vector<d::stream*> owners;
    fds.push_back({signals.fd(), POLLIN, 0});
    owners.push_back(nullptr);
    for (auto& k : kids)
      for (auto& s : k.streams)
        if (s.fd >= 0) {
          fds.push_back({s.fd, POLLIN, 0});
          owners.push_back(&s);
        }
    if (alive == 0 && (fds.size() == 1 || clock::now() >= drain_until)) break;
    // SIGCHLD wakes the poll; the 100 ms cap only covers a signal that
    // arrives between the waitpid sweep and poll().
    int wait_ms = 100;
    auto cap = [&](clock::time_point t) {
      wait_ms = std::min(wait_ms, bootstrap::detail::poll_timeout_ms(t));
    };
    if (in_grace) cap(grace_until);
    else if (terminating && !killed) cap(kill_at);
    if (!terminating && opt.timeout.count() > 0) cap(start + opt.timeout);
    if (alive == 0) cap(drain_until);
    ::poll(fds.data(), fds.size(), wait_ms);

    // ---- signals to the launcher ----
    if (fds[0].revents & POLLIN) {
      unsigned char buf[64];
      ssize_t n;
      while ((n = ::read(signals.fd(), buf, sizeof buf)) > 0)
        for (ssize_t i = 0; i < n; ++i) {
          const int sig = buf[i];
          if (sig == SIGCHLD) continue;
          if (!terminating) {
            d::message(opt, std::string("received ") + d::signal_name(sig) + ", forwarding it to the ranks");
            terminate_all(128 + sig, sig);
          } else if (in_grace) {
            d::message(opt, std::string("received ") + d::signal_name(sig) + ", forwarding it to the ranks");
            end_grace(sig);
          } else if (!killed && alive > 0) {
            d::message(opt, std::string("received ") + d::signal_name(sig) + " again, killing the ranks");
            kill_all(SIGKILL);
            killed = true;
            kill_at = clock::now();
          }
        }
    }

    // ---- output ----
    for (std::size_t i = 1; i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      d::stream& s = *owners[i];
      char buf[16384];
      ssize_t n = ::read(s.fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n > 0) {
        s.pending.append(buf, static_cast<std::size_t>(n));
        d::forward(s, false);
      } else {
        d::forward(s, true);
        ::close(s.fd);
        s.fd = -1;
      }
    }

    // ---- children that ended ----
    for (int r = 0; r < nranks; ++r) {
      auto& k = kids[static_cast<std::size_t>(r)];
      if (!k.alive) continue;
      int ws = 0;
      pid_t w = ::waitpid(k.pid, &ws, WNOHANG);
      if (w == 0 || (w < 0 && errno == EINTR)) continue;
      k.alive = false;
      if (--alive == 0) drain_until = clock::now() + std::chrono::seconds(1);
      if (w < 0) ws = 127 << 8;  // cannot happen while SIGCHLD is ours; count it as a failure
      const bool failed = !(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
      if (failed && !terminating) {
        d::message(opt, d::describe(first + r, k.pid, ws));
        failed_rank = r;
        grace_then_terminate(d::exit_code(ws));
      }
    }

    // ---- deadlines ----
    const auto now = clock::now();
    if (!terminating && opt.timeout.count() > 0 && now >= start + opt.timeout && alive > 0) {
      d::message(opt, "timeout after " + d::seconds(opt.timeout) + "; terminating " + std::to_string(alive) +
                          (alive == 1 ? " rank" : " ranks"));
      terminate_all(124, SIGTERM);
    }
    if (in_grace && alive == 0) in_grace = false;
    if (in_grace && now >= grace_until) {
      d::message(opt, "terminating the other " + std::to_string(alive) + (alive == 1 ? " rank" : " ranks") +
                          ", still running " + d::seconds(opt.exit_grace) + " after rank " +
                          std::to_string(failed_rank) + " failed");
      end_grace(SIGTERM);
    }
    if (terminating && !in_grace && !killed && alive > 0 && now >= kill_at) {
      d::message(opt, std::to_string(alive) + (alive == 1 ? " rank" : " ranks") + " still running after " +
                          d::seconds(opt.kill_grace) + "; sending SIGKILL");
      kill_all(SIGKILL);
      killed = true;
      kill_at = now;
    }
    if (killed && alive > 0 && now >= kill_at + std::chrono::seconds(10)) {
      // Only a process stuck in the kernel survives SIGKILL this long.
      d::message(opt, std::to_string(alive) + " ranks did not die after SIGKILL; giving up on them");
      break;
    }
  }
  for (auto& k : kids)
    for (auto& s : k.streams)
      if (s.fd >= 0) {
        d::forward(s, true);
        ::close(s.fd);
      }
  return result;
}

}  // namespace collx::launch
