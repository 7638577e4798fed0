# run_consumer.cmake — drives one package consumer test (cmake -P script).
#
# MODE=find_package      install the collx build tree to WORK_DIR/prefix
#                        (component collx_development), then configure, build
#                        and run tests/package/find_package against it.
# MODE=add_subdirectory  configure, build and run tests/package/add_subdirectory
#                        with COLLX_SOURCE_DIR pointing at the source tree.
#
# Other inputs (-D...): COLLX_SOURCE_DIR, COLLX_BINARY_DIR, WORK_DIR, CONFIG,
# GENERATOR, MAKE_PROGRAM, CXX_COMPILER, LIBCUDACXX_INCLUDE_DIR, EXPECTED_VERSION.
# Each run starts from an empty WORK_DIR, so no cache is ever shared with the
# outer build or a previous run.
cmake_minimum_required(VERSION 3.25)

foreach(var MODE COLLX_SOURCE_DIR COLLX_BINARY_DIR WORK_DIR GENERATOR)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "run_consumer.cmake: -D${var}=... is required")
  endif()
endforeach()
if(NOT MODE MATCHES "^(find_package|add_subdirectory)$")
  message(FATAL_ERROR "run_consumer.cmake: unknown MODE '${MODE}'")
endif()

# Nothing from the calling environment may steer the consumer's configure.
foreach(env CMAKE_PREFIX_PATH CMAKE_BUILD_TYPE CMAKE_CONFIGURATION_TYPES CMAKE_GENERATOR
            CMAKE_GENERATOR_PLATFORM CMAKE_GENERATOR_TOOLSET CMAKE_TOOLCHAIN_FILE
            CMAKE_EXPORT_COMPILE_COMMANDS CMAKE_INSTALL_PREFIX collx_DIR collx_ROOT COLLX_ROOT
            CXXFLAGS LDFLAGS)
  unset(ENV{${env}})
endforeach()

set(consumer_src "${COLLX_SOURCE_DIR}/tests/package/${MODE}")
set(build_dir "${WORK_DIR}/build")
set(prefix "${WORK_DIR}/prefix")

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

function(run_step what)
  message(STATUS "[package.${MODE}] ${what}: ${ARGN}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message("${out}")
    message(FATAL_ERROR "[package.${MODE}] ${what} failed (exit ${rc})")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

set(config_args "")
set(build_config_args "")
set(build_type "${CONFIG}")
if(build_type STREQUAL "")
  set(build_type Release)
endif()
list(APPEND config_args "-DCMAKE_BUILD_TYPE=${build_type}")
if(GENERATOR MATCHES "Multi-Config|Visual Studio|Xcode")
  set(build_config_args --config "${build_type}")
endif()
if(MAKE_PROGRAM)
  list(APPEND config_args "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}")
endif()
if(CXX_COMPILER)
  list(APPEND config_args "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}")
endif()
list(APPEND config_args
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
  -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF)

if(MODE STREQUAL "find_package")
  run_step("install" "${CMAKE_COMMAND}" --install "${COLLX_BINARY_DIR}" --prefix "${prefix}"
           --component collx_development ${build_config_args})

  # The installed package must be relocatable: no path of the source tree,
  # the build tree or the build machine's CUDA toolkit may be baked in.
  file(GLOB_RECURSE installed_cmake "${prefix}/*.cmake")
  if(NOT installed_cmake)
    message(FATAL_ERROR "[package.${MODE}] no CMake package files were installed under ${prefix}")
  endif()
  foreach(f IN LISTS installed_cmake)
    file(READ "${f}" text)
    foreach(path IN ITEMS "${COLLX_SOURCE_DIR}" "${COLLX_BINARY_DIR}" "${LIBCUDACXX_INCLUDE_DIR}")
      if(NOT path STREQUAL "")
        string(FIND "${text}" "${path}" pos)
        if(NOT pos EQUAL -1)
          message(FATAL_ERROR "[package.${MODE}] ${f} contains the absolute path ${path}")
        endif()
      endif()
    endforeach()
  endforeach()
  if(NOT EXISTS "${prefix}/include/collx/config.hpp")
    message(FATAL_ERROR "[package.${MODE}] headers were not installed to ${prefix}/include/collx")
  endif()

  list(APPEND config_args "-DCMAKE_PREFIX_PATH=${prefix}")
else()
  list(APPEND config_args "-DCOLLX_SOURCE_DIR=${COLLX_SOURCE_DIR}")
endif()

run_step("configure" "${CMAKE_COMMAND}" -S "${consumer_src}" -B "${build_dir}" -G "${GENERATOR}" ${config_args})

if(MODE STREQUAL "find_package")
  # The package must have come from the test prefix, not from elsewhere.
  file(STRINGS "${build_dir}/CMakeCache.txt" collx_dir_line REGEX "^collx_DIR:")
  string(REGEX REPLACE "^collx_DIR:[A-Z]+=" "" found_dir "${collx_dir_line}")
  file(REAL_PATH "${prefix}" real_prefix)
  file(REAL_PATH "${found_dir}" real_found)
  string(FIND "${real_found}" "${real_prefix}/" pos)
  if(NOT pos EQUAL 0)
    message(FATAL_ERROR "[package.${MODE}] collx was found in '${found_dir}', not under ${prefix}")
  endif()
endif()

run_step("build" "${CMAKE_COMMAND}" --build "${build_dir}" ${build_config_args})

# consumer: header-only (collx::collx); consumer_compiled: collx::compiled.
foreach(name consumer consumer_compiled)
  set(exe "${build_dir}/${name}")
  if(NOT EXISTS "${exe}" AND EXISTS "${build_dir}/${build_type}/${name}")
    set(exe "${build_dir}/${build_type}/${name}")
  endif()
  run_step("run" "${exe}")
  message(STATUS "[package.${MODE}] ${name} says: ${step_output}")
  if(EXPECTED_VERSION AND NOT step_output MATCHES "^collx ${EXPECTED_VERSION} ")
    message(FATAL_ERROR "[package.${MODE}] unexpected ${name} output: ${step_output}")
  endif()
  if(LIBCUDACXX_INCLUDE_DIR AND NOT step_output MATCHES "libcudacxx=1")
    message(FATAL_ERROR "[package.${MODE}] libcu++ was found at build time (${LIBCUDACXX_INCLUDE_DIR}) "
                        "but the ${name} did not see it")
  endif()
endforeach()
