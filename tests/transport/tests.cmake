# The subprocess protocol (docs/plugins.md, "Subprocess protocol", "Isolation", "Offline mode"): frames, the child
# supervisor and the lost draws' verdicts (transport_tests), then the example plugins through the real binary: the
# Python plugin as a subprocess at tolerance 0, the crashing plugin isolated and as a C child (crashed, timeout; the
# other cases and every output whole), and the offline round trip of the C example's default suite.
fusediff_add_test_suite(transport_tests transport fusediff::plugin_protocol fusediff::reports)

set(transport_dir ${CMAKE_CURRENT_SOURCE_DIR}/transport)
fusediff_add_cli_test(transport_exec_python_passes 0 " 0 failed"
                      run --fused "exec:/usr/bin/python3 ${PROJECT_SOURCE_DIR}/examples/plugins/conv_lut_plugin.py"
                      --max-abs-lsb 0 --samples 2000)
fusediff_add_cli_test(transport_exec_quote_exits_2 2 "holds ';' or a quote"
                      run --fused "exec:python3 'x.py" --samples 100)
fusediff_add_cli_test(transport_exec_missing_program_exits_2 2 "cannot start '/nonexistent/plugin'"
                      run --fused exec:/nonexistent/plugin --samples 100)
fusediff_add_cli_test(transport_isolate_needs_a_plugin_word 2 "--isolate: runs a plugin:PATH.so"
                      run --fused lut --isolate)

# The crashing plugin, each kind of loss, in a child: in process with --isolate, and as an exec: C child.
foreach(kind segv abort loop)
  set(verdict crashed)
  if(kind STREQUAL "loop")
    set(verdict timeout)
  endif()
  add_test(NAME transport.isolate_crash_${kind}
           COMMAND bash ${transport_dir}/lost_draws_run_test.sh $<TARGET_FILE:fusediff>
                   ${CMAKE_CURRENT_BINARY_DIR}/transport_isolate_${kind} ${verdict}
                   plugin:$<TARGET_FILE:crash_plugin>,crash=${kind},every=3 --isolate --plugin-timeout 1
                   --activation relu --samples 3000)
  set_tests_properties(transport.isolate_crash_${kind} PROPERTIES TIMEOUT 300
                       PASS_REGULAR_EXPRESSION "lost draws run: as expected")
endforeach()
# A shared plugin that takes one draw a call, on two threads: each thread gets its own child (one child answers one
# request at a time), and its lost draws are still crashed, never unsupported or another draw's answer.
add_test(NAME transport.isolate_crash_one_draw_a_call
         COMMAND bash ${transport_dir}/lost_draws_run_test.sh $<TARGET_FILE:fusediff>
                 ${CMAKE_CURRENT_BINARY_DIR}/transport_isolate_one_draw crashed
                 plugin:$<TARGET_FILE:crash_plugin>,crash=segv,every=3,batch=1 --isolate --plugin-timeout 5
                 --threads 2 --activation relu --samples 3000)
set_tests_properties(transport.isolate_crash_one_draw_a_call PROPERTIES TIMEOUT 300
                     PASS_REGULAR_EXPRESSION "lost draws run: as expected")
add_test(NAME transport.exec_c_child_crashes
         COMMAND bash ${transport_dir}/lost_draws_run_test.sh $<TARGET_FILE:fusediff>
                 ${CMAKE_CURRENT_BINARY_DIR}/transport_exec_crash crashed
                 "exec:$<TARGET_FILE:fusediff-full> plugin-host $<TARGET_FILE:crash_plugin>,crash=all,every=3"
                 --plugin-timeout 2 --activation hard_swish --samples 3000)
set_tests_properties(transport.exec_c_child_crashes PROPERTIES TIMEOUT 300
                     PASS_REGULAR_EXPRESSION "lost draws run: as expected")

add_test(NAME transport.offline_roundtrip
         COMMAND bash ${transport_dir}/offline_roundtrip_test.sh $<TARGET_FILE:fusediff> $<TARGET_FILE:conv_lut_plugin>
                 ${CMAKE_CURRENT_BINARY_DIR}/transport_offline --samples 2000)
set_tests_properties(transport.offline_roundtrip PROPERTIES TIMEOUT 300
                     PASS_REGULAR_EXPRESSION "offline round trip: .* as expected")
