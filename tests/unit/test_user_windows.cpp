// The registry of registered user buffers (transport/window_registry.hpp): which
// window holds a call's buffers, against spans computed by hand.
#include <collx/transport/window_registry.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

using namespace collx;
using transport::window_span;

TEST_CASE("window_span::holds: inside, at the edges, past the end, and without wrapping", "[windows]") {
  const window_span s{1000, 100};
  CHECK(s.holds(1000, 100));
  CHECK(s.holds(1000, 0));
  CHECK(s.holds(1100, 0));  // empty, at the end
  CHECK(s.holds(1050, 50));
  CHECK_FALSE(s.holds(1050, 51));
  CHECK_FALSE(s.holds(999, 1));
  CHECK_FALSE(s.holds(1101, 0));
  CHECK_FALSE(s.holds(1001, ~std::uint64_t{0}));  // bytes that would wrap the address
  const window_span top{~std::uintptr_t{0} - 15, 16};
  CHECK(top.holds(~std::uintptr_t{0} - 15, 16));
  CHECK_FALSE(top.holds(~std::uintptr_t{0} - 15, 17));
}

TEST_CASE("window_registry: a call's windows, per side, and only where both sides are registered", "[windows]") {
  transport::window_registry reg(3);
  // Window 0: each rank's buffer at a different address; window 1 likewise.
  reg.add({{1000, 400}, {5000, 400}, {9000, 400}});
  reg.add({{2000, 800}, {6000, 800}, {10000, 800}});
  CHECK(reg.count() == 2);
  const auto* table = reg.data();
  auto p = [](std::uintptr_t a) { return reinterpret_cast<const void*>(a); };

  // Rank 1: send inside its part of window 0, recv inside window 1.
  auto c = reg.for_call(1, p(5100), 200, p(6000), 800, 64, table);
  CHECK(c.registered());
  CHECK(c.send == 0);
  CHECK(c.recv == 1);
  CHECK(c.min_bytes == 64);
  CHECK(c.table == table);
  // Another rank's part does not count for rank 1.
  CHECK_FALSE(reg.for_call(1, p(1000), 100, p(6000), 800, 0, table).registered());
  // A side that runs past its part is not registered; nor is the call.
  CHECK_FALSE(reg.for_call(1, p(5100), 301, p(6000), 800, 0, table).registered());
  CHECK_FALSE(reg.for_call(1, p(5100), 200, p(6001), 800, 0, table).registered());
  CHECK(reg.find(2, p(10799), 1) == 1);
  CHECK(reg.find(2, p(10799), 2) == -1);
  // In place: both sides in one window.
  c = reg.for_call(0, p(1000), 400, p(1000), 400, 0, table);
  CHECK((c.registered() && c.send == 0 && c.recv == 0));

  // A rank's part forgotten: its calls are no longer registered; the others' are.
  reg.set(0, 1, {});
  CHECK(reg.find(1, p(5100), 10) == -1);
  CHECK(reg.find(0, p(1100), 10) == 0);
  reg.remove(1);
  CHECK(reg.find(0, p(2000), 10) == -1);
  CHECK(reg.count() == 2);  // numbers are not reused

  // Nothing registered: an empty call_windows, which says so.
  const transport::window_registry none(2);
  CHECK_FALSE(none.for_call(0, p(1), 1, p(1), 1, 0, none.data()).registered());
  CHECK(transport::call_windows{}.min_bytes == ~std::uint64_t{0});
}
