# Writes generated/build_info.cpp with the source commit (script mode: cmake -P).
# Run at every build by the scaledl_build_info target (ScaleDLBuildInfo.cmake), so a
# campaign's environment row records the commit of the code the binary was built from,
# "-dirty" when tracked code differed from it, even when the build directory was
# configured at another commit. configure_file() rewrites the file only when its text
# changes, so an unchanged commit rebuilds nothing.
#   cmake -DSOURCE_DIR=... -DIN=build_info.cpp.in -DOUT=.../build_info.cpp -DPROJECT_VERSION=... -P this
set(SCALEDL_GIT_COMMIT "unknown")
find_package(Git QUIET)
if(GIT_FOUND AND EXISTS ${SOURCE_DIR}/.git)
  execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --short=12 HEAD
                  WORKING_DIRECTORY ${SOURCE_DIR} OUTPUT_VARIABLE _c
                  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _rc)
  if(_rc EQUAL 0 AND _c)
    set(SCALEDL_GIT_COMMIT ${_c})
    # Measurements being written into committed stores do not make the code dirty.
    execute_process(COMMAND ${GIT_EXECUTABLE} status --porcelain --untracked-files=no -- . :!datasets
                    WORKING_DIRECTORY ${SOURCE_DIR} OUTPUT_VARIABLE _dirty
                    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(_dirty)
      set(SCALEDL_GIT_COMMIT "${SCALEDL_GIT_COMMIT}-dirty")
    endif()
  endif()
endif()
configure_file(${IN} ${OUT} @ONLY)
