# Installs the build into a scratch prefix, then builds and runs a consumer
# program against it three ways: find_package with the shared library, with
# the static one, and pkg-config with a plain compiler command.
set(prefix "${BUILD}/install-test")
file(REMOVE_RECURSE "${prefix}" "${BUILD}/consumer-shared" "${BUILD}/consumer-static")

include("${CMAKE_CURRENT_LIST_DIR}/run_checked.cmake")

run(${CMAKE_COMMAND} --install "${BUILD}" --prefix "${prefix}")
foreach(f include/ordo/ordo.h include/ordo/version.h lib/libordo.a lib/pkgconfig/ordo.pc
          lib/cmake/ordo/ordoConfig.cmake)
  if(NOT EXISTS "${prefix}/${f}")
    message(FATAL_ERROR "install lacks ${f}")
  endif()
endforeach()

foreach(kind shared static)
  set(dir "${BUILD}/consumer-${kind}")
  set(static_flag OFF)
  if(kind STREQUAL "static")
    set(static_flag ON)
  endif()
  run(${CMAKE_COMMAND} -S "${SOURCE}/tests/consumer" -B "${dir}" "-DCMAKE_PREFIX_PATH=${prefix}"
      -DORDO_USE_STATIC=${static_flag} -DCMAKE_C_COMPILER=${CC})
  run(${CMAKE_COMMAND} --build "${dir}")
  run(${CMAKE_COMMAND} -E env "LD_LIBRARY_PATH=${prefix}/lib" "${dir}/consumer")
  if(NOT out MATCHES "works")
    message(FATAL_ERROR "the ${kind} consumer printed: ${out}")
  endif()
endforeach()

# pkg-config and a plain compiler command, as a Makefile would.
run(${CMAKE_COMMAND} -E env "PKG_CONFIG_PATH=${prefix}/lib/pkgconfig" pkg-config --cflags --libs
    ordo)
string(STRIP "${out}" flags)
separate_arguments(flags UNIX_COMMAND "${flags}")
run(${CC} "${SOURCE}/tests/consumer/consumer.c" -o "${BUILD}/consumer-pkgconfig" ${flags} -pthread)
run(${CMAKE_COMMAND} -E env "LD_LIBRARY_PATH=${prefix}/lib" "${BUILD}/consumer-pkgconfig")
if(NOT out MATCHES "works")
  message(FATAL_ERROR "the pkg-config consumer printed: ${out}")
endif()
message(STATUS "installed tree consumed through find_package (shared, static) and pkg-config")

# Only the public API is exported: every defined dynamic symbol is ordo_*.
find_program(NM nm REQUIRED)
file(GLOB shared_libs "${prefix}/lib/libordo.so.*.*.*")
list(GET shared_libs 0 shared_lib)
run(${NM} -D --defined-only "${shared_lib}")
string(REPLACE "\n" ";" symbols "${out}")
foreach(line ${symbols})
  if(line MATCHES " [TDBR] ([A-Za-z_][A-Za-z0-9_]*)$")
    if(NOT CMAKE_MATCH_1 MATCHES "^ordo_")
      message(FATAL_ERROR "libordo.so exports ${CMAKE_MATCH_1}, which is not public API")
    endif()
  endif()
endforeach()
