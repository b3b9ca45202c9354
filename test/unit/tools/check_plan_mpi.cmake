# `mpirun -np 2 --oversubscribe upsim plan` ranks the layouts of a single-process plan, byte for
# byte (the same batches: 4 layouts by default, at least the ranks under mpirun); ends with an
# error, never a hang, when rank 0 refuses its folder; refuses a DLRM scenario (upsim shard does
# not run under mpirun). Inputs: UPSIM (the binary), MPIEXEC, SCENARIO, TINY_DLRM, WORK (a
# scratch folder).
file(REMOVE_RECURSE ${WORK})
set(plan_args plan ${SCENARIO} --set workload.global_batch=32 --set workload.micro_batch=8
    --set workload.layers=4 --top 50)
execute_process(COMMAND ${UPSIM} ${plan_args} --out ${WORK}/single
                RESULT_VARIABLE rc OUTPUT_VARIABLE single_out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "single-process plan failed (${rc}): ${err}")
endif()
# Open MPI refuses to start as root unless told; CI containers run as root.
set(ENV{OMPI_ALLOW_RUN_AS_ROOT} 1)
set(ENV{OMPI_ALLOW_RUN_AS_ROOT_CONFIRM} 1)
execute_process(COMMAND ${MPIEXEC} -np 2 --oversubscribe ${UPSIM} ${plan_args} --out ${WORK}/mpi
                RESULT_VARIABLE rc OUTPUT_VARIABLE mpi_out ERROR_VARIABLE err TIMEOUT 300)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "mpirun plan failed (${rc}): ${mpi_out}${err}")
endif()
string(REPLACE "${WORK}/single" "OUT" single_out "${single_out}")
string(REPLACE "${WORK}/mpi" "OUT" mpi_out "${mpi_out}")
if(NOT single_out STREQUAL mpi_out)
  message(FATAL_ERROR "the mpirun ranking differs from the single-process one:\n${single_out}\n---\n${mpi_out}")
endif()
foreach(file plan.csv best.yaml)
  file(READ ${WORK}/single/${file} single)
  file(READ ${WORK}/mpi/${file} distributed)
  if(NOT single STREQUAL distributed)
    message(FATAL_ERROR "the mpirun ${file} differs from the single-process one")
  endif()
endforeach()

# Rank 0 refuses the folder (it exists, no --force) after the other rank has started serving:
# that rank is told to stop, so mpirun ends with the refusal.
execute_process(COMMAND ${MPIEXEC} -np 2 --oversubscribe ${UPSIM} ${plan_args} --out ${WORK}/mpi
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
if(rc EQUAL 0 OR NOT rc MATCHES "^[0-9]+$" OR err MATCHES "terminate called")
  message(FATAL_ERROR "mpirun plan into an existing folder: exit ${rc}, expected a refusal:\n${out}${err}")
endif()

execute_process(COMMAND ${MPIEXEC} -np 2 --oversubscribe ${UPSIM} plan ${TINY_DLRM} --out ${WORK}/dlrm
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
if(rc EQUAL 0 OR NOT rc MATCHES "^[0-9]+$" OR NOT err MATCHES "upsim shard does not run under mpirun")
  message(FATAL_ERROR "mpirun plan of a DLRM scenario: exit ${rc}, expected a refusal:\n${out}${err}")
endif()
file(REMOVE_RECURSE ${WORK})
