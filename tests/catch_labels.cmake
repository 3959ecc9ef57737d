# Gives CTest label LABEL to every test of one Catch2 executable whose Catch2
# tags include [LABEL]. Catch2 2.x's catch_discover_tests registers no labels,
# so odmoe_test_suite (tests/CMakeLists.txt) runs this after each build of a
# suite, next to the discovery, and CTest includes the file it writes. Then
# `ctest -L tsan` runs the cases tagged [tsan] (scripts/sanitize.sh tsan).
#
#   cmake -D TEST_EXECUTABLE=bin/odmoe_cluster_tests -D TEST_PREFIX=cluster: \
#         -D LABEL=tsan -D OUTPUT_FILE=labels.cmake -P tests/catch_labels.cmake
execute_process(
  COMMAND "${TEST_EXECUTABLE}" "[${LABEL}]" --list-test-names-only
  OUTPUT_VARIABLE output
  RESULT_VARIABLE result)
# Catch2 exits with the number of tests listed; only a negative value (a crash
# or a failure to start) is an error.
if(result LESS 0)
  message(FATAL_ERROR "${TEST_EXECUTABLE} [${LABEL}] --list-test-names-only: ${result}")
endif()
set(script "")
string(REPLACE "\n" ";" names "${output}")
foreach(name IN LISTS names)
  if(name STREQUAL "")
    continue()
  endif()
  # The test name as catch_discover_tests registered it, in a bracket argument
  # because names hold spaces, commas and semicolons.
  string(APPEND script
         "set_tests_properties([==[${TEST_PREFIX}${name}]==] PROPERTIES LABELS ${LABEL})\n")
endforeach()
file(WRITE "${OUTPUT_FILE}" "${script}")
