# Installs the build into a fresh prefix and runs the installed binary on an installed scenario:
# the installed configs tree must be self-contained (scenarios reach hardware, topology,
# calibration and host files by relative path). Inputs: BUILD_DIR, PREFIX.
file(REMOVE_RECURSE ${PREFIX})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${PREFIX}
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed (${rc})")
endif()
foreach(f bin/upsim share/upsim/configs/dlrm_4gpu.yaml share/doc/upsim/README.md
          share/bash-completion/completions/upsim)
  if(NOT EXISTS ${PREFIX}/${f})
    message(FATAL_ERROR "not installed: ${f}")
  endif()
endforeach()
execute_process(COMMAND ${PREFIX}/bin/upsim run ${PREFIX}/share/upsim/configs/dlrm_4gpu.yaml
                        --no-trace --quiet --out ${PREFIX}/run
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "^[0-9]+\\.[0-9]+")
  message(FATAL_ERROR "the installed upsim did not run the installed scenario (${rc}): ${out}${err}")
endif()
file(REMOVE_RECURSE ${PREFIX})
