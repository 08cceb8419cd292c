# Runs PROGRAM and compares what it prints with the file EXPECTED (cmake -P; tests/docs).
execute_process(COMMAND ${PROGRAM} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
file(READ ${EXPECTED} want)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${PROGRAM} exited with ${rc}\n--- stdout:\n${out}\n--- stderr:\n${err}")
endif()
if(NOT out STREQUAL want)
  message(FATAL_ERROR "${PROGRAM} printed what its docs do not say.\n"
                      "--- printed:\n${out}\n--- the ```output blocks say:\n${want}\n--- stderr:\n${err}")
endif()
message(STATUS "docs: the printed output matches")
