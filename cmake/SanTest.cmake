# san_add_test(NAME name SOURCES ... LIBS ... [LABELS ...] [TIMEOUT s])
# The one helper every test target is declared with: a GoogleTest binary registered with ctest.
include(GoogleTest)
function(san_add_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main Threads::Threads)
  target_include_directories(${T_NAME} PRIVATE ${CMAKE_SOURCE_DIR}/tests)  # "support/..."
  # An empty LABELS value would shift the PROPERTIES list (TIMEOUT became a label and no test had
  # a timeout): pass LABELS only when there are some.
  set(props TIMEOUT ${T_TIMEOUT})
  if(T_LABELS)
    list(APPEND props LABELS "${T_LABELS}")
  endif()
  gtest_discover_tests(${T_NAME} PROPERTIES ${props} DISCOVERY_TIMEOUT 30)
endfunction()
