# ctest -R Install.: cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK=... -DCXX=... -DGENERATOR=...
#                    -DBUILD_TYPE=... -DPKG_CONFIG=... -P install_consumer.cmake
# (test/install/CMakeLists.txt). Installs BUILD_DIR's components `library`, `cli` and `models`
# (cmake/ScaleDLInstall.cmake) into WORK/prefix (WORK emptied first), checks that the installed
# `scaledl predict` finds a sheet by name and the default bundle in the installed data,
# checks the installed tree holds no path into the source or build tree's library, builds
# examples/cpp-consumer against that prefix with find_package and again with pkg-config, runs
# both on the default bundle, GPT-2 and the H100 spec sheet, and checks that each prints the
# positive T_iter that the installed `scaledl predict` prints for the same inputs.
foreach(v BUILD_DIR SOURCE_DIR WORK CXX GENERATOR BUILD_TYPE PKG_CONFIG)
  if(NOT DEFINED ${v} OR "${${v}}" STREQUAL "")
    message(FATAL_ERROR "install-test: -D${v}=... is missing")
  endif()
endforeach()
set(P ${WORK}/prefix)
set(BUNDLE ${SOURCE_DIR}/models/bundles/default)
set(MODEL ${SOURCE_DIR}/models/gpt2.json)
set(SPEC ${SOURCE_DIR}/models/devices/h100-sxm.json)
string(TIMESTAMP t0 "%s")
set(t_last ${t0})

# step(NAME COMMAND...): runs it, stops the test with its output unless it exits 0; OUT = stdout.
function(step name)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(TIMESTAMP now "%s")
  math(EXPR dt "${now} - ${t_last}")
  set(t_last ${now} PARENT_SCOPE)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install-test: ${name} failed (exit ${rc}):\n${ARGN}\n${out}\n${err}")
  endif()
  message(STATUS "install-test: ${name}: ${dt} s")
  set(OUT "${out}" PARENT_SCOPE)
endfunction()

# t_iter(VAR TEXT WHAT): the "T_iter <ms> ms" number of TEXT, which must be > 0.
function(t_iter var text what)
  if(NOT text MATCHES "T_iter +([0-9]+\\.[0-9]+) ms")
    message(FATAL_ERROR "install-test: ${what} printed no \"T_iter <ms> ms\" line:\n${text}")
  endif()
  if(NOT CMAKE_MATCH_1 GREATER 0)
    message(FATAL_ERROR "install-test: ${what} printed T_iter ${CMAKE_MATCH_1} ms, not a positive time")
  endif()
  set(${var} ${CMAKE_MATCH_1} PARENT_SCOPE)
endfunction()

# ---- install ---------------------------------------------------------------------------
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
# The C++ components only: the Python module (python/, component python) has its own tests.
step("cmake --install (library)" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${P} --component library)
step("cmake --install (cli)" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${P} --component cli)
foreach(f lib/cmake/scaledl/scaledlConfig.cmake lib/cmake/scaledl/scaledlConfigVersion.cmake
          lib/cmake/scaledl/scaledlTargets.cmake lib/pkgconfig/scaledl.pc lib/libscaledl_core.a
          lib/libscaledl_predict.a include/scaledl/predict/predict_api.hpp
          include/scaledl/core/error.hpp bin/scaledl bin/scaledl-full bin/scaledl-pipeline)
  if(NOT EXISTS ${P}/${f})
    message(FATAL_ERROR "install-test: ${P}/${f} was not installed")
  endif()
endforeach()
# The package must point into the prefix only: not at the sources' headers or the build's archives.
file(GLOB pkg_files ${P}/lib/cmake/scaledl/*.cmake ${P}/lib/pkgconfig/scaledl.pc)
foreach(f IN LISTS pkg_files)
  file(READ ${f} text)
  foreach(tree ${SOURCE_DIR}/libscaledl ${BUILD_DIR}/libscaledl)
    string(FIND "${text}" "${tree}" at)
    if(at GREATER -1)
      message(FATAL_ERROR "install-test: ${f} names ${tree}: the installed package uses the tree it was built in")
    endif()
  endforeach()
endforeach()

# ---- the installed CLI: the reference -------------------------------------------------
step("scaledl predict (installed)" ${P}/bin/scaledl predict ${MODEL} --bundle ${BUNDLE} --device-spec ${SPEC})
t_iter(cli "${OUT}" "${P}/bin/scaledl predict")

# ---- the installed data (component `models`): a sheet by name and, without --bundle, the
# shipped default bundle, both found in share/scaledl/models beside bin/ (run from WORK, which has
# no ./models of its own)
step("cmake --install (models)" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${P} --component models)
step("scaledl predict (installed data)" ${CMAKE_COMMAND} -E chdir ${WORK} ${CMAKE_COMMAND} -E env
     --unset=SCALEDL_MODELS ${P}/bin/scaledl predict ${MODEL} --device-spec h100-sxm)
t_iter(data_t "${OUT}" "the installed scaledl predict without --bundle")
if(NOT data_t STREQUAL cli)
  message(FATAL_ERROR "install-test: the installed scaledl predict without --bundle printed T_iter ${data_t} "
                      "ms, with --bundle ${cli} ms")
endif()

# ---- CMake: find_package(scaledl CONFIG REQUIRED) --------------------------------------
step("consumer: cmake configure" ${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/cpp-consumer -B ${WORK}/cmake-build
     -G ${GENERATOR} -DCMAKE_BUILD_TYPE=${BUILD_TYPE} -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_PREFIX_PATH=${P}
     -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_EXPORT_COMPILE_COMMANDS=ON)
file(STRINGS ${WORK}/cmake-build/CMakeCache.txt found REGEX "^scaledl_DIR:")
if(NOT found STREQUAL "scaledl_DIR:PATH=${P}/lib/cmake/scaledl")
  message(FATAL_ERROR "install-test: the consumer found another scaledl package: ${found}")
endif()
step("consumer: cmake build" ${CMAKE_COMMAND} --build ${WORK}/cmake-build)
# Its compile and link lines: the prefix's headers and archives, not the trees'.
file(GLOB_RECURSE cmd_files ${WORK}/cmake-build/compile_commands.json ${WORK}/cmake-build/link.txt
     ${WORK}/cmake-build/build.ninja)
set(cmds "")
foreach(f IN LISTS cmd_files)
  file(READ ${f} text)
  string(APPEND cmds "${text}")
endforeach()
foreach(want "-isystem ${P}/include" "${P}/lib/libscaledl_predict.a")
  string(FIND "${cmds}" "${want}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "install-test: the consumer's build commands lack ${want}:\n${cmds}")
  endif()
endforeach()
foreach(tree ${SOURCE_DIR}/libscaledl ${BUILD_DIR}/libscaledl)
  string(FIND "${cmds}" "${tree}" at)
  if(at GREATER -1)
    message(FATAL_ERROR "install-test: the consumer's build commands name ${tree}:\n${cmds}")
  endif()
endforeach()
step("consumer (CMake) runs" ${WORK}/cmake-build/scaledl-consumer ${BUNDLE} ${MODEL} ${SPEC})
message(STATUS "install-test: consumer (CMake) printed:\n${OUT}")
t_iter(cmake_t "${OUT}" "the consumer built with CMake")
if(NOT cmake_t STREQUAL cli)
  message(FATAL_ERROR "install-test: the consumer built with CMake printed T_iter ${cmake_t} ms, "
                      "the installed scaledl predict ${cli} ms")
endif()

# ---- pkg-config --------------------------------------------------------------------------
step("pkg-config scaledl" ${CMAKE_COMMAND} -E env PKG_CONFIG_PATH=${P}/lib/pkgconfig
     ${PKG_CONFIG} --cflags --libs scaledl)
string(STRIP "${OUT}" pc_flags)
separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
step("consumer: pkg-config build" ${CXX} -O0 ${SOURCE_DIR}/examples/cpp-consumer/main.cpp ${pc_flags}
     -o ${WORK}/pc-consumer)
step("consumer (pkg-config) runs" ${WORK}/pc-consumer ${BUNDLE} ${MODEL} ${SPEC})
t_iter(pc_t "${OUT}" "the consumer built with pkg-config")
if(NOT pc_t STREQUAL cli)
  message(FATAL_ERROR "install-test: the consumer built with pkg-config printed T_iter ${pc_t} ms, "
                      "the installed scaledl predict ${cli} ms")
endif()

string(TIMESTAMP t1 "%s")
math(EXPR total "${t1} - ${t0}")
message(STATUS "install-test: passed in ${total} s: T_iter ${cli} ms from the CLI and both consumers")
