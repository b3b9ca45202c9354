# `mpirun -np 2 --oversubscribe upsim sweep` gives the table of a single-process sweep, byte for
# byte. Inputs: UPSIM (the binary), MPIEXEC, STUDY, WORK (a scratch folder).
file(REMOVE_RECURSE ${WORK})
execute_process(COMMAND ${UPSIM} sweep ${STUDY} --out ${WORK}/single
                RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "single-process sweep failed (${rc}): ${err}")
endif()
# Open MPI refuses to start as root unless told; CI containers run as root.
set(ENV{OMPI_ALLOW_RUN_AS_ROOT} 1)
set(ENV{OMPI_ALLOW_RUN_AS_ROOT_CONFIRM} 1)
execute_process(COMMAND ${MPIEXEC} -np 2 --oversubscribe ${UPSIM} sweep ${STUDY} --out ${WORK}/mpi
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "mpirun sweep failed (${rc}): ${out}${err}")
endif()
file(READ ${WORK}/single/results.csv single)
file(READ ${WORK}/mpi/results.csv distributed)
if(NOT single STREQUAL distributed)
  message(FATAL_ERROR "the mpirun table differs from the single-process one:\n${single}\n---\n${distributed}")
endif()
file(REMOVE_RECURSE ${WORK})
