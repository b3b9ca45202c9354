# Runs one scenario and compares its summary.txt with the golden file.
execute_process(
  COMMAND ${UPSIM} run ${SCENARIO} --out ${OUT} --force --no-trace --quiet
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "upsim run ${SCENARIO} failed (${rc}):\n${out}${err}")
endif()
file(READ ${OUT}/summary.txt actual)
if(NOT EXISTS ${EXPECTED})
  message(FATAL_ERROR "missing golden file ${EXPECTED}; run scripts/update-golden.sh\n${actual}")
endif()
file(READ ${EXPECTED} expected)
if(NOT actual STREQUAL expected)
  message(FATAL_ERROR "summary of ${SCENARIO} differs from ${EXPECTED}\n"
    "--- expected\n${expected}\n--- actual\n${actual}\n"
    "If the change is intended, run scripts/update-golden.sh and explain it in the commit.")
endif()
message(STATUS "golden summary matches: ${SCENARIO}")
