// Chakra execution traces (mlcommons/chakra schema/protobuf/et_def.proto, package
// ChakraProtoMsg; peers.md section 4.2) as a second input format, and their task graph.
//
// File layout: one file per rank, a stream of length-delimited protobuf messages (each preceded
// by its size as a varint): first GlobalMetadata {version = 1, attr = 2}, then Node messages
// {id = 1, name = 2, type = 3, ctrl_deps = 4, data_deps = 5, start_time_micros = 6,
// duration_micros = 7, inputs = 8, outputs = 9, attr = 10}. The reader decodes the protobuf wire
// format itself (no protobuf library); unknown fields are skipped, so newer schema versions
// read. A truncated or corrupt file throws TraceError naming the file and the byte offset.
//
// Graph (build_chakra_graph), following ASTRA-sim's reading of the format:
//  - COMP_NODE with attr is_cpu_op = true -> CpuOp on the rank's CPU thread; other COMP_NODEs ->
//    Kernel on stream attr `stream` (default 0); MEM_LOAD_NODE / MEM_STORE_NODE -> a host to
//    device / device to host copy of attr tensor_size bytes; COMM_COLL_NODE -> Collective of kind
//    comm_type and comm_size bytes; METADATA_NODE and node types without a timing meaning ->
//    nothing. Durations: duration_micros (Chakra keeps only whole microseconds).
//  - data_deps become explicit edges (ctrl_deps too with `use_ctrl_deps`); tasks of one
//    resource run in node-id order (the converter numbers nodes in execution order), so
//    same-stream order holds even where the converter lost it (chakra#215).
//  - The k-th collective of process group attr pg_name (else the k-th collective) on every rank
//    forms one group; its fixed duration is the shortest measured member (the last arrival).
//  - One trace is one iteration: IterationMark 0 before the first CPU task, IterationMark 1 after
//    a device-wide HostSync at the end.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "sim/task_graph.h"
#include "workloads/trace/trace_graph.h"

namespace upsim {

enum class ChakraNodeType : uint8_t {
  kInvalid = 0,
  kMetadata = 1,
  kMemLoad = 2,
  kMemStore = 3,
  kComp = 4,
  kCommSend = 5,
  kCommRecv = 6,
  kCommColl = 7,
};

/// One attribute value; which members are set depends on `kind`.
struct ChakraAttr {
  enum class Kind : uint8_t { kInt, kDouble, kBool, kString, kIntList, kDoubleList, kStringList };
  std::string name;
  Kind kind = Kind::kInt;
  int64_t i = 0;
  double d = 0.0;
  bool b = false;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<double> doubles;
  std::vector<std::string> strings;
};

struct ChakraNode {
  uint64_t id = 0;
  std::string name;
  uint32_t type = 0;  ///< ChakraNodeType value (newer types pass through)
  std::vector<uint64_t> ctrl_deps;
  std::vector<uint64_t> data_deps;
  uint64_t start_time_micros = 0;
  uint64_t duration_micros = 0;
  std::vector<ChakraAttr> attrs;

  const ChakraAttr* attr(std::string_view name) const;
};

struct ChakraTrace {
  std::string file;
  std::string version;
  std::vector<ChakraAttr> metadata;
  std::vector<ChakraNode> nodes;  ///< in file order
};

ChakraTrace parse_chakra_trace(std::string_view bytes, const std::string& file);
/// Reads `path` (raw, or gzip-compressed).
ChakraTrace read_chakra_trace(const std::filesystem::path& path);

struct ChakraGraphOptions {
  bool use_ctrl_deps = false;
};

/// Adds one rank per trace to `graph` (unsealed). Throws TraceError naming the file on
/// dependencies on unknown nodes, or collectives that do not match across ranks.
TraceGraphInfo build_chakra_graph(const std::vector<ChakraTrace>& traces, TaskGraph& graph,
                                  const ChakraGraphOptions& options = {});

}  // namespace upsim
