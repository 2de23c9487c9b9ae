# run(COMMAND...): runs a command from a CMake script test and fails the
# test, with the command's output, unless it exits 0; its standard output
# is left in `out` in the caller's scope.
function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "'${ARGV}' exited ${rc}:\n${out}\n${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()
