// collx/cuda/check.hpp — CUDA runtime errors as collx errors.
//
// Host code of the CUDA layer only (include/collx/cuda/ needs the CUDA
// runtime headers; the core headers stay free of them).
#pragma once

#include <collx/error.hpp>

#include <cuda_runtime_api.h>

#include <string>

namespace collx::gpu {

/// Whether cudaGetDeviceCount's answer means the machine has no GPU to run on
/// (no device, no driver, or only the toolkit's stub driver), as opposed to a
/// GPU that is there and failed.
inline bool no_device(cudaError_t e, int devices) {
  if (e == cudaSuccess) return devices == 0;
  if (e == cudaErrorNoDevice || e == cudaErrorStubLibrary) return true;
  int driver = -1;
  return e == cudaErrorInsufficientDriver && cudaDriverGetVersion(&driver) == cudaSuccess && driver == 0;
}

/// Throws collx::error (status::system_error) naming `what` and CUDA's error
/// when e is not cudaSuccess. Clears the runtime's last (non-sticky) error.
inline void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  (void)cudaGetLastError();
  throw_error(status::system_error,
              std::string("CUDA: ") + what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

/// Puts the calling thread in relaxed stream-capture mode for its lifetime.
/// A user may capture our calls into a CUDA graph in global or thread-local
/// mode, where queries the runtime deems unsafe (occupancy, pointer
/// attributes) would fail and invalidate the user's capture; these queries
/// touch no stream, so relaxed mode is right for them (NCCL does the same).
class relaxed_capture {
 public:
  relaxed_capture() { (void)cudaThreadExchangeStreamCaptureMode(&mode_); }
  ~relaxed_capture() { (void)cudaThreadExchangeStreamCaptureMode(&mode_); }
  relaxed_capture(const relaxed_capture&) = delete;
  relaxed_capture& operator=(const relaxed_capture&) = delete;

 private:
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
};

/// Restores the calling thread's current device when it goes out of scope:
/// calls switch to their rank's device and leave the caller's as it was.
class device_guard {
 public:
  explicit device_guard(int device) {
    check(cudaGetDevice(&saved_), "cudaGetDevice");
    switched_ = saved_ != device;
    if (switched_) check(cudaSetDevice(device), "cudaSetDevice");
  }
  /// Switches back only where it switched: every runtime call costs the
  /// enqueue path of a collective (about a microsecond in a VM).
  ~device_guard() {
    if (switched_) (void)cudaSetDevice(saved_);
  }
  device_guard(const device_guard&) = delete;
  device_guard& operator=(const device_guard&) = delete;

 private:
  int saved_ = 0;
  bool switched_ = false;
};

}  // namespace collx::gpu
