# `mpirun -np 2 --oversubscribe upsim sweep` gives the table of a single-process sweep, byte for
# byte, and ends with an error, never a hang or an abort, when rank 0 cannot go on. Inputs:
# UPSIM (the binary), MPIEXEC, STUDY, WORK (a scratch folder).
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

# Rank 0 cannot write a row (a folder planted at the row's temporary twin): the sweep ends with
# an error naming it, every rank told to stop — no hang (the time limit), no abort.
file(REMOVE ${WORK}/mpi/points/5.row)
file(MAKE_DIRECTORY ${WORK}/mpi/points/5.row.tmp)
execute_process(COMMAND ${MPIEXEC} -np 2 --oversubscribe ${UPSIM} sweep ${STUDY} --out ${WORK}/mpi
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
if(rc EQUAL 0 OR NOT rc MATCHES "^[0-9]+$")
  message(FATAL_ERROR "mpirun sweep with an unwritable row: exit ${rc} (expected an error):\n${out}${err}")
endif()
if(NOT err MATCHES "points/5\\.row\\.tmp is a folder" OR err MATCHES "terminate called")
  message(FATAL_ERROR "mpirun sweep with an unwritable row: expected an error naming points/5.row.tmp, no abort:\n${err}")
endif()

# Rank 0 refuses the folder before it hands out a point (it holds another study): the other
# rank is told to stop, so mpirun ends.
file(WRITE ${WORK}/other/study.points "base\t/elsewhere/base.yaml\n0\tworkload.global_batch=1\t\n")
execute_process(COMMAND ${MPIEXEC} -np 2 --oversubscribe ${UPSIM} sweep ${STUDY} --out ${WORK}/other
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
if(rc EQUAL 0 OR NOT rc MATCHES "^[0-9]+$" OR NOT err MATCHES "holds the results of another study")
  message(FATAL_ERROR "mpirun sweep into another study's folder: exit ${rc}, expected a refusal:\n${out}${err}")
endif()
file(REMOVE_RECURSE ${WORK})
