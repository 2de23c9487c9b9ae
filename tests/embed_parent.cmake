# Builds tests/parent, a project that embeds ordo, both ways (add_subdirectory
# and FetchContent), and runs its program. SOURCE: ordo's tree; BUILD: a
# scratch directory; CC: the compiler.
include("${CMAKE_CURRENT_LIST_DIR}/run_checked.cmake")

foreach(mode subdirectory fetchcontent)
  set(dir "${BUILD}/parent-${mode}")
  file(REMOVE_RECURSE "${dir}")
  run(${CMAKE_COMMAND} -S "${SOURCE}/tests/parent" -B "${dir}" "-DORDO_SOURCE=${SOURCE}"
      -DPARENT_MODE=${mode} -DORDO_CUDA=OFF -DCMAKE_C_COMPILER=${CC})
  run(${CMAKE_COMMAND} --build "${dir}" --target parent_app --parallel 2)
  run("${dir}/parent_app")
  if(NOT out MATCHES "works")
    message(FATAL_ERROR "the ${mode} parent's program printed: ${out}")
  endif()
  message(STATUS "ordo embedded with ${mode}: built and ran")
endforeach()
