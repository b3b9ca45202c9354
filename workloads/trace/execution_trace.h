// PyTorch execution traces (ExecutionTraceObserver JSON, schemas 1.0.x and 1.1.x-chakra) and
// their linking to the Kineto trace of the same process.
//
// Schemas read:
//  - 1.0.x: node {name, id, rf_id, parent, fw_parent, seq_id, scope, tid, fw_tid, op_schema,
//    inputs, input_shapes, input_types, outputs, output_shapes, output_types};
//  - 1.1.x-chakra: node {id, name, ctrl_deps (= parent), inputs {values, shapes, types},
//    outputs {values, shapes, types}, attrs [{name, type, value}]} where attrs carry rf_id, tid,
//    ... and, on record_param_comms nodes, collective_name, dtype, in/out_msg_nelems,
//    in/out_split_size, pg_name, pg_size, global_rank_start/stride.
// Both are normalised into EtNode. A tensor value is [tensor id, storage id, offset, elements,
// bytes per element, device]. A `## process_group:init ##` node lists the process groups.
//
// Linking (link_execution_trace): an ET node is the same PyTorch op as a Kineto cpu_op or
// user_annotation event when
//  1. both carry the record-function id (Kineto "Record function id" == ET rf_id, PyTorch >= 2.1)
//     and the names agree; otherwise
//  2. by sequence alignment per thread: the Kineto host ops of one thread in record-function
//     order (External id) against the ET ops of one ET thread in rf_id order, names compared,
//     starting at the offset that matches best (the ET covers one iteration of a Kineto trace
//     that may hold many: the first best-matching iteration is linked) and resynchronising over
//     ops present in only one of the two (ProfilerStep#N is never in the ET) within 8 ops.
// ET threads are paired with Kineto threads by the best alignment score.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sim/formats/json_reader.h"
#include "workloads/trace/kineto_trace.h"

namespace upsim {

struct EtNode {
  int64_t id = -1;
  int64_t parent = -1;
  int64_t rf_id = -1;
  int64_t tid = -1;
  int64_t seq_id = -1;
  std::string name;
  std::string op_schema;
  JsonValue inputs;  ///< kArray of input values (tensors, scalars, lists, strings)
  JsonValue input_shapes;
  std::vector<std::string> input_types;
  JsonValue outputs;
  JsonValue output_shapes;
  std::vector<std::string> output_types;
  /// 1.1.x attrs other than the fields above (collective_name, pg_name, ...).
  std::vector<std::pair<std::string, JsonValue>> attrs;

  const JsonValue* attr(std::string_view key) const;
  /// Thread roots and the process root ("[pytorch|profiler|execution_trace|thread]"): not ops.
  bool is_root() const;
};

struct EtProcessGroup {
  std::string name;            ///< pg_name ("0", "1", ...)
  std::string desc;            ///< pg_desc ("default_pg", ...)
  std::vector<int64_t> ranks;  ///< global ranks; empty = all ranks
  int64_t size = -1;
};

struct ExecutionTrace {
  std::string file;
  std::string schema;
  int64_t pid = -1;
  std::string time;
  std::vector<EtNode> nodes;  ///< in file order
  std::vector<EtProcessGroup> process_groups;
};

/// Throws ParseError (naming the file) on malformed input or a document that is not an ET.
ExecutionTrace parse_execution_trace(std::string_view text, const std::string& file);
ExecutionTrace read_execution_trace(const std::filesystem::path& path);

/// A collective as recorded by a record_param_comms node (c10d's RECORD_PARAM_COMMS).
struct EtCollective {
  std::string name;  ///< "allreduce", "all_to_allv", "broadcast", "wait", ...
  int64_t seq = -1;  ///< the process group's collective sequence number (same on every rank)
  std::string pg;    ///< process group: pg_name, or the group object's address (old schemas)
  int64_t pg_size = -1;
  /// The group's global ranks (global_rank_start + i x global_rank_stride, i < group size),
  /// when the record carries them; empty otherwise.
  std::vector<int64_t> pg_ranks;
  int64_t in_bytes = -1;  ///< total bytes of the input tensor(s)
  int64_t out_bytes = -1;
  int64_t in_elems = -1;
  int64_t out_elems = -1;
  int64_t elem_bytes = -1;
  std::vector<int64_t> in_split;  ///< all-to-allv: elements (rows) sent to each peer
  std::vector<int64_t> out_split;
};
/// The collective of a record_param_comms node; nullopt for other nodes.
std::optional<EtCollective> et_collective(const EtNode& node);
/// Bytes of a tensor value or of a list of them; -1 if `value` is not a tensor.
int64_t et_tensor_bytes(const JsonValue& value);

struct EtLink {
  std::vector<uint32_t> event_of_node;  ///< per ET node: Kineto event index, or UINT32_MAX
  std::unordered_map<uint32_t, uint32_t> node_of_event;
  size_t et_ops = 0;  ///< ET nodes that are ops (roots excluded)
  size_t linked = 0;
  bool pid_match = false;  ///< both files carry the same process id
  bool by_record_function_id = false;
  double linked_fraction() const {
    return et_ops == 0 ? 0.0 : static_cast<double>(linked) / static_cast<double>(et_ops);
  }
};

/// Links `et` to `kineto` (never throws; judge the result with check_et_link).
EtLink link_execution_trace(const KinetoTrace& kineto, const ExecutionTrace& et);

/// The ET belongs to the Kineto trace when their process ids agree (where both have one) and at
/// least kMinLinkedFraction of the ET ops were linked. Returns the reason when it does not.
inline constexpr double kMinLinkedFraction = 0.9;
std::optional<std::string> et_link_problem(const EtLink& link, const KinetoTrace& kineto,
                                           const ExecutionTrace& et);

}  // namespace upsim
