// Megatron-Core's EP all-to-all overlap (moe.a2a_overlap; workloads/transformer/combined_1f1b.cpp,
// layer_nodes.cpp): the combined 1F1B schedule's order (one extra warm-up forward, then each
// forward beside the backward after it), the paired micro-batches' dispatch and combine on the
// communication stream with the same kernels as without the overlap, the dispatcher's host wait
// on the count copy rather than on the compute stream, the step on two DGX H100 nodes (faster
// than without, hiding at most the exposed expert-parallel communication), interleaved
// pipelines, the memory of the one more layer in flight, and what the config refuses.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "test/unit/transformer/step_simulation.h"
#include "test/unit/transformer/test_configs.h"
#include "test/unit/transformer/workload_yaml.h"
#include "workloads/transformer/op_emitter.h"
#include "workloads/transformer/pipeline_schedule.h"
#include "workloads/transformer/transformer_memory.h"
#include "workloads/transformer/transformer_workload.h"

namespace upsim {
namespace {

/// test_configs::fine_moe (8 layers, 32 experts, top 8, expert parallel 16 on two DGX nodes)
/// with the overlap as given and `micro_batches` micro-batches per replica.
TransformerConfig overlap_moe(MoeDispatcher dispatcher, bool overlap, int64_t micro_batches) {
  TransformerConfig c = test_configs::fine_moe(dispatcher, micro_batches);
  c.moe.a2a_overlap = overlap;
  return c;
}

std::vector<uint32_t> two_nodes() {
  return test_configs::dgx_nodes(16);
}

/// Rank 0's tasks of `kind` named `name` (the op name for collectives, the task name otherwise;
/// of host op `op` when given) in one generated step, by the stream they run on (a host sync:
/// the stream it waits for).
std::map<uint16_t, int> by_stream(const TransformerConfig& c, TaskKind kind,
                                  const std::string& name, const std::string& op = "") {
  TaskGraph g;
  generate_transformer(c, TransformerGraphInputs(1, two_nodes()), g);
  std::map<uint16_t, int> out;
  for (TaskId t = 0; t < g.task_count(); ++t) {
    const Task& task = g.task(t);
    if (task.rank != 0 || task.kind != kind) continue;
    const std::string_view n = g.name(kind == TaskKind::kCollective ? task.op_name : task.name);
    if (n != name || (!op.empty() && g.name(task.op_name) != op)) continue;
    ++out[kind == TaskKind::kHostSync ? g.sync_target(t) : task.resource];
  }
  return out;
}

// Without a pipeline: the first micro-batch's forward alone, then each forward with the backward
// of the micro-batch before it, then the last backward alone (combined_1f1b.py).
TEST(A2aOverlap, TheScheduleRunsOneMoreForwardFirstThenPairs) {
  const std::vector<PipelineStep> s = pipeline_schedule(PipelineSchedule::k1F1B, 1, 1, 3, 0, 1);
  const std::vector<std::pair<bool, int64_t>> expected = {{true, 0}, {true, 1},  {false, 0},
                                                          {true, 2}, {false, 1}, {false, 2}};
  ASSERT_EQ(s.size(), expected.size());
  for (size_t i = 0; i < s.size(); ++i) {
    EXPECT_EQ(s[i].forward, expected[i].first) << i;
    EXPECT_EQ(s[i].micro_batch, expected[i].second) << i;
    // The forwards of micro-batches 1 and 2 run with the backward after them.
    EXPECT_EQ(s[i].steady, i == 1 || i == 3) << i;
  }
  // One micro-batch: no pair (its backward needs its own forward done).
  const std::vector<PipelineStep> one = pipeline_schedule(PipelineSchedule::k1F1B, 1, 1, 1, 0, 1);
  ASSERT_EQ(one.size(), 2U);
  EXPECT_FALSE(one[0].steady);
}

// Two micro-batches, 8 MoE layers: the forward of micro-batch 1 runs beside the backward of
// micro-batch 0, so their all-to-alls (dispatch and combine, and their gradients: 4 a layer) go
// to the communication stream, those of the forward and backward run alone stay on the compute
// stream; the host waits on the count copy (cudaEventSynchronize on the copy stream) in the
// paired forward and on the compute stream in the lone one; the kernels are those without the
// overlap.
TEST(A2aOverlap, PairedMicroBatchesCommunicateOnTheirStreamWithTheSameKernels) {
  const TransformerConfig c = overlap_moe(MoeDispatcher::kAllToAll, true, 2);
  const int layers = static_cast<int>(c.layers);
  EXPECT_EQ(by_stream(c, TaskKind::kCollective, "c10d::all_to_all_single"),
            (std::map<uint16_t, int>{{transformer_emit::kCompute, 4 * layers},
                                     {transformer_emit::kEpComm, 4 * layers}}));
  EXPECT_EQ(by_stream(c, TaskKind::kHostSync, "cudaEventSynchronize"),
            (std::map<uint16_t, int>{{transformer_emit::kEpDtoH, layers}}));
  EXPECT_EQ(by_stream(c, TaskKind::kHostSync, "cudaStreamSynchronize"),
            (std::map<uint16_t, int>{{transformer_emit::kCompute, layers}}));
  EXPECT_EQ(test_configs::kernel_counts(c),
            test_configs::kernel_counts(overlap_moe(MoeDispatcher::kAllToAll, false, 2)));
  // moe.delay_wgrad: the same kernels, the paired backward's weight gradients in backward_dw
  // ops of their own: per layer the experts' two grouped GEMMs (the kMlp node's) and the
  // attention's qkv and output projection (the kPreDispatch node's).
  TransformerConfig delayed = c;
  delayed.moe.delay_wgrad = true;
  EXPECT_EQ(test_configs::kernel_counts(delayed), test_configs::kernel_counts(c));
  EXPECT_EQ(by_stream(delayed, TaskKind::kKernel, "bf16gemm/wgrad", "backward_dw"),
            (std::map<uint16_t, int>{{transformer_emit::kCompute, 4 * layers}}));

  // DeepEP: the paired forward's dispatch and the host's spin on its receive counts on the
  // communication stream.
  const TransformerConfig flex = overlap_moe(MoeDispatcher::kFlex, true, 2);
  EXPECT_EQ(by_stream(flex, TaskKind::kCollective, "deep_ep::dispatch"),
            (std::map<uint16_t, int>{{transformer_emit::kCompute, layers},
                                     {transformer_emit::kEpComm, layers}}));
  EXPECT_EQ(by_stream(flex, TaskKind::kHostSync, "deep_ep::dispatch (receive counts)"),
            (std::map<uint16_t, int>{{transformer_emit::kCompute, layers},
                                     {transformer_emit::kEpComm, layers}}));
  EXPECT_EQ(test_configs::kernel_counts(flex),
            test_configs::kernel_counts(overlap_moe(MoeDispatcher::kFlex, false, 2)));
}

// Transformer Engine's partial graphs beside the combined schedule (cuda_graph_scope attn,
// moe_router, moe_preprocess, as Megatron-Bridge's Blackwell MoE recipes set them): each
// pre-dispatch node replays one graph forward and one backward (attention, router and the
// dispatcher's preprocess), the same kernels run, the counts still reach the host after it.
TEST(A2aOverlap, TransformerEngineGraphsReplayEachPreDispatchNode) {
  const TransformerConfig eager = overlap_moe(MoeDispatcher::kAllToAll, true, 2);
  const int layers = static_cast<int>(eager.layers);
  const int micro_batches = 2;
  for (const bool attn : {true, false}) {
    TransformerConfig c = eager;
    c.cuda_graphs = true;
    c.cuda_graph_scope.attn = attn;
    c.cuda_graph_scope.moe_router = true;
    c.cuda_graph_scope.moe_preprocess = attn;
    EXPECT_EQ(test_configs::kernel_counts(c), test_configs::kernel_counts(eager)) << attn;
    EXPECT_EQ(by_stream(c, TaskKind::kLaunch, "cudaGraphLaunch"),
              (std::map<uint16_t, int>{{transformer_emit::kCpuThread, 2 * layers * micro_batches}}))
        << attn;
    EXPECT_EQ(by_stream(c, TaskKind::kHostSync, "cudaEventSynchronize"),
              by_stream(eager, TaskKind::kHostSync, "cudaEventSynchronize"))
        << attn;
  }
}

// Under tensor parallel (sequence parallel, no userbuffers) Transformer Engine's linears defer
// their weight-gradient GEMMs too (module/linear.py keeps the re-gathered input for them): the
// same backward_dw GEMMs as at tensor 1, with the input all-gathers still in the backward.
TEST(A2aOverlap, DelayedWeightGradientsUnderTensorParallelKeepTheirAllGathers) {
  TransformerConfig c = overlap_moe(MoeDispatcher::kAllToAll, true, 2);
  c.parallelism.tensor = 2;
  c.parallelism.sequence = true;
  c.parallelism.data = 8;
  c.parallelism.expert = 8;
  c.global_batch = c.micro_batch * 8 * 2;
  TransformerConfig delayed = c;
  delayed.moe.delay_wgrad = true;
  const int layers = static_cast<int>(c.layers);
  EXPECT_EQ(test_configs::kernel_counts(delayed), test_configs::kernel_counts(c));
  EXPECT_EQ(by_stream(delayed, TaskKind::kKernel, "bf16gemm/wgrad", "backward_dw"),
            (std::map<uint16_t, int>{{transformer_emit::kCompute, 4 * layers}}));
  EXPECT_EQ(by_stream(delayed, TaskKind::kCollective, "c10d::_allgather_base"),
            by_stream(c, TaskKind::kCollective, "c10d::_allgather_base"));
}

// On two DGX H100 nodes (the dispatch crosses the network), four micro-batches: the overlap is
// faster than running the all-to-alls in turn, and hides at most the expert-parallel
// communication that was exposed (it runs the same kernels, which the communication's SMs slow).
TEST(A2aOverlap, HidesAtMostTheExposedExpertParallelCommunication) {
  const test_configs::CalibratedGpu gpu =
      test_configs::calibrated_gpu("h100_sxm5_80gb", "h100_xla");
  const auto step = [&](const TransformerConfig& config) {
    return test_configs::fabric_step(config, gpu, "dgx_h100_cluster_2");
  };
  const auto ep = static_cast<size_t>(ParallelDim::kExpert);
  for (const MoeDispatcher dispatcher : {MoeDispatcher::kAllToAll, MoeDispatcher::kFlex}) {
    const RunSummary in_turn = step(overlap_moe(dispatcher, false, 4));
    const RunSummary overlapped = step(overlap_moe(dispatcher, true, 4));
    const Duration exposed = in_turn.ranks.front().exposed_by_dim[ep];
    std::printf("%s: in turn %.3f ms (exposed EP %.3f ms), overlapped %.3f ms (exposed EP %.3f)\n",
                dispatcher == MoeDispatcher::kFlex ? "flex" : "alltoall",
                in_turn.predicted_iteration_time.seconds() * 1e3, exposed.seconds() * 1e3,
                overlapped.predicted_iteration_time.seconds() * 1e3,
                overlapped.ranks.front().exposed_by_dim[ep].seconds() * 1e3);
    EXPECT_LT(overlapped.predicted_iteration_time, in_turn.predicted_iteration_time);
    EXPECT_GE(overlapped.predicted_iteration_time, in_turn.predicted_iteration_time - exposed);
    EXPECT_LT(overlapped.ranks.front().exposed_by_dim[ep], exposed);
    // The experts' weight gradients deferred: the same work in another order (the dispatch's
    // backward beside the weight gradients rather than after them), within a few percent.
    TransformerConfig delayed = overlap_moe(dispatcher, true, 4);
    delayed.moe.delay_wgrad = true;
    const Duration delayed_time = step(delayed).predicted_iteration_time;
    std::printf("  with delay_wgrad %.3f ms\n", delayed_time.seconds() * 1e3);
    EXPECT_LT(delayed_time, in_turn.predicted_iteration_time);
    EXPECT_NEAR(delayed_time.seconds(), overlapped.predicted_iteration_time.seconds(),
                0.05 * overlapped.predicted_iteration_time.seconds());
  }
}

/// overlap_moe over pipeline 2 with 2 virtual stages (2 layers a chunk), data and expert
/// parallel 8, 8 micro-batches per replica.
TransformerConfig interleaved_moe(bool overlap) {
  TransformerConfig c = overlap_moe(MoeDispatcher::kAllToAll, overlap, 8);
  c.parallelism.pipeline = 2;
  c.parallelism.virtual_stages = 2;
  c.parallelism.schedule = PipelineSchedule::kInterleaved1F1B;
  c.parallelism.data = 8;
  c.parallelism.expert = 8;
  c.global_batch = c.micro_batch * 8 * 8;
  return c;
}

// Interleaved over two stages (combined_1f1b_schedule_for_interleaved_pipelining): one more
// warm-up forward, each steady forward chunk beside the backward chunk after it, the pipeline
// messages in order (the generator checks it); on two DGX H100 nodes faster than without the
// overlap, with less expert-parallel communication exposed.
TEST(A2aOverlap, InterleavedPipelinesPairTheirSteadyChunks) {
  const std::vector<PipelineStep> plain =
      pipeline_schedule(PipelineSchedule::kInterleaved1F1B, 2, 2, 8, 0);
  const std::vector<PipelineStep> combined =
      pipeline_schedule(PipelineSchedule::kInterleaved1F1B, 2, 2, 8, 0, 1);
  // Stage 0 of 2, 2 chunks: (2 - 0 - 1) x 2 + (2 - 1) x 2 = 4 warm-up forwards and a steady
  // one, then a backward; one warm-up forward more under the overlap.
  for (size_t i = 0; i < 4; ++i)
    EXPECT_TRUE(plain[i].forward && !plain[i].steady) << i;
  EXPECT_TRUE(plain[4].forward && plain[4].steady);
  EXPECT_FALSE(plain[5].forward);
  for (size_t i = 0; i < 5; ++i)
    EXPECT_TRUE(combined[i].forward && !combined[i].steady) << i;
  EXPECT_TRUE(combined[5].forward && combined[5].steady);
  EXPECT_FALSE(combined[6].forward);

  const TransformerConfig c = interleaved_moe(true);
  EXPECT_GT(
      by_stream(c, TaskKind::kCollective, "c10d::all_to_all_single").at(transformer_emit::kEpComm),
      0);
  const test_configs::CalibratedGpu gpu =
      test_configs::calibrated_gpu("h100_sxm5_80gb", "h100_xla");
  const auto step = [&](const TransformerConfig& config) {
    return test_configs::fabric_step(config, gpu, "dgx_h100_cluster_2");
  };
  const auto ep = static_cast<size_t>(ParallelDim::kExpert);
  const RunSummary in_turn = step(interleaved_moe(false));
  const RunSummary overlapped = step(c);
  std::printf("interleaved: in turn %.3f ms (exposed EP %.3f ms), overlapped %.3f ms (%.3f)\n",
              in_turn.predicted_iteration_time.seconds() * 1e3,
              in_turn.ranks.front().exposed_by_dim[ep].seconds() * 1e3,
              overlapped.predicted_iteration_time.seconds() * 1e3,
              overlapped.ranks.front().exposed_by_dim[ep].seconds() * 1e3);
  EXPECT_LT(overlapped.predicted_iteration_time, in_turn.predicted_iteration_time);
  EXPECT_LT(overlapped.ranks.front().exposed_by_dim[ep], in_turn.ranks.front().exposed_by_dim[ep]);

  // With delay_wgrad, a dense first layer and a shared expert: every deferred weight gradient
  // is run (the same kernels on both stages), the chunks' last layers' after their sends.
  TransformerConfig mixed = c;
  mixed.moe.first_dense = 1;
  mixed.moe.shared_experts = 1;
  TransformerConfig deferred = mixed;
  deferred.moe.delay_wgrad = true;
  for (const RankId rank : {RankId{0}, RankId{1}}) {
    EXPECT_EQ(test_configs::kernel_counts(deferred, rank), test_configs::kernel_counts(mixed, rank))
        << rank;
  }
  EXPECT_LT(step(deferred).predicted_iteration_time, in_turn.predicted_iteration_time);
}

// The forward's layers are stored as the backward beside it frees its own: one layer more than
// a micro-batch's activations, and nothing more with one micro-batch (no pair).
TEST(A2aOverlap, HoldsOneLayerMoreOfActivations) {
  const TransformerConfig c = overlap_moe(MoeDispatcher::kAllToAll, true, 2);
  EXPECT_DOUBLE_EQ(transformer_micro_batches_in_flight(c, 0), 9.0 / 8.0);
  EXPECT_DOUBLE_EQ(
      transformer_micro_batches_in_flight(overlap_moe(MoeDispatcher::kAllToAll, true, 1), 0), 1.0);
  EXPECT_DOUBLE_EQ(
      transformer_micro_batches_in_flight(overlap_moe(MoeDispatcher::kAllToAll, false, 2), 0), 1.0);
  // Interleaved, stage 1 of 2: 2 warm-up chunks and a steady one, and under the overlap one
  // layer (half a chunk) more, over 2 chunks a stage-set.
  EXPECT_DOUBLE_EQ(transformer_micro_batches_in_flight(interleaved_moe(false), 1), 3.0 / 2.0);
  EXPECT_DOUBLE_EQ(transformer_micro_batches_in_flight(interleaved_moe(true), 1), 3.5 / 2.0);
}

TEST(A2aOverlap, IsRefusedWhereMegatronCoreRefusesItOrTheScheduleIsNotModelled) {
  const auto error = [](const std::string& extra, const std::string& parallelism,
                        uint32_t gpus = 8) {
    return test_configs::small_llama_error(extra, parallelism, gpus);
  };
  const std::string ep8 = "{data: 8, expert: 8}";
  const std::string moe = "  moe: {experts: 8, a2a_overlap: true}\n";
  EXPECT_EQ(error(moe, ep8), "");
  EXPECT_EQ(error("  moe: {experts: 8, a2a_overlap: true, dispatcher: flex}\n", ep8), "");
  EXPECT_EQ(
      error("  cuda_graphs: true\n  cuda_graph_scope: [attn, moe_router, moe_preprocess]\n" + moe,
            ep8),
      "");
  for (const auto& [extra, parallelism, key] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {moe, "{data: 8, expert: 1}", "workload.moe.a2a_overlap"},
           {"  moe: {experts: 8, a2a_overlap: true, dispatcher: allgather}\n", ep8,
            "workload.moe.a2a_overlap"},
           {"  moe: {experts: 8, shared_experts: 1, shared_expert_overlap: true, a2a_overlap: "
            "true}\n",
            ep8, "workload.moe.a2a_overlap"},
           {"  layer_kernels: torchtitan\n  moe: {experts: 8, capacity_factor: 0, a2a_overlap: "
            "true}\n",
            ep8, "workload.moe.a2a_overlap"},
           {"  dtype: fp32\n  attention: unfused\n" + moe, ep8, "workload.dtype"},
           {"  recompute: full\n" + moe, ep8, "workload.recompute"},
           {"  recompute: selective\n  recompute_modules: [moe]\n" + moe, ep8,
            "workload.recompute_modules"},
           {"  moe: {experts: 8, delay_wgrad: true}\n", ep8, "workload.moe.delay_wgrad"},
           {"  moe: {experts: 8, a2a_overlap: true, delay_wgrad: true}\n",
            "{tensor: 2, sequence: true, tp_comm_overlap: true, data: 4, expert: 4}",
            "workload.moe.delay_wgrad"},
           {"  cuda_graphs: true\n  moe: {experts: 8, capacity_factor: 1.0, pad_to_capacity: "
            "true, a2a_overlap: true}\n",
            ep8, "workload.cuda_graphs"},
           {"  cuda_graphs: true\n  cuda_graph_scope: [attn, moe]\n  moe: {experts: 8, "
            "capacity_factor: 1.0, pad_to_capacity: true, a2a_overlap: true}\n",
            ep8, "workload.cuda_graph_scope"},
       }) {
    const std::string e = error(extra, parallelism);
    EXPECT_NE(e.find(key), std::string::npos) << extra << e;
  }
  const std::string pipelined = error(moe, "{data: 8, expert: 8, pipeline: 2}", 16);
  EXPECT_NE(pipelined.find("workload.parallelism.pipeline"), std::string::npos) << pipelined;
}

}  // namespace
}  // namespace upsim
