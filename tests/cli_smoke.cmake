# Runs the ordo command's subcommands and checks their output's shape.
include("${CMAKE_CURRENT_LIST_DIR}/run_checked.cmake")

run(${ORDO} --help)
if(NOT out MATCHES "bench")
  message(FATAL_ERROR "--help does not mention bench")
endif()
run(${ORDO} info)
if(NOT out MATCHES "ordo [0-9]+\\.[0-9]+\\.[0-9]+")
  message(FATAL_ERROR "info does not print a version: ${out}")
endif()

execute_process(COMMAND ${ORDO} no-such-command RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
if(rc EQUAL 0)
  message(FATAL_ERROR "an unknown command succeeded")
endif()

# Bad input: status 2 and a message naming what is wrong, never a crash
# or an empty success.
function(run_refused expect)
  list(REMOVE_AT ARGV 0)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                  TIMEOUT 60)
  if(NOT rc EQUAL 2)
    message(FATAL_ERROR "'${ARGV}' exited ${rc}, not 2: ${err}")
  endif()
  if(NOT err MATCHES "${expect}")
    message(FATAL_ERROR "'${ARGV}' did not say '${expect}': ${err}")
  endif()
endfunction()
run_refused("no benchmark name contains 'no-such-benchmark'" ${ORDO} bench no-such-benchmark)
run_refused("'--trace' needs a FILE" ${ORDO} bench --trace)
run_refused("unknown option '--bogus'" ${ORDO} bench --bogus)
run_refused("unknown option '--bogus'" ${ORDO} demo --bogus)
run_refused("unknown option '--bogus'" ${ORDO} demo --bogus 1)
run_refused("'--chunks' needs a value" ${ORDO} demo --chunks)
run_refused("'--rows' needs a number from 1 to 65536, not 'x'" ${ORDO} demo --rows x)
run_refused("takes no arguments" ${ORDO} info extra)
# An option's value is not the next option; no sign or blank in a count
# (strtoull took "-1" as a huge number, wrapped); a trace that cannot be
# written is refused before the run, not after it.
run_refused("'--trace' needs a FILE" ${ORDO} bench --trace --quick signal_set_nowait)
run_refused("'--trace' needs a value" ${ORDO} demo --trace --quiet)
run_refused("'--chunks' needs a number from 1 to 1048576, not '-18446744073709551615'" ${ORDO}
            demo --chunks -18446744073709551615 --rows 1 --size 1 --quiet)
run_refused("'--chunks' needs a number from 1 to 1048576, not '\\+5'" ${ORDO} demo --chunks +5
            --quiet)
run_refused("cannot write the trace" ${ORDO} demo --trace /nonexistent-dir/x.json --quiet)
run_refused("cannot write the trace" ${ORDO} bench --trace /nonexistent-dir/x.json signal)
# An empty FILTER is not "every benchmark"; a run that measured nothing
# (trace_overhead cannot run under --trace) is not a success.
# (Called directly: a function's argument list drops an empty string.)
execute_process(COMMAND ${ORDO} bench "" RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(NOT rc EQUAL 2 OR NOT err MATCHES "FILTER is empty")
  message(FATAL_ERROR "'ordo bench \"\"' exited ${rc}, not 2: ${err}")
endif()
run_refused("nothing was measured" ${ORDO} bench --quick trace_overhead --trace
            "${CMAKE_CURRENT_BINARY_DIR}/cli-smoke-skipped.json")
# A benchmark whose one line has fields of its own counts as measured.
run(${ORDO} bench --quick mem_fragmentation)
run(${ORDO} demo --help)
if(NOT out MATCHES "usage: ordo")
  message(FATAL_ERROR "demo --help does not print the usage: ${out}")
endif()

# The main job, small, traced; its trace validated.
set(trace "${CMAKE_CURRENT_BINARY_DIR}/cli-smoke-demo.json")
run(${ORDO} demo --chunks 12 --rows 16 --size 64 --quiet --trace "${trace}")
if(NOT out MATCHES "result      verified")
  message(FATAL_ERROR "demo did not verify its result: ${out}")
endif()
run(${TRACE_CHECK} "${trace}")
execute_process(COMMAND ${ORDO} demo --chunks 0 RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
if(rc EQUAL 0)
  message(FATAL_ERROR "demo accepted --chunks 0")
endif()
# A run that fails before it writes its trace leaves an existing file as it
# was (the writability check does not truncate it).
file(WRITE "${trace}" "kept")
execute_process(COMMAND ${ORDO} bench --trace "${trace}" no-such-benchmark RESULT_VARIABLE rc
                OUTPUT_QUIET ERROR_QUIET)
file(READ "${trace}" kept)
if(NOT rc EQUAL 2 OR NOT kept STREQUAL "kept")
  message(FATAL_ERROR "a refused run exited ${rc} and left '${kept}' in its trace file")
endif()
# A trace goes to a regular file: a FIFO would block the run's end.
set(fifo "${CMAKE_CURRENT_BINARY_DIR}/cli-smoke-fifo")
file(REMOVE "${fifo}")
execute_process(COMMAND mkfifo "${fifo}" RESULT_VARIABLE rc)
if(rc EQUAL 0)
  run_refused("not a regular file" ${ORDO} demo --quiet --trace "${fifo}")
  file(REMOVE "${fifo}")
endif()
# Output that cannot be written is a failure, not a silent success.
if(EXISTS /dev/full)
  execute_process(COMMAND ${ORDO} info OUTPUT_FILE /dev/full RESULT_VARIABLE rc
                  ERROR_VARIABLE err)
  if(rc EQUAL 0 OR NOT err MATCHES "cannot write the output")
    message(FATAL_ERROR "'ordo info > /dev/full' exited ${rc}: ${err}")
  endif()
endif()
execute_process(COMMAND ${ORDO} demo --backend nosuch RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
if(NOT rc EQUAL 2)
  message(FATAL_ERROR "demo with an unknown backend exited ${rc}, not 2")
endif()

run(${ORDO} bench --quick)
string(REPLACE "\n" ";" lines "${out}")
set(count 0)
foreach(line ${lines})
  if(line STREQUAL "")
    continue()
  endif()
  # Timing lines carry median_ns, p90_ns and iters; report lines (a
  # verification count, a ratio of sizes, a trace's start and stop times)
  # carry unsafe, ratio or start_ms instead.
  set(keys name impl median_ns p90_ns iters)
  string(JSON value ERROR_VARIABLE unsafe_error GET "${line}" unsafe)
  string(JSON value ERROR_VARIABLE ratio_error GET "${line}" ratio)
  string(JSON value ERROR_VARIABLE start_error GET "${line}" start_ms)
  if(NOT unsafe_error OR NOT ratio_error OR NOT start_error)
    set(keys name impl)
  endif()
  foreach(key ${keys})
    string(JSON value ERROR_VARIABLE json_error GET "${line}" ${key})
    if(json_error)
      message(FATAL_ERROR "bench line lacks '${key}': ${line}")
    endif()
  endforeach()
  math(EXPR count "${count} + 1")
endforeach()
if(count LESS 10)
  message(FATAL_ERROR "expected at least 10 bench lines, got ${count}")
endif()
message(STATUS "${count} bench lines, all well-formed")
