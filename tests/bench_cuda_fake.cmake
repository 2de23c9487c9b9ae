cmake_policy(SET CMP0057 NEW)
# `ordo bench cuda --quick` against the stand-in driver: every CUDA
# benchmark runs (its figures mean nothing there), each line is JSON with
# the device's name, and the host-wake lines carry their CPU cost.
execute_process(COMMAND ${ORDO} bench cuda --quick RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err TIMEOUT 100)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ordo bench cuda exited ${rc}: ${err}")
endif()
string(REPLACE "\n" ";" lines "${out}")
set(seen "")
foreach(line IN LISTS lines)
  if(line STREQUAL "")
    continue()
  endif()
  string(JSON name ERROR_VARIABLE bad GET "${line}" name)
  if(bad)
    message(FATAL_ERROR "not a JSON line: ${line}")
  endif()
  string(JSON impl GET "${line}" impl)
  string(JSON device GET "${line}" device)
  list(APPEND seen "${name}/${impl}")
  if(name STREQUAL "cuda_signal_host_wake")
    string(JSON cpu_pct GET "${line}" cpu_pct)
  endif()
endforeach()
foreach(want cuda_signal_host_wake/cuda_sync_spin cuda_signal_host_wake/seed_ring
             cuda_signal_host_wake/ordo cuda_mem/cuda_async cuda_mem/ordo_pool
             cuda_replay/ordo_tracker cuda_replay/ordo_replay cuda_replay_end_to_end/ordo_replay
             cuda_graph_refresh/cuda_instantiate cuda_graph_refresh/cuda_update
             cuda_graph_refresh/ordo_refresh)
  if(NOT want IN_LIST seen)
    message(FATAL_ERROR "no line for ${want}: ${out}\n${err}")
  endif()
endforeach()
