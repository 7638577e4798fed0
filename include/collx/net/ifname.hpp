// collx/net/ifname.hpp — which network interface the socket transport listens
// on, chosen with NCCL's syntax for NCCL_SOCKET_IFNAME.
//
//   COLLX_SOCKET_IFNAME=eth0        interfaces whose name starts with "eth0"
//   COLLX_SOCKET_IFNAME=eth,ib      starts with any of the prefixes
//   COLLX_SOCKET_IFNAME=^docker,lo  every interface except those prefixes
//   COLLX_SOCKET_IFNAME==eth1       exactly "eth1" ("^=eth1": all but exactly eth1)
//   COLLX_SOCKET_FAMILY=AF_INET | AF_INET6   only that address family
//
// Unset, the default is "^docker,lo" and, if nothing matches, "lo" (as NCCL
// does): a host whose only network is its loopback still runs. IPv4
// addresses come before IPv6 ones of the same interface; IPv6 link-local
// addresses carry their scope ("fe80::1%eth0").
//
// The parser and the matcher are pure (unit-tested); list_interfaces() reads
// getifaddrs. Errors: status::invalid_argument naming the variable for a
// malformed value (an empty name, a name longer than an interface name can
// be, whitespace); status::not_supported when no interface matches, listing
// the interfaces that exist.
#pragma once

#include <collx/error.hpp>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace collx::net {

/// A parsed COLLX_SOCKET_IFNAME value.
struct if_filter {
  bool exclude = false;  // "^": every interface but the listed ones
  bool exact = false;    // "=": whole names, not prefixes
  std::vector<std::string> names;
};

/// Parses NCCL's interface list syntax; `what` names the source in errors.
inline if_filter parse_if_filter(std::string_view text, std::string_view what = "COLLX_SOCKET_IFNAME") {
  auto bad = [&](const std::string& why) {
    throw_error(status::invalid_argument, std::string(what) + "='" + std::string(text) + "': " + why +
                                              " (expected names or prefixes separated by commas, optionally "
                                              "after ^ (exclude) and = (exact names))");
  };
  if_filter f;
  std::string_view rest = text;
  if (!rest.empty() && rest.front() == '^') f.exclude = true, rest.remove_prefix(1);
  if (!rest.empty() && rest.front() == '=') f.exact = true, rest.remove_prefix(1);
  if (rest.empty()) bad("no interface named");
  for (;;) {
    const std::size_t comma = rest.find(',');
    const std::string_view name = rest.substr(0, comma);
    if (name.empty()) bad("an empty interface name");
    if (name.size() >= IF_NAMESIZE)
      bad("'" + std::string(name) + "' is longer than an interface name can be (" +
          std::to_string(IF_NAMESIZE - 1) + " characters)");
    for (char c : name)
      if (c <= ' ' || c == 127) bad("whitespace or a control character in '" + std::string(name) + "'");
    f.names.emplace_back(name);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return f;
}

/// Whether interface `name` passes the filter.
inline bool matches(const if_filter& f, std::string_view name) {
  bool listed = false;
  for (const std::string& n : f.names)
    listed = listed || (f.exact ? name == n : name.substr(0, n.size()) == n);
  return f.exclude ? !listed : listed;
}

/// One address of one interface.
struct if_address {
  std::string name;  // interface name
  int family = 0;    // AF_INET or AF_INET6
  std::string host;  // numeric address ("10.0.0.1", "fd00::1", "fe80::1%eth0")
};

/// The address family COLLX_SOCKET_FAMILY asks for (0: any).
inline int parse_family(std::string_view text, std::string_view what = "COLLX_SOCKET_FAMILY") {
  if (text.empty()) return 0;
  if (text == "AF_INET" || text == "4" || text == "ipv4") return AF_INET;
  if (text == "AF_INET6" || text == "6" || text == "ipv6") return AF_INET6;
  throw_error(status::invalid_argument,
              std::string(what) + "='" + std::string(text) + "': expected AF_INET or AF_INET6");
}

/// The addresses among `all` that pass filter f and family (0: any), in
/// the interfaces' order, IPv4 before IPv6 within one interface.
inline std::vector<if_address> select_interfaces(const if_filter& f, const std::vector<if_address>& all,
                                                 int family = 0) {
  std::vector<std::string> order;  // interface names, first appearance first
  for (const if_address& a : all)
    if (std::find(order.begin(), order.end(), a.name) == order.end()) order.push_back(a.name);
  std::vector<if_address> out;
  for (const std::string& name : order)
    for (int fam : {AF_INET, AF_INET6})
      for (const if_address& a : all)
        if (a.name == name && a.family == fam && (family == 0 || fam == family) && matches(f, a.name))
          out.push_back(a);
  return out;
}

/// The up interfaces of this host with an IPv4 or IPv6 address.
inline std::vector<if_address> list_interfaces() {
  std::vector<if_address> out;
  ifaddrs* head = nullptr;
  if (::getifaddrs(&head) != 0) return out;
  for (ifaddrs* i = head; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || !(i->ifa_flags & IFF_UP)) continue;
    const int fam = i->ifa_addr->sa_family;
    char buf[INET6_ADDRSTRLEN] = {};
    if (fam == AF_INET) {
      ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr, buf, sizeof buf);
      out.push_back({i->ifa_name, fam, buf});
    } else if (fam == AF_INET6) {
      const auto* a6 = reinterpret_cast<const sockaddr_in6*>(i->ifa_addr);
      ::inet_ntop(AF_INET6, &a6->sin6_addr, buf, sizeof buf);
      std::string host = buf;
      if (IN6_IS_ADDR_LINKLOCAL(&a6->sin6_addr)) host += std::string("%") + i->ifa_name;
      out.push_back({i->ifa_name, fam, host});
    }
  }
  ::freeifaddrs(head);
  return out;
}

/// The address this rank listens on: the first that COLLX_SOCKET_IFNAME and
/// COLLX_SOCKET_FAMILY allow among `all` (by default list_interfaces()).
inline if_address pick_interface(const char* ifname_env, const char* family_env,
                                 const std::vector<if_address>& all) {
  const int family = parse_family(family_env ? family_env : "");
  std::vector<if_address> found;
  if (ifname_env != nullptr && *ifname_env != '\0') {
    found = select_interfaces(parse_if_filter(ifname_env), all, family);
  } else {
    found = select_interfaces(parse_if_filter("^docker,lo", "default interface filter"), all, family);
    if (found.empty()) found = select_interfaces(parse_if_filter("lo"), all, family);
  }
  if (found.empty()) {
    std::string have;
    for (const if_address& a : all) have += (have.empty() ? "" : ", ") + a.name + " " + a.host;
    throw_error(status::not_supported,
                std::string("socket transport: no network interface matches COLLX_SOCKET_IFNAME='") +
                    (ifname_env ? ifname_env : "") + "'" +
                    (family ? std::string(" with COLLX_SOCKET_FAMILY=") + family_env : std::string()) +
                    " (interfaces: " + (have.empty() ? "none" : have) + ")");
  }
  return found.front();
}

inline if_address pick_interface() {
  return pick_interface(std::getenv("COLLX_SOCKET_IFNAME"), std::getenv("COLLX_SOCKET_FAMILY"),
                        list_interfaces());
}

}  // namespace collx::net
