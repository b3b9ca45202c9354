# Runs check_layers.cmake on test/layers/broken/ (a tree that breaks each kind of rule once
# and keeps some allowed includes) and checks that it fails naming each broken rule, and only
# those.
# Usage: cmake -DCHECKER=<check_layers.cmake> -DFIXTURE=<broken/> -P check_layers_test.cmake
execute_process(COMMAND "${CMAKE_COMMAND}" -DROOT=${FIXTURE} -P "${CHECKER}"
                RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(report "${out}${err}")
if(result EQUAL 0)
  message(FATAL_ERROR "check_layers.cmake accepted a tree that breaks its rules:\n${report}")
endif()
set(expected
    "sim/engine.h: #include <fmt/format.h>: `sim` may not use this library"
    "sim/engine.h: #include \"sim/config/config_node.h\": `sim` may not use `sim/config` (it may use: nothing else)"
    "topology/fabric.h: #include <boost/graph/adjacency_list.hpp>: this library stays out of headers"
    "topology/fabric.h: #include \"calibration/hardware_profile.h\": `topology` may not use `calibration`"
    "workloads/dlrm/dlrm_workload.h: #include \"workloads/trace/trace_workload.h\": `workloads/dlrm` may not use `workloads/trace`"
    "workloads/dlrm/dlrm_workload.h: #include \"workloads/workload_registry.h\": `workloads/dlrm` may not use `workloads`"
    "workloads/trace/trace_workload.h: #include <gtest/gtest.h>: `workloads/trace` may not use this library (used by: tests and benchmarks only)"
    "workloads/other.cpp: #include \"workloads/dlrm/dlrm_workload.h\": only workloads/workload_registry.cpp includes the workload families"
    "calibration/kernels.cpp: #include \"test/unit/helpers.h\": `calibration` may use only the project's layers"
    "calibration/kernels.cpp: #include <hdf5.h>: `calibration` may not use this library (used by: calibration/fitting, tools)"
    "calibration/kernels.h: #include \"calibration/fitting/measurements.h\": `calibration` may not use `calibration/fitting`"
    "tools/extra/command.cpp: its folder `tools/extra` is no layer"
    "workloads/trace/chakra_trace.cpp: #include <google/protobuf/message_lite.h>: `workloads/trace` may not use this library (used by: sim/formats)"
    "workloads/trace/chakra_trace.cpp: #include \"sim/formats/chakra/et_def.pb.h\": `workloads/trace` may not use this library (used by: sim/formats)"
    "layering: 14 broken rule(s) in 12 files")
foreach(line IN LISTS expected)
  string(FIND "${report}" "${line}" at)
  if(at LESS 0)
    message(FATAL_ERROR "check_layers.cmake did not report\n  ${line}\nIt printed:\n${report}")
  endif()
endforeach()
message(STATUS "check_layers.cmake reported each of the ${FIXTURE} tree's broken rules")
