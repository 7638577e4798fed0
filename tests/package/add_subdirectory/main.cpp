// Consumer of the collx package: builds against collx::collx and nothing else.
// Uses a C++20 feature and a thread, so it checks that cxx_std_20 and Threads
// come with the target.
#include <collx/config.hpp>
#include <collx/error.hpp>

#include <concepts>
#include <cstdio>
#include <thread>

namespace {

template <std::integral T>
constexpr T twice(T v) {
  return v + v;
}

}  // namespace

int main() {
  static_assert(twice(COLLX_VERSION_MAJOR + 1) >= 2);

  const char* name = nullptr;
  std::thread worker([&name] { name = collx::to_string(collx::status::ok); });
  worker.join();

  std::printf("collx %d.%d.%d libcudacxx=%d status=%s\n", COLLX_VERSION_MAJOR, COLLX_VERSION_MINOR,
              COLLX_VERSION_PATCH, COLLX_HAS_LIBCUDACXX, name);
  return name != nullptr ? 0 : 1;
}
