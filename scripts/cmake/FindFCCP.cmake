# FindFCCP: Fast C++ CSV Parser (Debian libfccp-dev ships one header, libfccp/csv.h, and no CMake config).
# Provides FCCP::FCCP.
find_path(FCCP_INCLUDE_DIR libfccp/csv.h)
find_package(Threads REQUIRED)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(FCCP REQUIRED_VARS FCCP_INCLUDE_DIR)
if(FCCP_FOUND AND NOT TARGET FCCP::FCCP)
  add_library(FCCP::FCCP INTERFACE IMPORTED)
  set_target_properties(FCCP::FCCP PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${FCCP_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES Threads::Threads)
endif()
