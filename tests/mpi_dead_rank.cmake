# Runs test_mpi_dead_rank under mpirun (MPIEXEC: the launcher and its
# flags, '|'-separated, ending with the rank-count flag; NP: the ranks),
# with the launcher told to let the job go on when a rank dies, and checks
# that every rank but the killed one printed "survived". The launcher's
# own status is left aside: it reports the killed rank.
cmake_minimum_required(VERSION 3.25)
string(REPLACE "|" ";" launcher "${MPIEXEC}")
execute_process(COMMAND ${launcher} ${NP} --mca orte_abort_on_non_zero_status 0 ${PROGRAM}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 100)
string(REGEX MATCHALL "rank [0-9]+: survived" survivors "${out}")
list(LENGTH survivors count)
math(EXPR expected "${NP} - 1")
if(NOT count EQUAL expected)
  message(FATAL_ERROR "${count} of ${expected} ranks survived the killed one "
                      "(launcher exit ${rc}):\n${out}\n${err}")
endif()
message(STATUS "${out}")
