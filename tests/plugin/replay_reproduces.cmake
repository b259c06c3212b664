# The wrong plugin's shrunk counterexample replays through the plugin: `fusediff run` prints a replay line of the
# shrunk draw (one output element), and `fusediff replay` of that line shows the same nonzero error, ran by the plugin.
# Usage: cmake -DFUSEDIFF=path -DPLUGIN=path -P replay_reproduces.cmake
execute_process(COMMAND ${FUSEDIFF} run --fused plugin:${PLUGIN} --samples 2000 --activation relu
                RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT code EQUAL 1)
  message(FATAL_ERROR "run: exit ${code}, expected 1\n${out}\n${err}")
endif()
if(NOT out MATCHES "shrunk [^\n]*: 1 output element [^\n]*e=([-+][0-9]+) [^\n]*\n  fusediff replay '([^']+)'")
  message(FATAL_ERROR "run: no shrunk counterexample with a replay line\n${out}")
endif()
set(error "${CMAKE_MATCH_1}")
set(line "${CMAKE_MATCH_2}")
if(NOT line MATCHES "^fusediff-replay/2;.*;plugin_name=wrong_scale;plugin_version=1.0.0;")
  message(FATAL_ERROR "the replay line does not name the plugin: ${line}")
endif()
execute_process(COMMAND ${FUSEDIFF} replay "${line}" RESULT_VARIABLE code OUTPUT_VARIABLE replayed ERROR_VARIABLE err)
if(NOT code EQUAL 0)
  message(FATAL_ERROR "replay: exit ${code}\n${replayed}\n${err}")
endif()
if(NOT replayed MATCHES "error ${error} LSB" OR NOT replayed MATCHES "library +wrong_scale_plugin.c")
  message(FATAL_ERROR "replay does not reproduce e=${error} through the plugin:\n${replayed}")
endif()
message(STATUS "run: e=${error}; replay reproduces it:\n${replayed}")
