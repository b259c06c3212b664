# The subprocess protocol's parts (docs/plugins.md, "Subprocess protocol"): the frame codec and the child process
# it talks to. std, POSIX, nlohmann-json and fmt only; the plugin module's transports build on it.
add_library(fusediff_plugin_protocol ${CMAKE_CURRENT_LIST_DIR}/src/frame.cpp ${CMAKE_CURRENT_LIST_DIR}/src/child_process.cpp)
add_library(fusediff::plugin_protocol ALIAS fusediff_plugin_protocol)
target_include_directories(fusediff_plugin_protocol PUBLIC ${CMAKE_CURRENT_LIST_DIR}/include)
target_compile_features(fusediff_plugin_protocol PUBLIC cxx_std_20)
target_link_libraries(fusediff_plugin_protocol PUBLIC fusediff::model nlohmann_json::nlohmann_json PRIVATE fmt::fmt)
