# Installs the build into a fresh prefix and runs the installed binary on an installed scenario:
# the installed configs tree must be self-contained (scenarios reach hardware, topology,
# calibration and host files by relative path), and from another working directory so are the
# shipped trace scenarios and the validate commands; the installed Python package runs an
# installed scenario. Inputs: BUILD_DIR, PREFIX, PYTHON (empty when the package is not built).
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
# From a working directory that is not the repository: a shipped trace scenario (its traces are
# configs/../test/data/...) and the validate commands with their default, shipped, inputs.
set(elsewhere ${PREFIX}/elsewhere)
file(MAKE_DIRECTORY ${elsewhere})
foreach(command "run;${PREFIX}/share/upsim/configs/trace_dlrm_v100.yaml;--no-trace;--quiet;--out;${elsewhere}/trace"
                "validate;kernels" "validate;collectives" "validate;memory")
  execute_process(COMMAND ${PREFIX}/bin/upsim ${command} WORKING_DIRECTORY ${elsewhere}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " shown "${command}")
    message(FATAL_ERROR "installed `upsim ${shown}` from ${elsewhere} failed (${rc}): ${out}${err}")
  endif()
endforeach()
if(PYTHON)
  execute_process(
    COMMAND ${CMAKE_COMMAND} -E env PYTHONPATH=${PREFIX}/lib/python3/dist-packages ${PYTHON} -c
            "import sys, upsim; r = upsim.run(sys.argv[1]); print(r.iteration_ms)"
            ${PREFIX}/share/upsim/configs/dlrm_4gpu.yaml
    WORKING_DIRECTORY ${elsewhere} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "^[0-9]+\\.[0-9]+")
    message(FATAL_ERROR "the installed Python package did not run (${rc}): ${out}${err}")
  endif()
endif()
file(REMOVE_RECURSE ${PREFIX})
