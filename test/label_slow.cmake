# Read by CTest after the discovered GoogleTest tests (TEST_INCLUDE_FILES in
# test/CMakeLists.txt): gives the tests listed in test/slow-tests.txt the label
# `slow`.
file(STRINGS "${CMAKE_CURRENT_LIST_DIR}/slow-tests.txt" _slow REGEX "^[A-Za-z]")
if(_slow)
  set_tests_properties(${_slow} PROPERTIES LABELS slow)
endif()
