# `cmake --install BUILD --prefix P` (issue #43, docs/install.md): the library's
# static stage libraries (P/lib/libscaledl_<stage>.a), its public headers
# (P/include/scaledl/), the `scaledl` command and the scaledl-full and
# scaledl-pipeline tools it runs (P/bin/), the CMake package P/lib/cmake/scaledl/ (find_package(scaledl
# CONFIG) gives scaledl::scaledl, everything scaledl_all links, and
# scaledl::<stage> for one stage) and the pkg-config file P/lib/pkgconfig/scaledl.pc.
# Included by the top-level CMakeLists.txt after libscaledl/ and tools/. Two install
# components: `library` (archives, headers, CMake package, .pc) and `cli` (the binaries);
# `cmake --install BUILD --component library` installs the library alone.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(SCALEDL_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/scaledl)

# _scaledl_walk(PROP TARGET): depth-first over TARGET's INTERFACE_LINK_LIBRARIES that are
# scaledl_* targets, appending each to the global property PROP after the ones it links
# (dependencies first; each once).
function(_scaledl_walk prop t)
  get_property(_seen GLOBAL PROPERTY ${prop})
  if(t IN_LIST _seen)
    return()
  endif()
  get_target_property(_deps ${t} INTERFACE_LINK_LIBRARIES)
  foreach(d IN LISTS _deps)
    if(d MATCHES "^scaledl_" AND TARGET ${d} AND NOT d STREQUAL "scaledl_light_cmds")
      _scaledl_walk(${prop} ${d})
    endif()
  endforeach()
  get_property(_seen GLOBAL PROPERTY ${prop})
  if(NOT t IN_LIST _seen)
    set_property(GLOBAL APPEND PROPERTY ${prop} ${t})
  endif()
endfunction()

# The installed library is what the two binaries link: scaledl_all and scaledl_pipeline_text
# and the stages below them (not scaledl_internal, the tests' view of src/).
foreach(exe scaledl-full scaledl-pipeline)
  get_target_property(_l ${exe} LINK_LIBRARIES)
  foreach(d IN LISTS _l)
    if(d MATCHES "^scaledl_" AND TARGET ${d} AND NOT d STREQUAL "scaledl_light_cmds")
      _scaledl_walk(_SCALEDL_EXPORTED ${d})
    endif()
  endforeach()
endforeach()
get_property(_scaledl_stages GLOBAL PROPERTY _SCALEDL_EXPORTED)
list(REMOVE_ITEM _scaledl_stages scaledl_all)
foreach(t IN LISTS _scaledl_stages)
  string(REGEX REPLACE "^scaledl_" "" _n ${t})
  set_target_properties(${t} PROPERTIES EXPORT_NAME ${_n})  # scaledl::predict, ...
endforeach()
# scaledl::scaledl is the library: what the `scaledl` command links (no
# pipeline_text: SentencePiece cannot share a process with LibTorch, see
# libscaledl/CMakeLists.txt; it is scaledl::pipeline_text on its own).
set_target_properties(scaledl_all PROPERTIES EXPORT_NAME scaledl)
target_compile_features(scaledl_all INTERFACE cxx_std_17)
# A sanitized build's archives (-DSCALEDL_SANITIZE, cmake/ScaleDLSanitize.cmake) call the
# sanitizers' runtime: whatever links them must link it too, through the CMake package and
# the .pc alike (scripts/sanitize.sh runs the install test on such a build).
set(_pc_san "")
if(NOT "${_scaledl_san}" STREQUAL "")
  foreach(t IN LISTS _scaledl_stages ITEMS scaledl_all)
    target_link_options(${t} INTERFACE -fsanitize=${_scaledl_san})
  endforeach()
  set(_pc_san " -fsanitize=${_scaledl_san}")
endif()

install(TARGETS ${_scaledl_stages} scaledl_all EXPORT scaledlTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT library
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT library
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/libscaledl/include/scaledl DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        COMPONENT library FILES_MATCHING PATTERN "*.hpp")
# scaledl runs scaledl-full, and scaledl-full scaledl-pipeline, from its own directory
# (tools/sibling.cpp).
# A LibTorch outside the system's directories (-DTorch_DIR=.../site-packages/torch)
# stays on the installed binaries' RPATH.
set_target_properties(scaledl scaledl-full scaledl-pipeline PROPERTIES INSTALL_RPATH_USE_LINK_PATH TRUE)
install(TARGETS scaledl scaledl-full scaledl-pipeline RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT cli)

install(EXPORT scaledlTargets NAMESPACE scaledl:: FILE scaledlTargets.cmake
        DESTINATION ${SCALEDL_INSTALL_CMAKEDIR} COMPONENT library)
# The Config finds the dependencies where this build found them (HINTS), then
# wherever the consumer's own search finds them.
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/scaledlConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/generated/scaledlConfig.cmake
                              INSTALL_DESTINATION ${SCALEDL_INSTALL_CMAKEDIR})
# 0.x: a minor version may change the API.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/generated/scaledlConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/generated/scaledlConfig.cmake
              ${PROJECT_BINARY_DIR}/generated/scaledlConfigVersion.cmake
        DESTINATION ${SCALEDL_INSTALL_CMAKEDIR} COMPONENT library)

# ---- pkg-config ----------------------------------------------------------------------------
# Static libraries are linked in dependency order: each stage before the stages it
# links, i.e. the walk from scaledl_all reversed.
_scaledl_walk(_SCALEDL_PC_ORDER scaledl_all)
get_property(_order GLOBAL PROPERTY _SCALEDL_PC_ORDER)
list(REVERSE _order)
set(_pc_libs "")
set(_pc_defs "")
foreach(t IN LISTS _order)
  get_target_property(_type ${t} TYPE)
  if(_type STREQUAL "STATIC_LIBRARY")
    string(APPEND _pc_libs " -l${t}")
  endif()
  get_target_property(_d ${t} INTERFACE_COMPILE_DEFINITIONS)
  foreach(d IN LISTS _d)
    if(d AND NOT " ${_pc_defs} " MATCHES " -D${d} ")
      string(APPEND _pc_defs " -D${d}")
    endif()
  endforeach()
endforeach()

# LibTorch, XGBoost and gloo have no .pc on Debian: their files, resolved at generate
# time. torch_cpu is linked --no-as-needed (its operators register at load time),
# as LibTorch's own CMake target does.
set(_pc_torch "-Wl,--no-as-needed")
foreach(t torch_cuda torch_cpu torch c10_cuda c10)
  if(TARGET ${t})
    string(APPEND _pc_torch " $<TARGET_FILE:${t}>")
  endif()
endforeach()
string(APPEND _pc_torch " -Wl,--as-needed")
set(_pc_other "$<TARGET_FILE:xgboost::xgboost>")
if(SCALEDL_GLOO_LIB AND SCALEDL_GLOO_INCLUDE AND SCALEDL_C10D_GLOO)
  string(APPEND _pc_other " ${SCALEDL_GLOO_LIB}")
endif()
if(SCALEDL_HAVE_CUDA)
  string(APPEND _pc_other " $<TARGET_FILE:CUDA::cudart>")
endif()
# LibTorch's API headers (needed by scaledl/bench/ and scaledl/gnn/ only); /usr/include
# is left to the compiler (-I/usr/include breaks libstdc++'s #include_next).
set(_pc_cflags "-I\${includedir} -std=c++17 ${TORCH_CXX_FLAGS}${_pc_defs}")
foreach(d IN LISTS TORCH_INCLUDE_DIRS)
  if(NOT d MATCHES "^/usr/include/?$")
    string(APPEND _pc_cflags " -I${d}")
  endif()
endforeach()
set(_pc_requires "nlohmann_json eigen3 sqlite3 libcrypto libturbojpeg")
if(SCALEDL_FMT_HEADER_ONLY)
  string(APPEND _pc_cflags " -DFMT_HEADER_ONLY=1")
  set(_pc_requires "${_pc_requires} fmt")  # its include path; -lfmt is then unused
else()
  set(_pc_requires "fmt ${_pc_requires}")
endif()
# The prefix relative to the .pc itself: the file holds wherever --prefix puts it.
file(RELATIVE_PATH _pc_up /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
string(REGEX REPLACE "/$" "" _pc_up "${_pc_up}")
file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/generated/scaledl.pc CONTENT
"prefix=\${pcfiledir}/${_pc_up}
libdir=\${prefix}/${CMAKE_INSTALL_LIBDIR}
includedir=\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}

Name: scaledl
Description: ScaleDL: predicts deep-learning training time (static libraries; docs/install.md)
Version: ${PROJECT_VERSION}
Requires: ${_pc_requires}
Cflags: ${_pc_cflags}
Libs: -L\${libdir}${_pc_libs} ${_pc_torch} ${_pc_other} -pthread${_pc_san}
")
install(FILES ${PROJECT_BINARY_DIR}/generated/scaledl.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
        COMPONENT library)

# The shipped data a prediction reads (component `models`): the spec sheets that
# `--device-spec NAME` and `scaledl devices` find in share/scaledl/models/devices beside bin/
# (libscaledl/src/io/device_library.cpp), the fabric presets, the default bundle and the model
# configs; the Python module looks there too (docs/python.md).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/models/ DESTINATION ${CMAKE_INSTALL_DATADIR}/scaledl/models
        COMPONENT models PATTERN "spaces" EXCLUDE)
