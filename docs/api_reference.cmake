# The test api_reference (cmake -P): runs doxygen over the public headers
# with the configuration DOXYFILE, from the repository root SOURCE, and fails
# - on any warning doxygen gives (an undocumented macro, type, field or
#   function, a malformed comment: docs/Doxyfile makes them errors), and
# - on any enumerator without a comment, which doxygen does not warn about;
#   those are found in its XML output, under XML_DIR.
foreach(var DOXYGEN DOXYFILE SOURCE XML_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "api_reference: ${var} is not set")
  endif()
endforeach()

file(REMOVE_RECURSE ${XML_DIR})
execute_process(COMMAND ${DOXYGEN} ${DOXYFILE} WORKING_DIRECTORY ${SOURCE}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT "${err}" STREQUAL "")
  message(FATAL_ERROR "api_reference: doxygen failed (exit ${rc}):\n${out}${err}")
endif()

file(GLOB xml_files ${XML_DIR}/*.xml)
if(NOT xml_files)
  message(FATAL_ERROR "api_reference: doxygen wrote no XML into ${XML_DIR}")
endif()
set(undocumented "")
set(enumerators 0)
foreach(xml IN LISTS xml_files)
  file(READ ${xml} text)
  # Split at each enumerator; characters that mean something to CMake
  # lists are replaced first.
  string(REPLACE ";" "<semicolon/>" text "${text}")
  string(REPLACE "[" "<lbracket/>" text "${text}")
  string(REPLACE "]" "<rbracket/>" text "${text}")
  string(REPLACE "<enumvalue " ";<enumvalue " pieces "${text}")
  list(POP_FRONT pieces)
  foreach(piece IN LISTS pieces)
    math(EXPR enumerators "${enumerators} + 1")
    string(FIND "${piece}" "</enumvalue>" end)
    string(SUBSTRING "${piece}" 0 ${end} enumvalue)
    if(NOT enumvalue MATCHES "<para>")
      string(REGEX MATCH "<name>([^<]*)</name>" name "${enumvalue}")
      get_filename_component(file ${xml} NAME)
      list(APPEND undocumented "${CMAKE_MATCH_1} (${file})")
    endif()
  endforeach()
endforeach()
if(enumerators EQUAL 0)
  message(FATAL_ERROR "api_reference: no enumerator found in ${XML_DIR}")
endif()
if(undocumented)
  list(JOIN undocumented "\n  " list)
  message(FATAL_ERROR "api_reference: enumerators without a comment:\n  ${list}")
endif()
message(STATUS "api_reference: every public symbol is documented (${enumerators} enumerators)")
