# san_add_fuzz_target(NAME name SOURCES ... [LIBS ...] [INCLUDES ...])
# A libFuzzer program for a parser of outside input, built only where the compiler supports
# -fsanitize=fuzzer (clang; GCC does not). Not a ctest: run by hand or in a fuzzing job. List the
# parser's own .cc files in SOURCES so they carry the coverage instrumentation that guides the
# fuzzer. Every parser also has a GoogleTest replaying a seeded random corpus, which GCC runs.
include(CheckCXXSourceCompiles)
include(CMakePushCheckState)
cmake_push_check_state(RESET)
set(CMAKE_REQUIRED_FLAGS -fsanitize=fuzzer)
set(CMAKE_REQUIRED_LINK_OPTIONS -fsanitize=fuzzer)
check_cxx_source_compiles([[
#include <cstddef>
#include <cstdint>
extern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }
]] SAN_HAVE_LIBFUZZER)
cmake_pop_check_state()

function(san_add_fuzz_target)
  cmake_parse_arguments(F "" "NAME" "SOURCES;LIBS;INCLUDES" ${ARGN})
  if(NOT SAN_HAVE_LIBFUZZER)
    return()
  endif()
  add_executable(${F_NAME} ${F_SOURCES})
  target_include_directories(${F_NAME} PRIVATE ${PROJECT_SOURCE_DIR} ${F_INCLUDES})
  target_compile_options(${F_NAME} PRIVATE -fsanitize=fuzzer)
  target_link_options(${F_NAME} PRIVATE -fsanitize=fuzzer)
  if(F_LIBS)
    target_link_libraries(${F_NAME} PRIVATE ${F_LIBS})
  endif()
endfunction()
