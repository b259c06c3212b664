# FindXNNPACK: Debian's libxnnpack-dev ships /usr/include/xnnpack.h and libXNNPACK.so only (no CMake or pkg-config
# file). Provides XNNPACK::XNNPACK and XNNPACK_VERSION (the Debian package version, from dpkg where available).
# xnnpack.h includes <pthreadpool.h>, which libxnnpack-dev does not pull in: the backend vendors the one typedef it
# needs (fused/xnnpack/private/pthreadpool.h). libcpuinfo and libpthreadpool are runtime dependencies of the
# shared library only.
find_path(XNNPACK_INCLUDE_DIR xnnpack.h)
find_library(XNNPACK_LIBRARY XNNPACK)
set(XNNPACK_VERSION "unknown")
find_program(XNNPACK_DPKG_QUERY dpkg-query)
if(XNNPACK_DPKG_QUERY)
  execute_process(COMMAND ${XNNPACK_DPKG_QUERY} -W "-f=\${Version}" libxnnpack-dev OUTPUT_VARIABLE _xnnpack_version
                  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(_xnnpack_version)
    set(XNNPACK_VERSION "${_xnnpack_version}")
  endif()
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(XNNPACK REQUIRED_VARS XNNPACK_INCLUDE_DIR XNNPACK_LIBRARY)
if(XNNPACK_FOUND AND NOT TARGET XNNPACK::XNNPACK)
  add_library(XNNPACK::XNNPACK UNKNOWN IMPORTED)
  set_target_properties(XNNPACK::XNNPACK PROPERTIES
    IMPORTED_LOCATION "${XNNPACK_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${XNNPACK_INCLUDE_DIR}")
endif()
