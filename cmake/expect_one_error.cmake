# cmake -DBUILD_DIR=... -DTARGET=... -DEXPECT=<regex> -P expect_one_error.cmake
# Builds TARGET, which must fail to compile with exactly one compiler error, matching EXPECT:
# a mistake gets one message that names it and its fix, and no second error or warning follows.
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BUILD_DIR} --target ${TARGET}
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
set(all "${out}${err}")
string(REPLACE ";" "," all "${all}")  # the matches become a list
if(rc EQUAL 0)
  message(FATAL_ERROR "${TARGET} compiled, but it must not")
endif()
string(REGEX MATCHALL "[^\n]*: error: [^\n]*" errors "${all}")
list(LENGTH errors count)
if(NOT count EQUAL 1)
  message(FATAL_ERROR "${TARGET}: expected exactly one compiler error, got ${count}:\n${all}")
endif()
string(REGEX MATCHALL "[^\n]*: warning: [^\n]*" warnings "${all}")
if(warnings)
  message(FATAL_ERROR "${TARGET}: the error is followed by warnings:\n${warnings}")
endif()
if(NOT errors MATCHES "${EXPECT}")
  message(FATAL_ERROR "${TARGET}: the error does not say what it should (${EXPECT}):\n${errors}")
endif()
message(STATUS "${TARGET}: one error, as expected:\n${errors}")
