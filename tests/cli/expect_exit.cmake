# Runs COMMAND (a ;-list) and fails unless it exits with EXPECTED and, when given, its output matches PATTERN; prints
# the output either way.
# Usage: cmake -DEXPECTED=1 -DPATTERN=regex -DCOMMAND="a;b;c" -P expect_exit.cmake
# The project's own runs are never sharded by a surrounding test runner's variables.
foreach(variable GTEST_TOTAL_SHARDS GTEST_SHARD_INDEX TEST_TOTAL_SHARDS TEST_SHARD_INDEX TEST_SHARD_STATUS_FILE
                 JOB_COMPLETION_INDEX FUSEDIFF_SHARD_COUNT SLURM_ARRAY_TASK_ID SLURM_ARRAY_TASK_MIN SLURM_ARRAY_TASK_COUNT
                 SLURM_ARRAY_TASK_STEP)
  unset(ENV{${variable}})
endforeach()
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT code STREQUAL EXPECTED)
  message(FATAL_ERROR "exit code ${code}, expected ${EXPECTED}\nstdout:\n${out}\nstderr:\n${err}")
endif()
if(DEFINED PATTERN AND NOT "${out}${err}" MATCHES "${PATTERN}")
  message(FATAL_ERROR "output does not match '${PATTERN}'\nstdout:\n${out}\nstderr:\n${err}")
endif()
# The output is shown either way, so that a test's SKIP_REGULAR_EXPRESSION (e.g. the ISA oneDNN dispatched to) can
# read it.
message(STATUS "exit ${code} as expected\nstdout:\n${out}\nstderr:\n${err}")
