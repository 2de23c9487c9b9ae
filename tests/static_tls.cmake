# libordo.so's thread-local block stays small. Some of its thread-local
# variables are initial-exec (read on the fastest paths without a call), so
# the whole block must fit in the static TLS room that glibc keeps for
# libraries loaded later with dlopen (a fixed surplus, shared with every
# library loaded that way; the tunable glibc.rtld.optional_static_tls, 512
# bytes by default, is what it promises them). A Python program loading
# ordo with ctypes failed with "cannot allocate memory in static TLS block"
# when the block was 1.9 KiB (a version that kept a 256-byte message there
# too; 1660 bytes went on loading until it was brought down to 140). Buffers
# belong on the heap, reached
# through one thread-local pointer. LIBRARY: the shared library; LIMIT: the
# most bytes the block may take.
find_program(READELF readelf REQUIRED)
execute_process(COMMAND ${READELF} -lW "${LIBRARY}" RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "readelf -l ${LIBRARY} exited ${rc}: ${err}")
endif()
# TLS  Offset VirtAddr PhysAddr FileSiz MemSiz Flg Align
if(NOT out MATCHES "\n[ \t]*TLS[ \t]+0x[0-9a-f]+[ \t]+0x[0-9a-f]+[ \t]+0x[0-9a-f]+[ \t]+0x[0-9a-f]+[ \t]+0x([0-9a-f]+)")
  # Either there is none, or readelf printed it in a form this script
  # does not know: then the static TLS flag tells them apart.
  execute_process(COMMAND ${READELF} -dW "${LIBRARY}" OUTPUT_VARIABLE dynamic)
  if(dynamic MATCHES "STATIC_TLS")
    message(FATAL_ERROR "${LIBRARY} needs static TLS, but no TLS segment was read from:\n${out}")
  endif()
  message(STATUS "${LIBRARY} has no thread-local block")
  return()
endif()
math(EXPR bytes "0x${CMAKE_MATCH_1}")
if(bytes GREATER LIMIT)
  message(FATAL_ERROR "libordo's thread-local block is ${bytes} bytes, more than ${LIMIT}: "
                      "move buffers out of thread-local storage (see this script's comment)")
endif()
message(STATUS "libordo's thread-local block: ${bytes} bytes (at most ${LIMIT})")
