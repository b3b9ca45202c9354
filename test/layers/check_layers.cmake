# Enforces the layering of ARCHITECTURE.md ("Layers") over the #include lines of the project's
# C++ files: which folder may use which, which third-party library each folder may use, and that
# only workloads/workload_registry.cpp names the workload families. Tests and benchmarks (test/,
# bench/) may use everything and are not checked.
#
# Usage: cmake -DROOT=<source folder> -P check_layers.cmake
# Every broken rule is printed as `file: #include ...: why`, and the script exits non-zero.
# A C++ file in a folder this table does not know is an error too: a new folder gets its row
# here and in ARCHITECTURE.md.
cmake_minimum_required(VERSION 3.20)

if(NOT DEFINED ROOT)
  message(FATAL_ERROR "check_layers.cmake: pass -DROOT=<source folder>")
endif()

# The folders, each one layer, and the folders each may include besides itself.
set(layers sim sim/formats sim/config sim/export topology/collectives topology topology/fitting calibration
           calibration/fitting workloads/pytorch
           workloads/dlrm workloads/trace workloads/transformer workloads tools/validation tools
           python)
set(uses_sim "")
# The shared readers of file formats: the standard library and their parsing libraries only.
set(uses_sim/formats "")
set(uses_sim/config sim sim/formats)
set(uses_sim/export sim sim/formats)
# topology/collectives/ is part of upsim_topology: the planner reads the fabric and the tuning,
# and the flow network runs the planner's plans.
set(uses_topology/collectives topology sim sim/config sim/formats)
set(uses_topology topology/collectives sim sim/config sim/formats)
set(uses_topology/fitting topology topology/collectives sim sim/config sim/formats)
set(uses_calibration sim sim/config sim/formats)
# Fitting, measurement readers and validation: offline maths over the runtime models, which
# never include them.
set(uses_calibration/fitting calibration sim sim/config sim/formats)
set(uses_workloads/pytorch sim sim/formats)
set(uses_workloads/dlrm workloads/pytorch sim sim/config sim/formats)
set(uses_workloads/trace workloads/pytorch sim sim/config sim/formats)
set(uses_workloads/transformer workloads/pytorch sim sim/config sim/formats)
set(uses_workloads workloads/dlrm workloads/trace workloads/transformer workloads/pytorch sim
                   sim/config sim/formats)
set(uses_tools ${layers})
set(uses_tools/validation ${layers})  # part of upsim_cli: the published-run validation
# The Python package's extension module: a second front end beside the CLI, over tools/.
set(uses_python ${layers})
# A family implements the interface in workloads/workload.h; the rest of `workloads/` (the
# registry, which includes the families) stays out of bounds for them.
set(family_interface workloads/workload.h)
# Only this file of `workloads/` includes the families (the registry names them).
set(families workloads/dlrm workloads/trace workloads/transformer)
set(family_registry workloads/workload_registry.cpp)

# Third-party headers (a regular expression on the <...> name, or on a "..." name for headers
# generated into the build folder) and the folders that may use them; `sim/` uses the standard
# library and POSIX only. "<test>" marks a library for tests and benchmarks alone.
set(libraries fmt yaml program_options mpi graph hdf5 openssl zlib protobuf pybind11 test_only)
set(library_fmt "^fmt/")
set(users_fmt sim/config sim/export topology/collectives topology topology/fitting calibration
              calibration/fitting workloads/pytorch workloads/dlrm
              workloads/trace workloads/transformer workloads tools/validation tools python)
set(library_yaml "^yaml-cpp/")
set(users_yaml sim/config)
set(library_program_options "^boost/program_options")
set(users_program_options tools tools/validation)
set(library_mpi "^mpi\\.h$")
set(users_mpi tools)
set(library_graph "^boost/graph/")
set(users_graph topology)
set(headers_graph OFF)  # Boost.Graph is kept out of headers
set(library_hdf5 "^(hdf5|H5[A-Za-z]*)\\.h$")
set(users_hdf5 calibration/fitting tools)
set(library_openssl "^openssl/")
set(users_openssl tools)
set(library_zlib "^zlib\\.h$")
set(users_zlib sim/export workloads/trace)
# libprotobuf and the classes protoc generates from sim/formats/chakra/et_def.proto: only the
# Chakra ET reader (sim/formats/chakra_et.h) includes them; workloads/trace sees the generated
# messages through that header.
set(library_protobuf "^(google/protobuf/|sim/formats/chakra/[^/]*\\.pb\\.h$)")
set(users_protobuf sim/formats)
set(library_pybind11 "^pybind11/")
set(users_pybind11 python)
set(library_test_only "^(gtest|gmock|benchmark)/")
set(users_test_only "")

# The files git tracks or would track (build folders and other ignored paths left out); without
# git, every file below ROOT.
find_program(git_program git)
set(sources "")
if(git_program)
  execute_process(COMMAND "${git_program}" ls-files --cached --others --exclude-standard -- "*.h"
                          "*.cpp"
                  WORKING_DIRECTORY "${ROOT}" RESULT_VARIABLE git_result OUTPUT_VARIABLE listed
                  ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(git_result EQUAL 0)
    string(REPLACE "\n" ";" sources "${listed}")
  endif()
endif()
if(NOT git_program OR NOT git_result EQUAL 0)
  file(GLOB_RECURSE sources RELATIVE "${ROOT}" "${ROOT}/*.h" "${ROOT}/*.cpp")
endif()
list(SORT sources)
set(broken "")
set(checked 0)
foreach(source IN LISTS sources)
  if(source MATCHES "^(test|bench|build[^/]*|\\.[^/]*)/")
    continue()
  endif()
  get_filename_component(folder "${source}" DIRECTORY)
  if(NOT folder IN_LIST layers)
    list(APPEND broken "${source}: its folder `${folder}` is no layer of ARCHITECTURE.md (add it to test/layers/check_layers.cmake)")
    continue()
  endif()
  math(EXPR checked "${checked} + 1")
  file(STRINGS "${ROOT}/${source}" lines REGEX "^[ \t]*#[ \t]*include")
  foreach(line IN LISTS lines)
    if(NOT line MATCHES "^[ \t]*#[ \t]*include[ \t]*([<\"])([^>\"]+)[>\"]")
      continue()
    endif()
    set(kind "${CMAKE_MATCH_1}")
    set(name "${CMAKE_MATCH_2}")
    if(kind STREQUAL "<")
      set(where "${source}: #include <${name}>")
    else()
      set(where "${source}: #include \"${name}\"")
    endif()
    # Third-party and generated headers first; a "..." name that is none is a project header.
    set(library_matched OFF)
    foreach(library IN LISTS libraries)
      if(NOT name MATCHES "${library_${library}}")
        continue()
      endif()
      set(library_matched ON)
      if(NOT folder IN_LIST users_${library})
        string(REPLACE ";" ", " allowed "${users_${library}}")
        if(allowed STREQUAL "")
          set(allowed "tests and benchmarks only")
        endif()
        list(APPEND broken "${where}: `${folder}` may not use this library (used by: ${allowed})")
      elseif(DEFINED headers_${library} AND NOT headers_${library} AND source MATCHES "\\.h$")
        list(APPEND broken "${where}: this library stays out of headers (include it in a .cpp)")
      endif()
    endforeach()
    if(kind STREQUAL "\"" AND NOT library_matched)
      get_filename_component(target "${name}" DIRECTORY)
      if(target STREQUAL folder)
        continue()
      endif()
      if(name STREQUAL family_interface AND folder IN_LIST families)
        continue()
      endif()
      if(NOT target IN_LIST layers)
        list(APPEND broken "${where}: `${folder}` may use only the project's layers (`${target}` is none)")
      elseif(NOT target IN_LIST uses_${folder})
        string(REPLACE ";" ", " allowed "${uses_${folder}}")
        if(allowed STREQUAL "")
          set(allowed "nothing else")
        endif()
        list(APPEND broken "${where}: `${folder}` may not use `${target}` (it may use: ${allowed})")
      elseif(target IN_LIST families AND folder STREQUAL "workloads"
             AND NOT source STREQUAL family_registry)
        list(APPEND broken "${where}: only ${family_registry} includes the workload families")
      endif()
    endif()
  endforeach()
endforeach()

list(LENGTH broken broken_count)
if(broken_count GREATER 0)
  string(REPLACE ";" "\n" report "${broken}")
  message("${report}")
  message(FATAL_ERROR "layering: ${broken_count} broken rule(s) in ${checked} files (ARCHITECTURE.md, \"Layers\")")
endif()
message(STATUS "layering: ${checked} files follow ARCHITECTURE.md's rules")
