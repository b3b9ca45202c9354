// Chakra execution traces (MLCommons Chakra ET, schema sim/formats/chakra/et_def.proto) as a
// second input format, and their task graph.
//
// File layout: one file per rank, a stream of length-delimited protobuf messages (each preceded
// by its size as a varint): first a GlobalMetadata, then Node messages. sim/formats/chakra_et.h
// splits the stream and parses each message with libprotobuf; parse_chakra_trace copies the
// generated messages into the structures below. Unknown fields are skipped, so newer schema
// versions read. A truncated or corrupt file throws ParseError naming the file, the message and
// its byte offset.
//
// Graph (build_chakra_graph), following ASTRA-sim's reading of the format:
//  - Nodes with attr is_cpu_op = true (absent = false, as in Chakra's feeder) -> CpuOp on the
//    CPU thread of attr `tid` (threads numbered in tid order; no tid counts as tid 0), whatever
//    their type (the converter that wrote test/data/chakra typed host-side c10d::allreduce_
//    calls COMM_COLL_NODE). The other nodes run on a GPU stream: attr `stream`, else attr `tid`
//    (converters before `stream` existed wrote the Kineto tid, which for GPU events is the
//    stream), else a `comm` stream for communication nodes and stream 0 for the rest. COMP_NODE ->
//    Kernel (num_ops, tensor_size); MEM_LOAD_NODE / MEM_STORE_NODE -> a host to device / device to
//    host copy of tensor_size bytes; COMM_COLL_NODE -> Collective; COMM_SEND_NODE / COMM_RECV_NODE
//    -> a send/recv Collective of the matched pair; METADATA_NODE and unknown types -> no task
//    (their dependencies pass through).
//  - Model mode (ChakraGraphOptions::mode) re-prices communication, copies and, where the node
//    has shapes, kernels with the run's models.
//  - Durations: duration_micros (whole microseconds; the PyTorch converter writes Kineto's
//    exclusive time truncated, so GPU ops under 1 us, stored without the field, take zero).
//  - data_deps become explicit edges (ctrl_deps too with `use_ctrl_deps`; a ctrl_dep on a node the
//    converter did not emit, such as the thread root, is ignored; a missing data_dep is an error).
//    Tasks of one thread or stream run in node-id order (the PyTorch host trace numbers ops as they
//    start; in test/data/chakra the GPU node ids of a stream follow their launching ops), so
//    same-stream order holds where the converter wrote no edge for it (chakra#215).
//  - Collectives: the k-th GPU COMM_COLL_NODE of process group attr pg_name on each rank that uses
//    that group forms one group (without pg_name: the k-th on every rank). Kind from comm_type
//    (CollectiveCommType; REDUCE, GATHER, SCATTER, BARRIER take the kind with their traffic
//    pattern), else from the name as the converter reads it; bytes = comm_size. Different counts
//    or kinds across ranks are an error naming the file and node.
//  - Point-to-point: a COMM_SEND_NODE on rank s with comm_dst d and comm_tag t (default 0) matches
//    the COMM_RECV_NODE on rank d with comm_src s and the same tag, the k-th send with the k-th
//    receive (rank = position in `traces`); bytes = comm_size, else tensor_size. A send or receive
//    without its partner, a peer outside the ranks or equal to the own rank, a comm_src of a send
//    (comm_dst of a receive) other than the own rank, or differing byte counts are errors naming
//    the file and node. Sends / receives that name no peer (the PyTorch converter writes none) run
//    with their measured time, unmatched, and are reported in `warnings`.
//  - A group's fixed duration is its shortest measured member (the last arrival's, which did not
//    wait for the others).
//  - One trace is one iteration: IterationMark 0 before the first task of thread 0,
//    IterationMark 1 after a device-wide HostSync on thread 0 that also waits for the other
//    threads. Measured: the span of the task nodes' start_time_micros + duration_micros if any
//    node has a nonzero start_time_micros; else (the PyTorch converter writes none) the PyTorch
//    execution-trace observer's lifetime, GlobalMetadata attrs finish_ts - start_ts (steady-clock
//    milliseconds, written by torch/csrc/profiler/standalone/execution_trace_observer.cpp at
//    observer registration and removal; an upper bound that includes untraced host time), with a
//    warning and TraceIteration::not_an_iteration set (the summary prints no error against it).
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

/// One attribute (AttributeProto); which members are set depends on `kind`: double and float
/// values -> kDouble (d); bool -> kBool (b, and i = 0 / 1); string and bytes -> kString (s); every
/// integer type -> kInt (i; uint64 and fixed64 as their int64 bits); their lists alike (ints,
/// doubles, strings; a bool list is a kIntList); no value -> kInt 0.
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
  /// inputs (IOInfo): `shapes` and `types` as the PyTorch converter writes them,
  /// Python-literal lists: "[[64], [64], []]", "['Tensor(float)', 'Tensor(float)', 'Bool']";
  /// a Tensor[] argument is one nested list, "GenericList[Tensor(float),...]".
  std::string input_shapes;
  std::string input_types;
  std::vector<ChakraAttr> attrs;

  const ChakraAttr* attr(std::string_view name) const;
};

struct ChakraTrace {
  std::string file;
  std::string version;
  std::vector<ChakraAttr> metadata;
  std::vector<ChakraNode> nodes;  ///< in file order
};

/// "COMP_NODE", "COMM_SEND_NODE", ... (NodeType names of et_def.proto).
std::string_view chakra_node_type_name(uint32_t type);

ChakraTrace parse_chakra_trace(std::string_view bytes, const std::string& file);
/// Reads `path` (raw, or gzip-compressed).
ChakraTrace read_chakra_trace(const std::filesystem::path& path);

struct ChakraGraphOptions {
  bool use_ctrl_deps = false;
  /// kReplay: every task takes its measured duration. kModel (what-if on another fabric or GPU):
  ///  - COMM_COLL_NODE groups of two or more ranks and matched sends / receives have no fixed
  ///    duration: the run's NetworkModel prices them (comm_size bytes). A group with one rank in
  ///    the trace set keeps its measured time (collectives_kept_measured).
  ///  - MEM_LOAD_NODE / MEM_STORE_NODE with tensor_size > 0: priced by the NetworkModel as
  ///    host-device copies.
  ///  - GPU COMP_NODEs: op_kernel_desc (trace_kernel_desc.h) over the node's input shapes and
  ///    types, the op being the CPU node it depends on with the same inputs (ctrl_deps first, then
  ///    data_deps), else its first CPU data_dep (the converter's "(N)" suffix dropped; the
  ///    converter copies an op's inputs onto its kernels, while a kernel's ctrl_dep in
  ///    test/data/chakra is often another op); without shapes or op, attrs num_ops and
  ///    tensor_size (et_generator / ASTRA-sim's roofline inputs) as a memory-bound kernel of
  ///    num_ops operations over tensor_size bytes. Otherwise (no shapes and no num_ops, or an op
  ///    no kernel model describes) the measured time, counted in kernels_kept_measured.
  ///  - CPU nodes, peerless sends / receives and dependencies stay as measured.
  TraceMode mode = TraceMode::kReplay;
};

/// Adds one rank per trace to `graph` (unsealed and without ranks; std::invalid_argument
/// otherwise), rank r = traces[r]. Throws ParseError naming the file and node on duplicate node
/// ids, data dependencies on unknown nodes, dependency cycles through nodes without a task, and
/// collectives or sends / receives that do not match across ranks. Appends to `warnings` (if given)
/// what the replay cannot honour: unmatched peerless sends and receives, and a measured time that
/// is not the nodes' own span.
TraceGraphInfo build_chakra_graph(const std::vector<ChakraTrace>& traces, TaskGraph& graph,
                                  const ChakraGraphOptions& options = {},
                                  std::vector<std::string>* warnings = nullptr);

}  // namespace upsim
