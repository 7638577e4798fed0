/* A stand-in for the CUDA driver (soname libcuda.so.1) with the one entry
 * point collx asks, cuPointerGetAttributes, answering from ranges the test
 * marks. The test loads it by path; collx finds it by soname, as it finds the
 * real driver. Ranges are marked before the rank threads start. */
#include <atomic>
#include <cstddef>
#include <cstdint>

extern "C" {

enum { max_ranges = 16 };
static struct {
  uintptr_t lo, hi;
  unsigned type; /* CU_MEMORYTYPE_* */
  int managed, device;
} ranges[max_ranges];
static int nranges;
static int initialised;
static std::atomic<unsigned long> queries;  // rank threads query at once

__attribute__((visibility("default"))) void fake_driver_init(int on) { initialised = on; }
__attribute__((visibility("default"))) unsigned long fake_driver_queries(void) { return queries.load(); }
__attribute__((visibility("default"))) void fake_driver_clear(void) { nranges = 0; }
/* type: 1 host (pinned), 2 device, 4 unified; managed: CU_POINTER_ATTRIBUTE_IS_MANAGED. */
__attribute__((visibility("default"))) void fake_driver_mark(const void* p, size_t bytes, unsigned type,
                                                             int managed, int device) {
  if (nranges == max_ranges) return;
  ranges[nranges].lo = reinterpret_cast<uintptr_t>(p);
  ranges[nranges].hi = reinterpret_cast<uintptr_t>(p) + bytes;
  ranges[nranges].type = type;
  ranges[nranges].managed = managed;
  ranges[nranges].device = device;
  ++nranges;
}

/* As the driver: CUDA_ERROR_NOT_INITIALIZED (3) before cuInit; for memory it
 * does not know, success with every attribute zero. Writes the widths the
 * driver writes: an unsigned, a bool, an int. */
__attribute__((visibility("default"))) int cuPointerGetAttributes(unsigned num, const int* attrs, void** data,
                                                                  unsigned long long ptr) {
  ++queries;
  if (!initialised) return 3;
  unsigned type = 0;
  int managed = 0, device = -2;
  for (int i = 0; i < nranges; ++i)
    if (ptr >= ranges[i].lo && ptr < ranges[i].hi) {
      type = ranges[i].type;
      managed = ranges[i].managed;
      device = ranges[i].device;
    }
  for (unsigned a = 0; a < num; ++a) {
    switch (attrs[a]) {
      case 2: *static_cast<unsigned*>(data[a]) = type; break;
      case 8: *static_cast<unsigned char*>(data[a]) = static_cast<unsigned char>(managed); break;
      case 9: *static_cast<int*>(data[a]) = device; break;
      default: return 1; /* CUDA_ERROR_INVALID_VALUE */
    }
  }
  return 0;
}
}  // extern "C"
