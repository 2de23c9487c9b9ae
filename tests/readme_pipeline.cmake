# The README's "A first pipeline" program is examples/pipeline.c, which
# runs as a test: the two must not drift apart.
file(READ "${SOURCE}/README.md" readme)
file(READ "${SOURCE}/examples/pipeline.c" example)
string(FIND "${readme}" "## A first pipeline" section)
if(section EQUAL -1)
  message(FATAL_ERROR "README.md has no section \"A first pipeline\"")
endif()
string(SUBSTRING "${readme}" ${section} -1 readme)
string(FIND "${readme}" "```c\n" open)
math(EXPR open "${open} + 5")
string(SUBSTRING "${readme}" ${open} -1 readme)
string(FIND "${readme}" "```" close)
string(SUBSTRING "${readme}" 0 ${close} program)
if(NOT program STREQUAL example)
  message(FATAL_ERROR "README.md's first pipeline differs from examples/pipeline.c: "
                      "copy the example into the README")
endif()
