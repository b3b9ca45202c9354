#include "workloads/trace/chakra_trace.h"

#include <utility>

#include "sim/formats/chakra_et.h"
#include "sim/formats/parse_error.h"
#include "workloads/trace/trace_file.h"

namespace upsim {

const ChakraAttr* ChakraNode::attr(std::string_view key) const {
  for (const ChakraAttr& a : attrs) {
    if (a.name == key) return &a;
  }
  return nullptr;
}

namespace {

namespace et = chakra_et;

template <typename Values>
std::vector<int64_t> int_values(const Values& values) {
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(values.size()));
  for (const auto v : values)
    out.push_back(static_cast<int64_t>(v));
  return out;
}

/// An AttributeProto as a ChakraAttr: double and float values (and lists) are doubles, string and
/// bytes values strings, bool a bool (and its integer 0 / 1), every other scalar an integer; an
/// attribute without a value is the integer 0.
ChakraAttr to_attr(et::AttributeProto& p) {
  using V = et::AttributeProto::ValueCase;
  ChakraAttr a;
  a.name = std::move(*p.mutable_name());
  switch (p.value_case()) {
    case V::kDoubleVal:
      a.kind = ChakraAttr::Kind::kDouble;
      a.d = p.double_val();
      break;
    case V::kFloatVal:
      a.kind = ChakraAttr::Kind::kDouble;
      a.d = static_cast<double>(p.float_val());
      break;
    case V::kInt32Val:
      a.i = p.int32_val();
      break;
    case V::kInt64Val:
      a.i = p.int64_val();
      break;
    case V::kUint32Val:
      a.i = p.uint32_val();
      break;
    case V::kUint64Val:
      a.i = static_cast<int64_t>(p.uint64_val());
      break;
    case V::kSint32Val:
      a.i = p.sint32_val();
      break;
    case V::kSint64Val:
      a.i = p.sint64_val();
      break;
    case V::kFixed32Val:
      a.i = p.fixed32_val();
      break;
    case V::kFixed64Val:
      a.i = static_cast<int64_t>(p.fixed64_val());
      break;
    case V::kSfixed32Val:
      a.i = p.sfixed32_val();
      break;
    case V::kSfixed64Val:
      a.i = p.sfixed64_val();
      break;
    case V::kBoolVal:
      a.kind = ChakraAttr::Kind::kBool;
      a.b = p.bool_val();
      a.i = a.b ? 1 : 0;
      break;
    case V::kStringVal:
      a.kind = ChakraAttr::Kind::kString;
      a.s = std::move(*p.mutable_string_val());
      break;
    case V::kBytesVal:
      a.kind = ChakraAttr::Kind::kString;
      a.s = std::move(*p.mutable_bytes_val());
      break;
    case V::kDoubleList:
      a.kind = ChakraAttr::Kind::kDoubleList;
      a.doubles.assign(p.double_list().values().begin(), p.double_list().values().end());
      break;
    case V::kFloatList:
      a.kind = ChakraAttr::Kind::kDoubleList;
      for (const float f : p.float_list().values())
        a.doubles.push_back(static_cast<double>(f));
      break;
    case V::kInt32List:
      a.kind = ChakraAttr::Kind::kIntList;
      a.ints = int_values(p.int32_list().values());
      break;
    case V::kInt64List:
      a.kind = ChakraAttr::Kind::kIntList;
      a.ints = int_values(p.int64_list().values());
      break;
    case V::kUint32List:
      a.kind = ChakraAttr::Kind::kIntList;
      a.ints = int_values(p.uint32_list().values());
      break;
    case V::kUint64List:
      a.kind = ChakraAttr::Kind::kIntList;
      a.ints = int_values(p.uint64_list().values());
      break;
    case V::kSint32List:
      a.kind = ChakraAttr::Kind::kIntList;
      a.ints = int_values(p.sint32_list().values());
      break;
    case V::kSint64List:
      a.kind = ChakraAttr::Kind::kIntList;
      a.ints = int_values(p.sint64_list().values());
      break;
    case V::kFixed32List:
      a.kind = ChakraAttr::Kind::kIntList;
      a.ints = int_values(p.fixed32_list().values());
      break;
    case V::kFixed64List:
      a.kind = ChakraAttr::Kind::kIntList;
      a.ints = int_values(p.fixed64_list().values());
      break;
    case V::kSfixed32List:
      a.kind = ChakraAttr::Kind::kIntList;
      a.ints = int_values(p.sfixed32_list().values());
      break;
    case V::kSfixed64List:
      a.kind = ChakraAttr::Kind::kIntList;
      a.ints = int_values(p.sfixed64_list().values());
      break;
    case V::kBoolList:
      a.kind = ChakraAttr::Kind::kIntList;
      a.ints = int_values(p.bool_list().values());
      break;
    case V::kStringList:
      a.kind = ChakraAttr::Kind::kStringList;
      a.strings.assign(p.string_list().values().begin(), p.string_list().values().end());
      break;
    case V::kBytesList:
      a.kind = ChakraAttr::Kind::kStringList;
      a.strings.assign(p.bytes_list().values().begin(), p.bytes_list().values().end());
      break;
    case V::VALUE_NOT_SET:
      break;
  }
  return a;
}

/// `p`'s fields as a ChakraNode; the strings are moved out of `p`.
ChakraNode to_node(et::Node& p) {
  ChakraNode n;
  n.id = p.id();
  n.name = std::move(*p.mutable_name());
  n.type = static_cast<uint32_t>(p.type());
  n.ctrl_deps.assign(p.ctrl_deps().begin(), p.ctrl_deps().end());
  n.data_deps.assign(p.data_deps().begin(), p.data_deps().end());
  n.start_time_micros = p.start_time_micros();
  n.duration_micros = p.duration_micros();
  if (p.has_inputs()) {
    n.input_shapes = std::move(*p.mutable_inputs()->mutable_shapes());
    n.input_types = std::move(*p.mutable_inputs()->mutable_types());
  }
  n.attrs.reserve(static_cast<size_t>(p.attr_size()));
  for (et::AttributeProto& a : *p.mutable_attr())
    n.attrs.push_back(to_attr(a));
  return n;
}

}  // namespace

ChakraTrace parse_chakra_trace(std::string_view bytes, const std::string& file) {
  ChakraTrace t;
  t.file = file;
  if (bytes.empty()) throw ParseError(file, "empty file: not a Chakra trace");
  ChakraEtReader reader(bytes, file);
  et::GlobalMetadata metadata;
  reader.read_metadata(metadata);
  t.version = std::move(*metadata.mutable_version());
  for (et::AttributeProto& a : *metadata.mutable_attr())
    t.metadata.push_back(to_attr(a));
  et::Node node;
  while (reader.next_node(node))
    t.nodes.push_back(to_node(node));
  return t;
}

ChakraTrace read_chakra_trace(const std::filesystem::path& path) {
  const std::string bytes = read_trace_file(path);
  return parse_chakra_trace(bytes, path.string());
}

std::string_view chakra_node_type_name(uint32_t type) {
  switch (type) {
    case 0:
      return "INVALID_NODE";
    case 1:
      return "METADATA_NODE";
    case 2:
      return "MEM_LOAD_NODE";
    case 3:
      return "MEM_STORE_NODE";
    case 4:
      return "COMP_NODE";
    case 5:
      return "COMM_SEND_NODE";
    case 6:
      return "COMM_RECV_NODE";
    case 7:
      return "COMM_COLL_NODE";
    default:
      return "unknown node type";
  }
}

}  // namespace upsim
