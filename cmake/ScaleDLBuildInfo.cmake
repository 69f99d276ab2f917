# Bakes the source commit into the binary (build_info.hpp): a campaign's environment
# row records the commit of the binary that measured, not of whatever directory it
# was started in. ScaleDLBuildInfoWrite.cmake writes generated/build_info.cpp once
# here (so it exists) and again at every build (target scaledl_build_info), so the
# commit and its "-dirty" mark follow the code that was compiled.
set(_scaledl_bi_args -DSOURCE_DIR=${CMAKE_SOURCE_DIR} -DIN=${CMAKE_CURRENT_LIST_DIR}/build_info.cpp.in
                     -DOUT=${CMAKE_BINARY_DIR}/generated/build_info.cpp -DPROJECT_VERSION=${PROJECT_VERSION})
execute_process(COMMAND ${CMAKE_COMMAND} ${_scaledl_bi_args} -P ${CMAKE_CURRENT_LIST_DIR}/ScaleDLBuildInfoWrite.cmake)
add_custom_target(scaledl_build_info
                  COMMAND ${CMAKE_COMMAND} ${_scaledl_bi_args} -P ${CMAKE_CURRENT_LIST_DIR}/ScaleDLBuildInfoWrite.cmake
                  BYPRODUCTS ${CMAKE_BINARY_DIR}/generated/build_info.cpp
                  COMMENT "" VERBATIM)
