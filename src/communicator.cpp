// The host/shm communicator compiled once: every type-erased entry point
// (every collective, element width and compiled variant) is instantiated in
// this translation unit, and translation units that include
// collx/communicator.hpp with COLLX_SEPARATE_COMPILATION defined link to it
// instead of compiling their own copy. CMake: link collx::compiled, which
// builds this file and defines the macro for its users.
#include <collx/communicator.hpp>

#ifndef COLLX_SEPARATE_COMPILATION
#error "compile src/communicator.cpp with COLLX_SEPARATE_COMPILATION defined, as its users are"
#endif

namespace collx {
template class basic_communicator<transport::shm, exec::host>;
}  // namespace collx
