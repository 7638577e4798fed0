// Must not compile: ring's schedule asked for a collective it does not
// implement (all_to_all), which it must refuse rather than run something
// else. With -DCOLLX_CONTROL it is asked for reduce, which it implements.
#include <collx/algo/ring.hpp>

#include <cstddef>

// Primitives that accept every call the schedule makes (never run).
struct any_prims {
  std::size_t max_chunk() const { return 1; }
  template <class... Args>
  collx::status local_copy(Args...) { return collx::status::ok; }
  template <class... Args>
  collx::status send(Args...) { return collx::status::ok; }
  template <class... Args>
  collx::status recv(Args...) { return collx::status::ok; }
  template <class... Args>
  collx::status recv_reduce_send(Args...) { return collx::status::ok; }
  template <class... Args>
  collx::status recv_reduce_copy(Args...) { return collx::status::ok; }
};

#ifdef COLLX_CONTROL
constexpr collx::coll asked = collx::coll::reduce;
#else
constexpr collx::coll asked = collx::coll::all_to_all;
#endif

collx::status run(any_prims& p, const collx::schedule_args<float>& a) {
  return collx::algo::ring::run<asked>(p, a);
}

int main() { return 0; }
