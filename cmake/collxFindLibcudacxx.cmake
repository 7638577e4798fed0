# collxFindLibcudacxx.cmake — locate libcu++ (cuda/atomic, cuda/std/span, ...)
# shipped with the CUDA toolkit.
#
# Used twice: by collx's own CMakeLists.txt, and by the installed
# collxConfig.cmake at find_package() time, so an installed package never
# carries the include path of the machine it was built on.
#
#   collx_find_libcudacxx(<out-var>)
#
# Sets <out-var> to the directory that holds cuda/atomic (the toolkit's cccl/
# subdirectory on CUDA 12.x and newer, the toolkit include directory itself on
# older ones), or to an empty string when no toolkit is found. collx headers
# then fall back to std::atomic_ref through __has_include.
include_guard(GLOBAL)

function(collx_find_libcudacxx out_var)
  set(_dirs "")
  if(CUDAToolkit_FOUND)
    set(_dirs ${CUDAToolkit_INCLUDE_DIRS})
  elseif(NOT CMAKE_VERSION VERSION_LESS 3.17)
    # Inside a function: the toolkit's result variables stay local, only its
    # imported targets and cache entries are visible to the caller.
    find_package(CUDAToolkit QUIET)
    if(CUDAToolkit_FOUND)
      set(_dirs ${CUDAToolkit_INCLUDE_DIRS})
    endif()
  endif()

  set(_found "")
  foreach(_dir IN LISTS _dirs)
    if(EXISTS "${_dir}/cccl/cuda/atomic")
      set(_found "${_dir}/cccl")
      break()
    elseif(EXISTS "${_dir}/cuda/atomic")
      set(_found "${_dir}")
      break()
    endif()
  endforeach()
  set(${out_var} "${_found}" PARENT_SCOPE)
endfunction()
