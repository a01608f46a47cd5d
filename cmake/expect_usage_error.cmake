# Command lines of the examples and benchmarks: a refused one must exit with status 2 and a
# message on stderr that names the flag; --help must exit 0 and list the options.
#
# As a script:  cmake -DCOMMAND=<;-list> -DFLAG=<flag> -P expect_usage_error.cmake
#               cmake -DCOMMAND=<;-list> -DHELP_LISTS=<regex> [-DHELP_LACKS=<regex>] -P expect_usage_error.cmake
# Included:     cocod_add_usage_error_test(<target> <flag> <arguments>...): the test
#               usage.<target>.<flag>.<n> runs the target with the arguments, expects exit 2 and <flag>
#               named; cocod_add_help_test(<target> <lists> [<lacks>]): usage.<target>.help runs
#               `<target> --help`, expects exit 0, output matching <lists> and not matching <lacks>.
if(CMAKE_SCRIPT_MODE_FILE)
  execute_process(COMMAND ${COMMAND} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
  message("stdout: ${out}")
  message("stderr: ${err}")
  message("exit: ${rc}")
  if(DEFINED HELP_LISTS)
    if(NOT rc STREQUAL "0")
      message(FATAL_ERROR "--help: expected exit status 0, got ${rc}")
    endif()
    if(NOT "${out}" MATCHES "${HELP_LISTS}")
      message(FATAL_ERROR "--help does not list: ${HELP_LISTS}")
    endif()
    if(HELP_LACKS AND "${out}" MATCHES "${HELP_LACKS}")
      message(FATAL_ERROR "--help lists what it should not: ${HELP_LACKS}")
    endif()
    return()
  endif()
  if(NOT rc STREQUAL "2")
    message(FATAL_ERROR "expected exit status 2 (a usage error), got ${rc}")
  endif()
  string(FIND "${err}" "${FLAG}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "the message on stderr does not name ${FLAG}")
  endif()
  # Every refusal reads the same: "PROGRAM: MESSAGE", then where to look.
  list(GET COMMAND 0 program)
  string(FIND "${err}" "${program}: " starts)
  if(NOT starts EQUAL 0 OR NOT err MATCHES "\nTry '[^']+ --help'\\.\n?$")
    message(FATAL_ERROR "the message on stderr is not \"PROGRAM: MESSAGE\" followed by \"Try 'PROGRAM --help'.\"")
  endif()
  return()
endif()

set(_cocod_usage_script "${CMAKE_CURRENT_LIST_FILE}")

function(cocod_add_usage_error_test target flag)
  string(REGEX REPLACE "^-+" "" stem "${flag}")
  set(n 1)
  while(TEST usage.${target}.${stem}.${n})
    math(EXPR n "${n} + 1")
  endwhile()
  add_test(NAME usage.${target}.${stem}.${n}
    COMMAND ${CMAKE_COMMAND} "-DCOMMAND=$<TARGET_FILE:${target}>;${ARGN}" "-DFLAG=${flag}" -P ${_cocod_usage_script})
  set_tests_properties(usage.${target}.${stem}.${n} PROPERTIES TIMEOUT 120 LABELS usage)
endfunction()

function(cocod_add_help_test target lists)
  set(lacks "")
  if(ARGC GREATER 2)
    set(lacks "-DHELP_LACKS=${ARGV2}")
  endif()
  add_test(NAME usage.${target}.help
    COMMAND ${CMAKE_COMMAND} "-DCOMMAND=$<TARGET_FILE:${target}>;--help" "-DHELP_LISTS=${lists}" ${lacks}
            -P ${_cocod_usage_script})
  set_tests_properties(usage.${target}.help PROPERTIES TIMEOUT 60 LABELS usage)
endfunction()
