# Bakes the source commit into the binary at configure time (build_info.hpp):
# a campaign's environment row records the commit of the binary that measured,
# not of whatever directory it was started in. CMake re-configures when HEAD
# or the checked-out branch moves, so a rebuild after a commit picks it up.
set(SCALEDL_GIT_COMMIT "unknown")
find_package(Git QUIET)
if(GIT_FOUND AND EXISTS ${CMAKE_SOURCE_DIR}/.git)
  execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --short=12 HEAD
                  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR} OUTPUT_VARIABLE _c
                  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _rc)
  if(_rc EQUAL 0 AND _c)
    set(SCALEDL_GIT_COMMIT ${_c})
    # Measurements being written into committed stores do not make the code dirty.
    execute_process(COMMAND ${GIT_EXECUTABLE} status --porcelain --untracked-files=no -- . :!datasets
                    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR} OUTPUT_VARIABLE _dirty
                    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(_dirty)
      set(SCALEDL_GIT_COMMIT "${SCALEDL_GIT_COMMIT}-dirty")
    endif()
  endif()
  execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --absolute-git-dir
                  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR} OUTPUT_VARIABLE _gd
                  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  execute_process(COMMAND ${GIT_EXECUTABLE} symbolic-ref -q HEAD
                  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR} OUTPUT_VARIABLE _ref
                  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(_gd AND EXISTS ${_gd}/HEAD)
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_gd}/HEAD)
    if(_ref AND EXISTS ${_gd}/${_ref})
      set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_gd}/${_ref})
    endif()
  endif()
endif()
configure_file(${CMAKE_CURRENT_LIST_DIR}/build_info.cpp.in ${CMAKE_BINARY_DIR}/generated/build_info.cpp @ONLY)
