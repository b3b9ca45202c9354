#include "workloads/trace/chakra_trace.h"

#include <gtest/gtest.h>

#include "test/unit/trace/synthetic_trace.h"
#include "workloads/trace/trace_error.h"
#include "workloads/trace/trace_replay.h"

namespace upsim {
namespace {

/// A minimal protobuf writer for building Chakra traces in tests.
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

std::string attr_int(const std::string& name, int64_t v) {
  return Pb().field(1, name).field(9, static_cast<uint64_t>(v)).str();  // int64_val
}
std::string attr_bool(const std::string& name, bool v) {
  return Pb().field(1, name).field(27, v ? 1 : 0).str();
}
std::string attr_string(const std::string& name, const std::string& v) {
  return Pb().field(1, name).field(29, v).str();
}

/// Appends one length-delimited message.
void message(std::string& file, const std::string& msg) {
  file += Pb().varint(msg.size()).str();
  file += msg;
}

/// A rank: CPU op (1) -> GPU kernel (2) -> metadata (3) -> all-reduce (4); CPU op (5) after 1.
std::string chakra_rank(uint64_t coll_us) {
  std::string file;
  message(file, Pb().field(1, std::string("0.0.4")).str());
  message(file, Pb().field(1, 1)
                    .field(2, std::string("aten::mm"))
                    .field(3, 4)
                    .field(6, 0)
                    .field(7, 10)
                    .field(10, attr_bool("is_cpu_op", true))
                    .str());
  message(file, Pb().field(1, 2)
                    .field(2, std::string("sgemm"))
                    .field(3, 4)
                    .packed(5, {1})
                    .field(6, 10)
                    .field(7, 50)
                    .field(10, attr_bool("is_cpu_op", false))
                    .field(10, attr_int("stream", 7))
                    .str());
  message(file, Pb().field(1, 3).field(2, std::string("meta")).field(3, 1).field(5, 2).str());
  message(file, Pb().field(1, 4)
                    .field(2, std::string("nccl:all_reduce"))
                    .field(3, 7)
                    .field(5, 3)
                    .field(6, 60)
                    .field(7, coll_us)
                    .field(10, attr_int("comm_type", 0))
                    .field(10, attr_int("comm_size", 4096))
                    .field(10, attr_string("pg_name", "0"))
                    .str());
  message(file, Pb().field(1, 5)
                    .field(2, std::string("aten::add"))
                    .field(3, 4)
                    .field(5, 1)
                    .field(6, 10)
                    .field(7, 5)
                    .field(10, attr_bool("is_cpu_op", true))
                    .str());
  return file;
}

TEST(ChakraTrace, decodes_nodes_dependencies_and_attributes) {
  const ChakraTrace t = parse_chakra_trace(chakra_rank(30), "rank0.et");
  EXPECT_EQ(t.version, "0.0.4");
  ASSERT_EQ(t.nodes.size(), 5u);
  EXPECT_EQ(t.nodes[1].name, "sgemm");
  EXPECT_EQ(t.nodes[1].data_deps, std::vector<uint64_t>{1});  // packed
  EXPECT_EQ(t.nodes[3].data_deps, std::vector<uint64_t>{3});  // unpacked
  EXPECT_EQ(t.nodes[3].type, static_cast<uint32_t>(ChakraNodeType::kCommColl));
  ASSERT_NE(t.nodes[3].attr("pg_name"), nullptr);
  EXPECT_EQ(t.nodes[3].attr("pg_name")->s, "0");
  EXPECT_EQ(t.nodes[3].attr("comm_size")->i, 4096);
  EXPECT_TRUE(t.nodes[0].attr("is_cpu_op")->b);
  EXPECT_EQ(t.nodes[1].duration_micros, 50u);
}

TEST(ChakraTrace, ranks_meet_at_their_collectives_and_replay) {
  std::vector<ChakraTrace> ranks;
  ranks.push_back(parse_chakra_trace(chakra_rank(30), "rank0.et"));
  ranks.push_back(parse_chakra_trace(chakra_rank(20), "rank1.et"));
  TaskGraph g;
  const TraceGraphInfo info = build_chakra_graph(ranks, g);
  ASSERT_EQ(info.collective_groups, 1u);
  EXPECT_EQ(g.collective(0).bytes, 4096);
  EXPECT_EQ(g.collective(0).members, (std::vector<RankId>{0, 1}));
  EXPECT_EQ(info.ranks[0].kernels, 1u);
  EXPECT_EQ(g.rank(0).stream_names, (std::vector<std::string>{"comm", "stream 7"}));
  g.seal();
  // CPU op 0..10, kernel 10..60 (after the op), all-reduce 60..80 (the shorter member: the last
  // arrival's transfer), the end-of-trace sync returns at 80.
  const TraceReplayResult r = run_replay_graph(g, info);
  ASSERT_EQ(r.ranks.size(), 2u);
  EXPECT_EQ(r.ranks[0].predicted, Duration::from_us(80));
  EXPECT_EQ(r.ranks[1].predicted, Duration::from_us(80));
  EXPECT_EQ(r.ranks[1].measured, Duration::from_us(80));  // the trace's own span
}

TEST(ChakraTrace, truncated_or_inconsistent_input_names_the_file) {
  const std::string full = chakra_rank(30);
  try {
    parse_chakra_trace(full.substr(0, full.size() - 3), "cut.et");
    FAIL();
  } catch (const TraceError& e) {
    EXPECT_EQ(e.file(), "cut.et");
    EXPECT_NE(std::string(e.what()).find("runs past the end"), std::string::npos);
  }
  std::string dangling;
  message(dangling, Pb().field(1, std::string("0.0.4")).str());
  message(dangling,
          Pb().field(1, 1).field(2, std::string("k")).field(3, 4).field(5, 42).field(7, 1).str());
  std::vector<ChakraTrace> one;
  one.push_back(parse_chakra_trace(dangling, "dangling.et"));
  TaskGraph g;
  try {
    build_chakra_graph(one, g);
    FAIL();
  } catch (const TraceError& e) {
    EXPECT_EQ(std::string(e.what()),
              "dangling.et: node 1 depends on node 42, which the trace does not have");
  }
  std::vector<ChakraTrace> mismatched;
  mismatched.push_back(parse_chakra_trace(chakra_rank(30), "rank0.et"));
  mismatched.push_back(parse_chakra_trace(dangling, "rank1.et"));
  TaskGraph g2;
  EXPECT_THROW(build_chakra_graph(mismatched, g2), TraceError);
}

TEST(ChakraTrace, a_directory_of_chakra_traces_validates) {
  test::TempDir dir;
  dir.write("dlrm.1.et", chakra_rank(20));
  dir.write("dlrm.0.et", chakra_rank(30));
  const TraceReplayResult r = validate_trace_directory(dir.path());
  ASSERT_EQ(r.ranks.size(), 2u);
  EXPECT_EQ(std::filesystem::path(r.ranks[0].file).filename(), "dlrm.0.et");
  EXPECT_EQ(r.ranks[0].measured, Duration::from_us(90));
  EXPECT_EQ(r.ranks[0].predicted, Duration::from_us(80));
}

}  // namespace
}  // namespace upsim
