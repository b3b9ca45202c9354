// Writes Chakra execution traces (et_def.proto wire format: length-delimited GlobalMetadata, then
// Node messages) for tests. Standard library only, so the CLI tests can write trace folders too.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace upsim::test::chakra {

/// A minimal protobuf writer.
class Pb {
 public:
  Pb& varint(uint64_t v) {
    while (v >= 0x80) {
      out_ += static_cast<char>((v & 0x7F) | 0x80);
      v >>= 7;
    }
    out_ += static_cast<char>(v);
    return *this;
  }
  Pb& field(uint32_t f, uint64_t v) { return varint(uint64_t{f} << 3).varint(v); }
  Pb& field(uint32_t f, const std::string& bytes) {
    varint((uint64_t{f} << 3) | 2).varint(bytes.size());
    out_ += bytes;
    return *this;
  }
  Pb& packed(uint32_t f, const std::vector<uint64_t>& values) {
    Pb inner;
    for (uint64_t v : values)
      inner.varint(v);
    return field(f, inner.str());
  }
  const std::string& str() const { return out_; }

 private:
  std::string out_;
};

// NodeType values of et_def.proto.
inline constexpr uint32_t kComp = 4;
inline constexpr uint32_t kCommColl = 7;

/// AttributeProto messages: int64_val, int32_val (how ASTRA-sim's feeder reads comm_src,
/// comm_dst and comm_tag), bool_val, string_val.
inline std::string attr_int(const std::string& name, int64_t v) {
  return Pb().field(1, name).field(9, static_cast<uint64_t>(v)).str();
}
inline std::string attr_i32(const std::string& name, int32_t v) {
  return Pb().field(1, name).field(7, static_cast<uint64_t>(static_cast<int64_t>(v))).str();
}
inline std::string attr_bool(const std::string& name, bool v) {
  return Pb().field(1, name).field(27, v ? 1 : 0).str();
}
inline std::string attr_string(const std::string& name, const std::string& v) {
  return Pb().field(1, name).field(29, v).str();
}
inline std::string gpu() {
  return attr_bool("is_cpu_op", false);
}
inline std::string cpu() {
  return attr_bool("is_cpu_op", true);
}

/// Appends one length-delimited message.
inline void message(std::string& file, const std::string& msg) {
  file += Pb().varint(msg.size()).str();
  file += msg;
}

/// One node message: `attrs` are encoded AttributeProto messages; `shapes` / `types` (if not
/// empty) the inputs IOInfo as the PyTorch converter writes them ("[[64, 32], [32, 16]]",
/// "['Tensor(float)', 'Tensor(float)']").
inline std::string node(uint64_t id, const std::string& name, uint32_t type,
                        const std::vector<uint64_t>& data_deps, uint64_t duration_us,
                        const std::vector<std::string>& attrs, const std::string& shapes = "",
                        const std::string& types = "") {
  Pb pb;
  pb.field(1, id).field(2, name).field(3, type);
  if (!data_deps.empty()) pb.packed(5, data_deps);
  if (duration_us > 0) pb.field(7, duration_us);
  if (!shapes.empty() || !types.empty()) pb.field(8, Pb().field(2, shapes).field(3, types).str());
  for (const std::string& a : attrs)
    pb.field(10, a);
  return pb.str();
}

/// A trace file: GlobalMetadata (version "0.0.4"), then `nodes`.
inline std::string et_file(const std::vector<std::string>& nodes) {
  std::string file;
  message(file, Pb().field(1, std::string("0.0.4")).str());
  for (const std::string& n : nodes)
    message(file, n);
  return file;
}

/// One rank of a data-parallel step: a GPU kernel of `compute_us`, an all-reduce of `bytes`
/// (comm_type 0, measured `allreduce_us`) after it, and a kernel of `compute_us` after that, all
/// on one stream, back to back from start_time_micros 1000 (measured span: 2 x compute_us +
/// allreduce_us). No shapes: model mode keeps the kernels measured.
inline std::string data_parallel_rank(uint64_t compute_us, int64_t bytes, uint64_t allreduce_us) {
  const auto started = [](const std::string& node_msg, uint64_t start_us) {
    return node_msg + Pb().field(6, start_us).str();
  };
  return et_file({
      started(node(1, "forward_backward", kComp, {}, compute_us, {gpu(), attr_int("stream", 7)}),
              1000),
      started(node(2, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", kCommColl, {1}, allreduce_us,
                   {gpu(), attr_int("stream", 7), attr_int("comm_type", 0),
                    attr_int("comm_size", bytes)}),
              1000 + compute_us),
      started(node(3, "optimizer_step", kComp, {2}, compute_us, {gpu(), attr_int("stream", 7)}),
              1000 + compute_us + allreduce_us),
  });
}

}  // namespace upsim::test::chakra
