# `ordo demo --backend cuda` against the stand-in driver (LD_LIBRARY_PATH
# names it, see CMakeLists.txt): the CUDA path of the demo end to end (pinned
# host memory, copies, kernel arguments and launch shapes, device memory
# from the pool, the tracker's ordering on device streams, the copy back),
# with the driver emulating the demo's kernels as demo_kernels.h describes
# them. Sizes that are not multiples of the tiles and columns beyond one
# reduction block's width check the bounds and the grids.
# Without nvcc at configure time the kernels are missing: the demo must
# refuse, saying so.
if(NOT KERNELS_BUILT)
  execute_process(COMMAND ${ORDO} demo --backend cuda --quiet
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 2 OR NOT err MATCHES "kernels were not built")
    message(FATAL_ERROR "without kernels, 'ordo demo --backend cuda' exited ${rc}: ${err}")
  endif()
  message(STATUS "refused as expected: ${err}")
  return()
endif()

function(demo_ok)
  execute_process(COMMAND ${ORDO} demo --backend cuda --quiet ${ARGV}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "'ordo demo --backend cuda ${ARGV}' exited ${rc}:\n${out}\n${err}")
  endif()
  foreach(expected "on cuda:0, 3 streams \\(copies and kernels on the device\\)"
                   "result      verified"
                   "waits inserted" "device time between timing events")
    if(NOT out MATCHES "${expected}")
      message(FATAL_ERROR "'ordo demo --backend cuda ${ARGV}' printed no '${expected}':\n${out}")
    endif()
  endforeach()
  # The stages are ordered across streams by the tracker: waits were inserted.
  if(NOT out MATCHES "submissions, [1-9][0-9]* waits inserted")
    message(FATAL_ERROR "no waits were inserted:\n${out}")
  endif()
  message(STATUS "ordo demo --backend cuda ${ARGV}:\n${out}")
endfunction()

demo_ok(--chunks 12 --rows 16 --size 64)
demo_ok(--chunks 7 --rows 37 --size 50)
demo_ok(--chunks 3 --rows 5 --size 300)
