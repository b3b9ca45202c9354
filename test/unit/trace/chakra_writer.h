// Writes Chakra execution traces for tests with the classes protoc generates from
// sim/formats/chakra/et_def.proto: a GlobalMetadata, then Node messages, each preceded by its size
// as a varint (protobuf's delimited framing, what sim/formats/chakra_et.h reads).
#pragma once

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <cstdint>
#include <string>
#include <vector>

#include "sim/formats/chakra/et_def.pb.h"

namespace upsim::test::chakra {

namespace et = ::upsim::chakra_et;

/// Appends `msg` to `file`, preceded by its size as a varint.
inline void message(std::string& file, const google::protobuf::MessageLite& msg) {
  std::string body;
  msg.SerializeToString(&body);
  google::protobuf::io::StringOutputStream out(&file);
  google::protobuf::io::CodedOutputStream coded(&out);
  coded.WriteVarint32(static_cast<uint32_t>(body.size()));
  coded.WriteString(body);
}

/// AttributeProto messages: int64_val, int32_val (how ASTRA-sim's feeder reads comm_src,
/// comm_dst and comm_tag), bool_val, string_val.
inline et::AttributeProto attr_int(const std::string& name, int64_t v) {
  et::AttributeProto a;
  a.set_name(name);
  a.set_int64_val(v);
  return a;
}
inline et::AttributeProto attr_i32(const std::string& name, int32_t v) {
  et::AttributeProto a;
  a.set_name(name);
  a.set_int32_val(v);
  return a;
}
inline et::AttributeProto attr_bool(const std::string& name, bool v) {
  et::AttributeProto a;
  a.set_name(name);
  a.set_bool_val(v);
  return a;
}
inline et::AttributeProto attr_string(const std::string& name, const std::string& v) {
  et::AttributeProto a;
  a.set_name(name);
  a.set_string_val(v);
  return a;
}
inline et::AttributeProto gpu() {
  return attr_bool("is_cpu_op", false);
}
inline et::AttributeProto cpu() {
  return attr_bool("is_cpu_op", true);
}

/// One node: `shapes` / `types` (if not empty) the inputs IOInfo as the PyTorch converter writes
/// them ("[[64, 32], [32, 16]]", "['Tensor(float)', 'Tensor(float)']").
inline et::Node node(uint64_t id, const std::string& name, et::NodeType type,
                     const std::vector<uint64_t>& data_deps, uint64_t duration_us,
                     const std::vector<et::AttributeProto>& attrs, const std::string& shapes = "",
                     const std::string& types = "") {
  et::Node n;
  n.set_id(id);
  n.set_name(name);
  n.set_type(type);
  for (uint64_t d : data_deps)
    n.add_data_deps(d);
  n.set_duration_micros(duration_us);
  if (!shapes.empty() || !types.empty()) {
    n.mutable_inputs()->set_shapes(shapes);
    n.mutable_inputs()->set_types(types);
  }
  for (const et::AttributeProto& a : attrs)
    *n.add_attr() = a;
  return n;
}

/// Appends `id` to `n`'s data_deps unpacked, as a varint field of its own after the other fields
/// (how proto2 writers write repeated scalars; proto3's serializer packs them).
inline void add_unpacked_data_dep(et::Node& n, uint64_t id) {
  n.GetReflection()->MutableUnknownFields(&n)->AddVarint(et::Node::kDataDepsFieldNumber, id);
}

/// A trace file: GlobalMetadata (version "0.0.4"), then `nodes`.
inline std::string et_file(const std::vector<et::Node>& nodes) {
  std::string file;
  et::GlobalMetadata metadata;
  metadata.set_version("0.0.4");
  message(file, metadata);
  for (const et::Node& n : nodes)
    message(file, n);
  return file;
}

/// One rank of a data-parallel step: a GPU kernel of `compute_us`, an all-reduce of `bytes`
/// (comm_type 0, measured `allreduce_us`) after it, and a kernel of `compute_us` after that, all
/// on one stream, back to back from start_time_micros 1000 (measured span: 2 x compute_us +
/// allreduce_us). No shapes: model mode keeps the kernels measured.
inline std::string data_parallel_rank(uint64_t compute_us, int64_t bytes, uint64_t allreduce_us) {
  const auto started = [](et::Node n, uint64_t start_us) {
    n.set_start_time_micros(start_us);
    return n;
  };
  return et_file({
      started(node(1, "forward_backward", et::COMP_NODE, {}, compute_us,
                   {gpu(), attr_int("stream", 7)}),
              1000),
      started(
          node(2, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", et::COMM_COLL_NODE, {1}, allreduce_us,
               {gpu(), attr_int("stream", 7), attr_int("comm_type", et::ALL_REDUCE),
                attr_int("comm_size", bytes)}),
          1000 + compute_us),
      started(
          node(3, "optimizer_step", et::COMP_NODE, {2}, compute_us, {gpu(), attr_int("stream", 7)}),
          1000 + compute_us + allreduce_us),
  });
}

}  // namespace upsim::test::chakra
