# The plugin backend (fused/plugin, docs/plugins.md): the ABI header compiled as C99 and C++17, the plugin_tests suite
# (the case's encodings, the version rules against skewed plugins, batching, replay facts), and the example plugins
# (examples/plugins) through the CLI: the right one passes, the wrong one fails shrunk to one element, and its replay
# line reproduces the failure through the plugin.
set(plugin_include ${PROJECT_SOURCE_DIR}/fused/plugin/include)
add_test(NAME plugin.header_compiles_as_c99
         COMMAND ${CMAKE_C_COMPILER} -std=c99 -Wall -Wextra -Werror -pedantic -fsyntax-only -I${plugin_include}
                 ${CMAKE_CURRENT_SOURCE_DIR}/plugin/header_use.c)
add_test(NAME plugin.header_compiles_as_cxx17
         COMMAND ${CMAKE_CXX_COMPILER} -std=c++17 -Wall -Wextra -Werror -pedantic -fsyntax-only -x c++ -I${plugin_include}
                 ${CMAKE_CURRENT_SOURCE_DIR}/plugin/header_use.c)

# Plugins that break the version rules, one per define (skew_plugin.c).
foreach(skew MAJOR SMALL_TABLE NO_ENTRY REFUSE)
  string(TOLOWER ${skew} lower)
  add_library(skew_${lower}_plugin MODULE ${CMAKE_CURRENT_SOURCE_DIR}/plugin/skew_plugin.c)
  target_include_directories(skew_${lower}_plugin PRIVATE ${plugin_include})
  target_compile_definitions(skew_${lower}_plugin PRIVATE SKEW_${skew}=1)
  set_target_properties(skew_${lower}_plugin PROPERTIES C_STANDARD 99 C_VISIBILITY_PRESET hidden)
endforeach()

# A plugin that asks for one instance per thread and names the instance in each draw's implementation.
add_library(threads_plugin MODULE ${CMAKE_CURRENT_SOURCE_DIR}/plugin/threads_plugin.c)
target_include_directories(threads_plugin PRIVATE ${plugin_include})
set_target_properties(threads_plugin PROPERTIES C_STANDARD 99 C_VISIBILITY_PRESET hidden)

fusediff_add_test_suite(plugin_tests plugin fusediff::fused_plugin fusediff::driver nlohmann_json::nlohmann_json)
add_dependencies(plugin_tests conv_lut_plugin wrong_scale_plugin skew_major_plugin skew_small_table_plugin
                 skew_no_entry_plugin skew_refuse_plugin threads_plugin)
target_compile_definitions(plugin_tests PRIVATE
  CONV_LUT_PLUGIN="$<TARGET_FILE:conv_lut_plugin>" WRONG_SCALE_PLUGIN="$<TARGET_FILE:wrong_scale_plugin>"
  SKEW_MAJOR_PLUGIN="$<TARGET_FILE:skew_major_plugin>" SKEW_SMALL_TABLE_PLUGIN="$<TARGET_FILE:skew_small_table_plugin>"
  SKEW_NO_ENTRY_PLUGIN="$<TARGET_FILE:skew_no_entry_plugin>" SKEW_REFUSE_PLUGIN="$<TARGET_FILE:skew_refuse_plugin>"
  THREADS_PLUGIN="$<TARGET_FILE:threads_plugin>")

# Through the CLI, on the default suite's cases: the right plugin passes every case it claims at tolerance 0 (the
# others unsupported with the reason), the wrong one fails with a one-element counterexample.
fusediff_add_cli_test(plugin_conv_lut_passes 0 " 0 failed.*unsupported"
                      run --fused plugin:$<TARGET_FILE:conv_lut_plugin> --samples 2000)
fusediff_add_cli_test(plugin_conv_lut_lists_unclaimed_features 0 "does not claim feature 'table:lut_interp'"
                      run --fused plugin:$<TARGET_FILE:conv_lut_plugin> --samples 500 --activation tanh --all)
fusediff_add_cli_test(plugin_wrong_scale_fails_shrunk 1 "shrunk [^\n]*: 1 output element [^\n]*\n  fusediff replay '"
                      run --fused plugin:$<TARGET_FILE:wrong_scale_plugin> --samples 2000 --activation relu)
fusediff_add_cli_test(plugin_missing_file_exits_2 2 "cannot load" run --fused plugin:/nonexistent/libnothing.so)
fusediff_add_cli_test(plugin_bad_word_exits_2 2 "option 'x' \\(expected key=value\\)"
                      run --fused plugin:$<TARGET_FILE:conv_lut_plugin>,x)
add_test(NAME cli.plugin_wrong_scale_replay_reproduces
         COMMAND ${CMAKE_COMMAND} -DFUSEDIFF=$<TARGET_FILE:fusediff> -DPLUGIN=$<TARGET_FILE:wrong_scale_plugin>
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/plugin/replay_reproduces.cmake)
fusediff_add_cli_test(plugin_mutants_refused_exits_2 2 "runs as built"
                      mutants --fused plugin:$<TARGET_FILE:conv_lut_plugin> --seeds 1 --budget 100)
