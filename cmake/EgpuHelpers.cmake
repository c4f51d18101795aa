# egpu_add_gtest(<target> PREFIX <prefix> TIER <tier> SOURCES <files...> [LIBS <libs...>])
# A GoogleTest executable whose tests ctest lists as <prefix>.<Suite>.<Test>, so
# `ctest -R <prefix>` selects them. TIER is the ctest LABEL that says what a
# test needs (scripts/test runs them by it):
#   unit     in-process, no clock: fast and exact
#   process  real processes (the agent, the shim, simgpu), no measured time
#   timing   judges wall-clock measurements (shares, latencies): run alone
#            (RUN_SERIAL), and the runner's one retry applies to them only
function(egpu_add_gtest target)
  cmake_parse_arguments(ARG "" "PREFIX;TIMEOUT;TIER" "SOURCES;LIBS;PROPERTIES" ${ARGN})
  if(NOT ARG_TIER MATCHES "^(unit|process|timing)$")
    message(FATAL_ERROR "egpu_add_gtest(${target}): TIER must be unit, process or timing")
  endif()
  add_executable(${target} ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gtest_main Threads::Threads)
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  set(tier_properties LABELS ${ARG_TIER})
  if(ARG_TIER STREQUAL "timing")
    list(APPEND tier_properties RUN_SERIAL TRUE)
  endif()
  gtest_discover_tests(${target} TEST_PREFIX "${ARG_PREFIX}." DISCOVERY_TIMEOUT 60
                       PROPERTIES TIMEOUT ${ARG_TIMEOUT} ${tier_properties} ${ARG_PROPERTIES})
endfunction()
