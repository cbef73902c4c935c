# Labels each discovered doctest case with its test suite, as doctest_discover_tests' ADD_LABELS
# does, but with one listing per suite instead of one process per test case (minutes saved on
# every build: the test binaries start slowly under ASan and with the CUDA runtime).
# Run at build time: cmake -D TEST_EXECUTABLE=... -D TEST_PREFIX=... -D CTEST_FILE=... -P this
function(doctest_list out)
  execute_process(COMMAND "${TEST_EXECUTABLE}" ${ARGN} OUTPUT_VARIABLE text RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "listing ${ARGN} of ${TEST_EXECUTABLE} failed (${rc}):\n${text}")
  endif()
  string(REPLACE "\n" ";" lines "${text}")
  set(items)
  foreach(line IN LISTS lines)
    if(line STREQUAL "" OR line MATCHES "^===" OR line MATCHES "^\\[doctest\\] ")
      continue()
    endif()
    list(APPEND items "${line}")
  endforeach()
  set(${out} "${items}" PARENT_SCOPE)
endfunction()

set(script "")
doctest_list(suites --list-test-suites)
foreach(suite IN LISTS suites)
  doctest_list(cases --list-test-cases "--test-suite=${suite}")
  foreach(name IN LISTS cases)
    string(APPEND script "set_tests_properties([==[${TEST_PREFIX}${name}]==] PROPERTIES LABELS [==[${suite}]==])\n")
  endforeach()
endforeach()
file(WRITE "${CTEST_FILE}" "${script}")
