#include "workloads/trace/chakra_trace.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <tuple>

#include "sim/executor.h"
#include "sim/formats/parse_error.h"
#include "sim/network_model.h"
#include "test/unit/trace/chakra_writer.h"
#include "test/unit/trace/synthetic_trace.h"
#include "workloads/trace/trace_replay.h"

namespace upsim {
namespace {

using namespace upsim::test::chakra;

/// A rank: CPU op (1) -> GPU kernel (2) -> metadata (3) -> all-reduce (4); CPU op (5) after 1.
/// Node 4 writes its dependency unpacked (one varint per id, as proto2 writers do), the others
/// packed (proto3's default).
std::string chakra_rank(uint64_t coll_us) {
  et::Node all_reduce = node(4, "nccl:all_reduce", et::COMM_COLL_NODE, {}, coll_us,
                             {attr_int("comm_type", et::ALL_REDUCE), attr_int("comm_size", 4096),
                              attr_string("pg_name", "0")});
  all_reduce.set_start_time_micros(60);
  add_unpacked_data_dep(all_reduce, 3);
  et::Node kernel = node(2, "sgemm", et::COMP_NODE, {1}, 50, {gpu(), attr_int("stream", 7)});
  kernel.set_start_time_micros(10);
  et::Node add = node(5, "aten::add", et::COMP_NODE, {1}, 5, {cpu()});
  add.set_start_time_micros(10);
  return et_file({
      node(1, "aten::mm", et::COMP_NODE, {}, 10, {cpu()}),
      kernel,
      node(3, "meta", et::METADATA_NODE, {2}, 0, {}),
      all_reduce,
      add,
  });
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
  } catch (const ParseError& e) {
    EXPECT_EQ(e.file(), "cut.et");
    EXPECT_NE(std::string(e.what()).find("runs past the end"), std::string::npos);
  }
  const std::string dangling = et_file({node(1, "k", et::COMP_NODE, {42}, 1, {})});
  std::vector<ChakraTrace> one;
  one.push_back(parse_chakra_trace(dangling, "dangling.et"));
  TaskGraph g;
  try {
    build_chakra_graph(one, g);
    FAIL();
  } catch (const ParseError& e) {
    EXPECT_EQ(std::string(e.what()),
              "dangling.et: node 1 (COMP_NODE `k`) has data dependency 42, a node the trace does "
              "not have");
  }
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

et::Node node(uint64_t id, const std::string& name, ChakraNodeType type,
              const std::vector<uint64_t>& data_deps, uint64_t duration_us,
              const std::vector<et::AttributeProto>& attrs, const std::string& shapes = "",
              const std::string& types = "") {
  return test::chakra::node(id, name, static_cast<et::NodeType>(type), data_deps, duration_us,
                            attrs, shapes, types);
}

et::Node send(uint64_t id, int32_t dst, int32_t tag, int64_t bytes, uint64_t us,
              const std::vector<uint64_t>& deps = {}) {
  return node(
      id, "send", ChakraNodeType::kCommSend, deps, us,
      {gpu(), attr_i32("comm_dst", dst), attr_i32("comm_tag", tag), attr_int("comm_size", bytes)});
}
et::Node recv(uint64_t id, int32_t src, int32_t tag, int64_t bytes, uint64_t us,
              const std::vector<uint64_t>& deps = {}, int64_t stream = -1) {
  std::vector<et::AttributeProto> attrs = {gpu(), attr_i32("comm_src", src),
                                           attr_i32("comm_tag", tag), attr_int("comm_size", bytes)};
  if (stream >= 0) attrs.push_back(attr_int("stream", stream));
  return node(id, "recv", ChakraNodeType::kCommRecv, deps, us, attrs);
}

std::vector<ChakraTrace> parse_all(const std::vector<std::string>& files) {
  std::vector<ChakraTrace> out;
  for (size_t r = 0; r < files.size(); ++r)
    out.push_back(parse_chakra_trace(files[r], "rank" + std::to_string(r) + ".et"));
  return out;
}

/// The ParseError message build_chakra_graph throws for `files`, naming the file.
std::string graph_error(const std::vector<std::string>& files) {
  TaskGraph g;
  try {
    build_chakra_graph(parse_all(files), g);
  } catch (const ParseError& e) {
    return e.what();
  }
  return "(no error)";
}

size_t count_kind(const TaskGraph& g, TaskKind kind) {
  size_t n = 0;
  for (TaskId t = 0; t < g.task_count(); ++t)
    n += g.task(t).kind == kind ? 1 : 0;
  return n;
}

TEST(ChakraTrace, host_threads_follow_tid_and_streams_follow_stream_then_tid) {
  // A host-side COMM_COLL_NODE (is_cpu_op, as c10d calls are in test/data/chakra) is a CPU op
  // on its thread, not a collective. The autograd thread's op (tid 2) ends last: the end of the
  // trace waits for it.
  const std::string file = et_file({
      node(1, "aten::conv2d", ChakraNodeType::kComp, {}, 10, {cpu(), attr_int("tid", 1)}),
      node(2, "c10d::allreduce_", ChakraNodeType::kCommColl, {1}, 5, {cpu(), attr_int("tid", 1)}),
      node(3, "conv_kernel", ChakraNodeType::kComp, {1}, 40, {gpu(), attr_int("tid", 7)}),
      node(4, "copy_kernel", ChakraNodeType::kComp, {1}, 20,
           {gpu(), attr_int("tid", 7), attr_int("stream", 3)}),
      node(5, "aten::convolution_backward", ChakraNodeType::kComp, {2}, 100,
           {cpu(), attr_int("tid", 2)}),
  });
  std::vector<ChakraTrace> ranks = parse_all({file});
  TaskGraph g;
  const TraceGraphInfo info = build_chakra_graph(ranks, g);
  EXPECT_EQ(info.collective_groups, 0u);
  EXPECT_EQ(info.ranks[0].cpu_threads, 2u);
  EXPECT_EQ(info.ranks[0].kernels, 2u);
  EXPECT_EQ(info.ranks[0].collectives, 0u);
  EXPECT_EQ(g.rank(0).stream_names, (std::vector<std::string>{"stream 3", "stream 7"}));
  EXPECT_EQ(count_kind(g, TaskKind::kCpuOp), 3u);
  g.seal();
  // Thread 1: 0..10, 10..15; thread 2 waits for node 2: 15..115; kernels 10..50, 10..30.
  const TraceReplayResult r = run_replay_graph(g, info);
  EXPECT_EQ(r.ranks[0].predicted, Duration::from_us(115));
}

TEST(ChakraTrace, sends_and_receives_match_by_peer_and_tag_in_order) {
  // Rank 1 posts its tag-6 receive before its tag-5 one, on another stream; the two tag-7
  // transfers match in order (first with first), which their byte counts check.
  const std::string rank0 = et_file({
      node(1, "aten::add", ChakraNodeType::kComp, {}, 10, {cpu()}),
      send(2, 1, 5, 1024, 30, {1}),
      send(3, 1, 6, 2048, 40, {1}),
      send(4, 1, 7, 100, 1, {1}),
      send(5, 1, 7, 200, 1, {1}),
  });
  const std::string rank1 = et_file({
      node(1, "k", ChakraNodeType::kComp, {}, 100, {gpu()}),
      recv(2, 0, 6, 2048, 15, {1}, 2),
      recv(3, 0, 5, 1024, 25, {1}, 1),
      recv(4, 0, 7, 100, 1, {}, 1),
      recv(5, 0, 7, 200, 1, {}, 1),
  });
  TaskGraph g;
  const TraceGraphInfo info = build_chakra_graph(parse_all({rank0, rank1}), g);
  ASSERT_EQ(info.collective_groups, 4u);
  EXPECT_EQ(info.ranks[0].collectives, 4u);
  EXPECT_EQ(info.ranks[1].collectives, 4u);
  for (CollectiveId c = 0; c < 4; ++c) {
    EXPECT_EQ(g.collective(c).kind, CollectiveKind::kSendRecv);
    EXPECT_EQ(g.collective(c).members, (std::vector<RankId>{0, 1}));
  }
  EXPECT_EQ(g.collective(0).bytes, 1024);  // tag 5
  EXPECT_EQ(g.collective(1).bytes, 2048);  // tag 6
  EXPECT_EQ(g.collective(2).bytes, 100);
  EXPECT_EQ(g.collective(3).bytes, 200);
  g.seal();
  // Rank 0's sends queue on its comm stream from 10 us; rank 1's receives wait for its kernel
  // (0..100). Tag 5: 100..125 (the shorter side, 25 us); tag 6: 125..140 (15 us); tag 7: the
  // receives sit behind tag 5 on stream 1, the sends behind tag 6: 140..141, 141..142.
  const TraceReplayResult r = run_replay_graph(g, info);
  EXPECT_EQ(r.ranks[0].predicted, Duration::from_us(142));
  EXPECT_EQ(r.ranks[1].predicted, Duration::from_us(142));
}

TEST(ChakraTrace, crossed_sends_fail_the_run_instead_of_hanging) {
  // Both ranks send first and receive second on one stream: NCCL would deadlock, and so does the
  // replay, which the executor reports.
  const std::string rank0 = et_file({send(1, 1, 0, 8, 5), recv(2, 1, 0, 8, 5)});
  const std::string rank1 = et_file({send(1, 0, 0, 8, 5), recv(2, 0, 0, 8, 5)});
  TaskGraph g;
  const TraceGraphInfo info = build_chakra_graph(parse_all({rank0, rank1}), g);
  g.seal();
  EXPECT_THROW(run_replay_graph(g, info), SimulationError);
}

TEST(ChakraTrace, unmatched_point_to_point_names_the_file_and_node) {
  const std::string one_recv = et_file({recv(1, 0, 5, 64, 3)});
  EXPECT_EQ(graph_error({et_file({send(7, 1, 5, 64, 3), send(8, 1, 5, 64, 3)}), one_recv}),
            "rank0.et: node 8 (COMM_SEND_NODE `send`) has no matching receive in rank1.et (2 "
            "COMM_SEND_NODE and 1 COMM_RECV_NODE of rank 0 -> rank 1, comm_tag 5)");
  EXPECT_EQ(graph_error({et_file({send(7, 1, 4, 64, 3)}), one_recv}),
            "rank0.et: node 7 (COMM_SEND_NODE `send`) has no matching receive in rank1.et (1 "
            "COMM_SEND_NODE and 0 COMM_RECV_NODE of rank 0 -> rank 1, comm_tag 4)");
  EXPECT_EQ(graph_error({et_file({}), one_recv}),
            "rank1.et: node 1 (COMM_RECV_NODE `recv`) has no matching send in rank0.et (0 "
            "COMM_SEND_NODE and 1 COMM_RECV_NODE of rank 0 -> rank 1, comm_tag 5)");
  EXPECT_EQ(graph_error({et_file({send(3, 2, 5, 64, 3)}), one_recv}),
            "rank0.et: node 3 (COMM_SEND_NODE `send`) has comm_dst 2, but the traces are ranks "
            "0..1");
  EXPECT_EQ(graph_error({et_file({send(3, 0, 5, 64, 3)}), one_recv}),
            "rank0.et: node 3 (COMM_SEND_NODE `send`) has comm_dst 0, its own rank");
  EXPECT_EQ(graph_error({et_file({send(3, 1, 5, 32, 3)}), one_recv}),
            "rank0.et: node 3 (COMM_SEND_NODE `send`) sends 32 bytes, but the matching node 1 "
            "(COMM_RECV_NODE `recv`) in rank1.et receives 64");
  const et::Node wrong_src =
      node(3, "send", ChakraNodeType::kCommSend, {}, 3,
           {gpu(), attr_i32("comm_src", 1), attr_i32("comm_dst", 1), attr_i32("comm_tag", 5)});
  EXPECT_EQ(graph_error({et_file({wrong_src}), one_recv}),
            "rank0.et: node 3 (COMM_SEND_NODE `send`) has comm_src 1, but it is in the trace of "
            "rank 0");
}

TEST(ChakraTrace, sends_without_a_peer_replay_measured_with_a_warning) {
  // The PyTorch converter writes comm_size and pg_name on sends and receives, no peer.
  const std::string file = et_file({node(1, "ncclDevKernel_SendRecv", ChakraNodeType::kCommSend, {},
                                         12, {gpu(), attr_int("comm_size", 4096)})});
  TaskGraph g;
  std::vector<std::string> warnings;
  const TraceGraphInfo info = build_chakra_graph(parse_all({file}), g, {}, &warnings);
  EXPECT_EQ(info.collective_groups, 0u);
  ASSERT_EQ(warnings.size(), 2u);  // the send, and no timestamps
  EXPECT_EQ(warnings[0],
            "rank0.et: 1 COMM_SEND_NODE / COMM_RECV_NODE without comm_dst / comm_src (first: "
            "node 1 (COMM_SEND_NODE `ncclDevKernel_SendRecv`)) replayed with their measured "
            "time, not matched across ranks");
  g.seal();
  EXPECT_EQ(run_replay_graph(g, info).ranks[0].predicted, Duration::from_us(12));
}

TEST(ChakraTrace, process_groups_form_collectives_among_the_ranks_that_use_them) {
  auto coll = [](uint64_t id, const std::string& pg, int64_t comm_type, uint64_t us) {
    std::vector<et::AttributeProto> attrs = {gpu(), attr_int("comm_type", comm_type),
                                             attr_int("comm_size", 1 << 20)};
    if (!pg.empty()) attrs.push_back(attr_string("pg_name", pg));
    return node(id, "nccl", ChakraNodeType::kCommColl, {}, us, attrs);
  };
  // pg "tp" spans ranks 0 and 1; the world collective (no pg_name) all three.
  const std::string r0 = et_file({coll(1, "tp", 2, 30), coll(2, "", 0, 50)});
  const std::string r1 = et_file({coll(1, "tp", 2, 20), coll(2, "", 0, 40)});
  const std::string r2 = et_file({coll(1, "", 0, 45)});
  TaskGraph g;
  const TraceGraphInfo info = build_chakra_graph(parse_all({r0, r1, r2}), g);
  ASSERT_EQ(info.collective_groups, 2u);
  EXPECT_EQ(g.collective(0).kind, CollectiveKind::kAllReduce);  // "" sorts first
  EXPECT_EQ(g.collective(0).members, (std::vector<RankId>{0, 1, 2}));
  EXPECT_EQ(g.collective(1).kind, CollectiveKind::kAllGather);
  EXPECT_EQ(g.collective(1).members, (std::vector<RankId>{0, 1}));
  EXPECT_EQ(g.collective(1).bytes, 1 << 20);
  g.seal();
  // all-gather 0..20 on ranks 0 and 1; all-reduce when all three arrived at 20: 20..60.
  const TraceReplayResult r = run_replay_graph(g, info);
  EXPECT_EQ(r.ranks[2].predicted, Duration::from_us(60));

  EXPECT_EQ(graph_error({r0, et_file({coll(1, "tp", 2, 20)}), r2}),
            "rank1.et: no collective without pg_name, but rank0.et has 1 (first: node 2 "
            "(COMM_COLL_NODE `nccl`)); a collective without a process group spans every rank: "
            "the traces do not belong to one run");
  EXPECT_EQ(
      graph_error(
          {r0, et_file({coll(1, "tp", 2, 20), coll(2, "tp", 2, 20), coll(3, "", 0, 40)}), r2}),
      "rank1.et: node 2 (COMM_COLL_NODE `nccl`) is collective 2 of process group `tp`, but "
      "rank0.et has only 1: the traces do not belong to one run");
  EXPECT_EQ(graph_error({r0, et_file({coll(1, "tp", 6, 20), coll(2, "", 0, 40)}), r2}),
            "rank1.et: node 1 (COMM_COLL_NODE `nccl`) is all_to_all, but the collective it "
            "meets in rank0.et, node 1 (COMM_COLL_NODE `nccl`), is all_gather: the traces do not "
            "belong to one run");
  EXPECT_EQ(graph_error({et_file({coll(1, "", 12, 5)})}),
            "rank0.et: node 1 (COMM_COLL_NODE `nccl`): comm_type 12 is not a CollectiveCommType "
            "(0..9)");
}

/// Toy models for the model-mode tests (not calibrated): GEMMs at 1 TFLOP/s, other kernels at
/// 100 GB/s; collectives 10 us + bytes / `bandwidth`; copies 2 us + bytes / 10 GB/s.
class ToyKernels final : public KernelCostModel {
 public:
  Duration kernel_duration(const KernelDesc& k, const DeviceProfile&) const override {
    if (k.cls == KernelClass::kGemm) {
      return Duration::from_seconds_f(2.0 * static_cast<double>(k.batch * k.m * k.n * k.k) / 1e12);
    }
    return Duration::from_seconds_f((k.bytes_read + k.bytes_written) / 100e9);
  }
};

class ToyCollectives final : public CollectiveCostModel {
 public:
  explicit ToyCollectives(double bandwidth) : bandwidth_(bandwidth) {}
  Duration collective_duration(const CollectiveDesc& c) const override {
    return Duration::from_us(10) +
           Duration::from_seconds_f(static_cast<double>(c.bytes) / bandwidth_);
  }
  Duration transfer_duration(const TransferDesc& t) const override {
    return Duration::from_us(2) + Duration::from_seconds_f(static_cast<double>(t.bytes) / 10e9);
  }

 private:
  double bandwidth_;
};

class NoHostModel final : public CpuCostModel {
 public:
  Duration host_duration(const HostOpDesc&) const override {
    ADD_FAILURE() << "Chakra model mode keeps the measured host time";
    return Duration::zero();
  }
};

/// Runs a sealed Chakra graph with the toy models, collectives at `bandwidth` bytes/s.
TraceReplayResult run_toy(const TaskGraph& g, const TraceGraphInfo& info, double bandwidth) {
  ToyKernels kernels;
  NoHostModel cpu;
  ToyCollectives collectives(bandwidth);
  AnalyticalNetwork network(collectives);
  ModelSet models;
  models.kernels = &kernels;
  models.cpu = &cpu;
  models.network = &network;
  models.devices.assign(info.ranks.size(), DeviceProfile{});
  return run_trace_graph(g, info, models);
}

/// A rank whose step is serial on one stream: GEMM (aten::mm with shapes) -> convolution kernel
/// (shapes, but no kernel model) -> kernel with only num_ops / tensor_size -> all-reduce of
/// `bytes` -> kernel without shapes; and a 1 MB host-to-device copy on another stream.
std::string model_rank(int64_t bytes) {
  const std::string mm_shapes = "[[64, 32], [32, 16]]";
  const std::string conv_shapes = "[[8, 3, 32, 32], [16, 3, 3, 3], [], [[1, 1]], 1]";
  const std::string two_floats = "['Tensor(float)', 'Tensor(float)']";
  const std::string conv_types =
      "['Tensor(float)', 'Tensor(float)', 'None', 'GenericList[Int,Int]', 'Int']";
  return et_file({
      node(1, "aten::mm(0)", ChakraNodeType::kComp, {}, 5, {cpu(), attr_int("tid", 1)}, mm_shapes,
           two_floats),
      node(2, "volta_sgemm_128x64_nn", ChakraNodeType::kComp, {1}, 40,
           {gpu(), attr_int("stream", 7)}, mm_shapes, two_floats),
      node(3, "aten::conv2d(0)", ChakraNodeType::kComp, {1}, 5, {cpu(), attr_int("tid", 1)},
           conv_shapes, conv_types),
      node(4, "implicit_convolve_sgemm", ChakraNodeType::kComp, {2, 3}, 70,
           {gpu(), attr_int("stream", 7)}, conv_shapes, conv_types),
      node(5, "roofline_node", ChakraNodeType::kComp, {4}, 30,
           {gpu(), attr_int("stream", 7), attr_int("num_ops", 1000),
            attr_int("tensor_size", 1'000'000)}),
      node(6, "ncclDevKernel_AllReduce", ChakraNodeType::kCommColl, {5}, 500,
           {gpu(), attr_int("stream", 7), attr_int("comm_type", 0), attr_int("comm_size", bytes)}),
      node(7, "optimizer_step", ChakraNodeType::kComp, {6}, 20, {gpu(), attr_int("stream", 7)}),
      node(8, "h2d", ChakraNodeType::kMemLoad, {}, 99,
           {gpu(), attr_int("stream", 3), attr_int("tensor_size", 1'000'000)}),
  });
}

TEST(ChakraTrace, model_mode_prices_communication_copies_and_kernels_with_shapes) {
  const int64_t bytes = 100'000'000;
  ChakraGraphOptions options;
  options.mode = TraceMode::kModel;
  TaskGraph g;
  const TraceGraphInfo info =
      build_chakra_graph(parse_all({model_rank(bytes), model_rank(bytes)}), g, options);
  ASSERT_EQ(info.ranks.size(), 2u);
  EXPECT_EQ(info.ranks[0].kernels, 4u);
  // The convolution (no kernel model) and the kernel without shapes or num_ops.
  EXPECT_EQ(info.ranks[0].kernels_kept_measured, 2u);
  EXPECT_EQ(info.ranks[0].collectives_kept_measured, 0u);
  std::map<std::string, TaskId> by_name;
  for (TaskId t = 0; t < g.task_count(); ++t) {
    if (g.task(t).rank == 0) by_name[std::string(g.name(g.task(t).op_name))] = t;
  }
  const KernelDesc& gemm = g.kernel(by_name.at("volta_sgemm_128x64_nn"));
  EXPECT_EQ(gemm.cls, KernelClass::kGemm);
  EXPECT_EQ(std::make_tuple(gemm.m, gemm.n, gemm.k), std::make_tuple(64, 16, 32));
  EXPECT_EQ(g.task(by_name.at("volta_sgemm_128x64_nn")).fixed_ps, -1);
  EXPECT_EQ(g.task(by_name.at("implicit_convolve_sgemm")).fixed_ps, Duration::from_us(70).ps());
  EXPECT_EQ(g.kernel(by_name.at("roofline_node")).bytes_read, 1e6);
  EXPECT_EQ(g.task(by_name.at("roofline_node")).fixed_ps, -1);
  EXPECT_EQ(g.task(by_name.at("ncclDevKernel_AllReduce")).fixed_ps, -1);
  EXPECT_EQ(g.task(by_name.at("h2d")).fixed_ps, -1);
  EXPECT_EQ(g.task(by_name.at("optimizer_step")).fixed_ps, Duration::from_us(20).ps());
  EXPECT_EQ(g.task(by_name.at("aten::mm(0)")).fixed_ps, Duration::from_us(5).ps());
  g.seal();

  // Host: mm op 0..5, conv op 5..10. Stream: GEMM 2*64*16*32 / 1e12 = 65.536 ns from 5 us, the
  // convolution after its op (10..80, measured), roofline node 1 MB / 100 GB/s = 10 us, all-reduce
  // 10 us + 100 MB / bandwidth, optimizer 20 us (measured); the copy (102 us) runs alongside.
  const Duration fixed = Duration::from_us(10 + 70 + 10 + 10 + 20);
  const TraceReplayResult fast = run_toy(g, info, 50e9);
  const TraceReplayResult slow = run_toy(g, info, 25e9);  // the link at half its bandwidth
  ASSERT_EQ(fast.ranks.size(), 2u);
  EXPECT_EQ(fast.ranks[0].predicted, fixed + Duration::from_us(2000));
  EXPECT_EQ(slow.ranks[0].predicted, fixed + Duration::from_us(4000));
  EXPECT_EQ(slow.ranks[1].predicted, slow.ranks[0].predicted);
  // Replay: GEMM 5..45, convolution 45..115, then 30 + 500 + 20 us, whatever the network.
  TaskGraph replay;
  const TraceGraphInfo replay_info =
      build_chakra_graph(parse_all({model_rank(bytes), model_rank(bytes)}), replay);
  replay.seal();
  EXPECT_EQ(run_toy(replay, replay_info, 25e9).ranks[0].predicted, Duration::from_us(665));
}

TEST(ChakraTrace, model_mode_keeps_collectives_without_peer_traces_measured) {
  // One rank of a multi-rank job (as test/data/chakra): nothing for the network to move.
  ChakraGraphOptions options;
  options.mode = TraceMode::kModel;
  TaskGraph g;
  const TraceGraphInfo info = build_chakra_graph(parse_all({model_rank(1 << 20)}), g, options);
  EXPECT_EQ(info.ranks[0].collectives, 1u);
  EXPECT_EQ(info.ranks[0].collectives_kept_measured, 1u);
  g.seal();
  EXPECT_EQ(run_toy(g, info, 1e9).ranks[0].predicted, Duration::from_us(10 + 70 + 10 + 500 + 20));
}

TEST(ChakraTrace, matched_sends_and_receives_are_priced_in_model_mode) {
  ChakraGraphOptions options;
  options.mode = TraceMode::kModel;
  const std::string rank0 = et_file({send(1, 1, 0, 50'000'000, 900)});
  const std::string rank1 = et_file({recv(1, 0, 0, 50'000'000, 900)});
  TaskGraph g;
  const TraceGraphInfo info = build_chakra_graph(parse_all({rank0, rank1}), g, options);
  g.seal();
  // 10 us + 50 MB / 10 GB/s = 5010 us, not the measured 900 us.
  EXPECT_EQ(run_toy(g, info, 10e9).ranks[1].predicted, Duration::from_us(5010));
}

/// test/data/chakra/chakra.0.et.gz: numbers from SOURCES.md (counted by a separate decoder and
/// the repository's JSON dump of the same trace).
TEST(ChakraTrace, the_real_chakra_feeder_trace_reads_and_replays) {
  const std::filesystem::path file =
      std::filesystem::path(UPSIM_CHAKRA_TEST_DATA) / "chakra.0.et.gz";
  const ChakraTrace t = read_chakra_trace(file);
  EXPECT_EQ(t.version, "");
  ASSERT_EQ(t.metadata.size(), 5u);
  EXPECT_EQ(t.metadata[0].name, "schema");
  EXPECT_EQ(t.metadata[0].s, "1.0.1");
  EXPECT_EQ(t.metadata[3].name, "start_ts");
  EXPECT_EQ(t.metadata[3].i, 216405745);
  EXPECT_EQ(t.metadata[4].i, 216433101);
  ASSERT_EQ(t.nodes.size(), 3664u);
  EXPECT_EQ(t.nodes.front().id, 216u);
  EXPECT_EQ(t.nodes.back().id, 7022u);
  std::map<std::pair<uint32_t, bool>, size_t> by_type;
  size_t data_deps = 0;
  size_t timed = 0;
  size_t started = 0;
  std::map<int64_t, size_t> cpu_by_tid;
  for (const ChakraNode& n : t.nodes) {
    const bool is_cpu = n.attr("is_cpu_op") && n.attr("is_cpu_op")->b;
    ++by_type[{n.type, is_cpu}];
    data_deps += n.data_deps.size();
    timed += n.duration_micros > 0 ? 1 : 0;
    started += n.start_time_micros > 0 ? 1 : 0;
    if (is_cpu) ++cpu_by_tid[n.attr("tid")->i];
  }
  const uint32_t comp = static_cast<uint32_t>(ChakraNodeType::kComp);
  const uint32_t coll = static_cast<uint32_t>(ChakraNodeType::kCommColl);
  EXPECT_EQ(
      by_type,
      (std::map<std::pair<uint32_t, bool>, size_t>{
          {{comp, false}, 1209}, {{comp, true}, 2434}, {{coll, false}, 7}, {{coll, true}, 14}}));
  EXPECT_EQ(data_deps, 181878u);
  EXPECT_EQ(timed, 3507u);
  EXPECT_EQ(started, 0u);
  EXPECT_EQ(cpu_by_tid, (std::map<int64_t, size_t>{{1, 868}, {2, 1580}}));
  const ChakraNode& allreduce = *std::find_if(t.nodes.begin(), t.nodes.end(),
                                              [](const ChakraNode& n) { return n.id == 3256; });
  EXPECT_EQ(allreduce.attr("comm_type")->i, 0);
  EXPECT_EQ(allreduce.attr("comm_size")->i, 8196000);
  EXPECT_EQ(allreduce.attr("involved_dim")->ints, std::vector<int64_t>{1});  // bool_list
  EXPECT_EQ(allreduce.duration_micros, 5572u);

  std::vector<ChakraTrace> ranks;
  ranks.push_back(t);
  TaskGraph g;
  std::vector<std::string> warnings;
  const TraceGraphInfo info = build_chakra_graph(ranks, g, {}, &warnings);
  EXPECT_EQ(info.collective_groups, 7u);
  EXPECT_EQ(info.ranks[0].kernels, 1209u);
  EXPECT_EQ(info.ranks[0].collectives, 7u);
  EXPECT_EQ(info.ranks[0].cpu_threads, 2u);
  EXPECT_EQ(g.rank(0).stream_names, (std::vector<std::string>{"stream 7", "stream 14"}));
  EXPECT_EQ(count_kind(g, TaskKind::kCpuOp), 2448u);
  int64_t bytes = 0;
  size_t broadcasts = 0;
  for (CollectiveId c = 0; c < g.collective_count(); ++c) {
    bytes += g.collective(c).bytes;
    broadcasts += g.collective(c).kind == CollectiveKind::kBroadcast ? 1 : 0;
  }
  EXPECT_EQ(bytes, 102441032);
  EXPECT_EQ(broadcasts, 2u);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("no node has start_time_micros"), std::string::npos);
  g.seal();
  const TraceReplayResult r = run_replay_graph(g, info);
  ASSERT_EQ(r.ranks.size(), 1u);
  // The list-scheduling replay of the JSON dump (SOURCES.md) ends at the same microsecond.
  EXPECT_EQ(r.ranks[0].predicted, Duration::from_us(297046));
  EXPECT_EQ(r.ranks[0].measured, Duration::from_ms(216433101 - 216405745));
  EXPECT_EQ(r.ranks[0].iteration, "ET observer window");
}

/// Model mode on test/data/chakra: the kernels' inputs name their op; 413 of the 1209 GPU
/// kernels belong to convolutions (counted by a separate Python decoder with the rule of
/// ChakraGraphOptions::mode), which no kernel model prices; every other kernel gets a descriptor.
/// The 7 all-reduces and broadcasts have no peer trace here and keep their measured time.
TEST(ChakraTrace, the_real_chakra_feeder_trace_in_model_mode_keeps_convolutions_measured) {
  std::vector<ChakraTrace> ranks;
  ranks.push_back(
      read_chakra_trace(std::filesystem::path(UPSIM_CHAKRA_TEST_DATA) / "chakra.0.et.gz"));
  ChakraGraphOptions options;
  options.mode = TraceMode::kModel;
  TaskGraph g;
  const TraceGraphInfo info = build_chakra_graph(ranks, g, options);
  EXPECT_EQ(info.ranks[0].kernels, 1209u);
  EXPECT_EQ(info.ranks[0].kernels_kept_measured, 413u);
  EXPECT_EQ(info.ranks[0].collectives_kept_measured, 7u);
  size_t gemms = 0;
  for (TaskId t = 0; t < g.task_count(); ++t) {
    const Task& task = g.task(t);
    if (task.kind != TaskKind::kKernel || task.fixed_ps >= 0) continue;
    if (g.kernel(t).cls == KernelClass::kGemm) {
      ++gemms;
      EXPECT_GT(g.kernel(t).m * g.kernel(t).n * g.kernel(t).k, 0);
    }
  }
  EXPECT_GT(gemms, 0u);  // the classifier: aten::linear forward, aten::mm backward
}

TEST(ChakraTrace, a_directory_with_a_gzipped_chakra_trace_validates) {
  const TraceReplayResult r = validate_trace_directory(UPSIM_CHAKRA_TEST_DATA);
  ASSERT_EQ(r.ranks.size(), 1u);
  EXPECT_EQ(std::filesystem::path(r.ranks[0].file).filename(), "chakra.0.et.gz");
  EXPECT_EQ(r.ranks[0].predicted, Duration::from_us(297046));
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("chakra.0.et.gz: no node has start_time_micros"), std::string::npos);
  // The observer's window is not an iteration: no error against it (it printed -98.91%).
  EXPECT_NE(r.ranks[0].not_an_iteration.find("the execution-trace observer's window"),
            std::string::npos);
  EXPECT_EQ(r.ranks[0].error, 0.0);
  const std::string table = format_trace_validation(r.ranks);
  EXPECT_NE(table.find("297.0460      n/a\nn/a: chakra.0.et.gz: no node has a start time"),
            std::string::npos)
      << table;
  EXPECT_EQ(table.find("geomean |error|"), std::string::npos) << table;
  EXPECT_EQ(table.find("%"), std::string::npos) << table;
}

}  // namespace
}  // namespace upsim
