# egpu_add_gtest(<target> PREFIX <prefix> SOURCES <files...> [LIBS <libs...>])
# A GoogleTest executable whose tests ctest lists as <prefix>.<Suite>.<Test>, so
# `ctest -R <prefix>` selects them.
function(egpu_add_gtest target)
  cmake_parse_arguments(ARG "" "PREFIX;TIMEOUT" "SOURCES;LIBS;PROPERTIES" ${ARGN})
  add_executable(${target} ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gtest_main Threads::Threads)
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  gtest_discover_tests(${target} TEST_PREFIX "${ARG_PREFIX}." DISCOVERY_TIMEOUT 60
                       PROPERTIES TIMEOUT ${ARG_TIMEOUT} ${ARG_PROPERTIES})
endfunction()
